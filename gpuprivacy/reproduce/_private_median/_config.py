"""The parameters of the private-median study: its modes, its data laws and its engine chunks.

The data laws are those of Tzamos, Vlatakis-Gkaragkounis & Zadik (NeurIPS 2020): every one admissible for
the one model (L, r, R) of :data:`MODEL`, each drawn on the device from a :mod:`gpuprivacy.datasets` law.
"""

from __future__ import annotations

import jax

from gpuprivacy import datasets
from gpuprivacy.sweeps import DataSpec, plan_chunk

NAME = "tzamos2020-private-median"
DISTRIBUTIONS = ("uniform", "normal", "cauchy", "laplace", "student_t3", "lower_bound_mixture")
# One (L, r) valid for every distribution (density >= L on [m - r, m + r]); R/r = 10.
MODEL = dict(min_density=0.15, radius=1.0, median_bound=10.0)


def study_config(quick: bool) -> dict:
    """All parameters of the study. Quick: a CI-sized grid (< 60 s on 2 CPU cores)."""
    if quick:
        return dict(seed=3, quick=True, constant=6.0, ns=[100, 1000, 10000], epsilons=[1.0], trials=200,
                    distributions=list(DISTRIBUTIONS), baseline_n=1000, baseline_trials=100, beta=0.1,
                    alphas=[0.1, 0.2, 0.4], privacy_pairs=8, **MODEL)
    return dict(seed=3, quick=False, constant=6.0, ns=[100, 300, 1000, 3000, 10000, 30000, 100000, 300000, 1000000],
                epsilons=[0.1, 0.25, 0.5, 1.0], trials=1000, max_trial_elements=10**8,
                distributions=list(DISTRIBUTIONS), baseline_n=10000,
                baseline_trials=500, beta=0.1, alphas=[0.02, 0.05, 0.1, 0.2, 0.4], privacy_pairs=40, **MODEL)


def _params(config, epsilon):
    return dict(epsilon=epsilon, min_density=config["min_density"], radius=config["radius"],
                median_bound=config["median_bound"], constant=config["constant"])


def sweep_datasets(config) -> dict[str, tuple[str, dict]]:
    """The study's :data:`DISTRIBUTIONS` as registered sweep datasets (``gpuprivacy sweep --list``):
    ``{distribution: (dataset name, its parameters)}``, each a :mod:`gpuprivacy.datasets` law with population
    median 0.

    The mixture is D_1 of Prop. 3.8 (Tzamos, Vlatakis-Gkaragkounis & Zadik 2020): mass 1/2 - L r at
    -(r + R) and at r + R, and 2 L r uniform on [-r, r].
    """
    return {
        "uniform": ("uniform", dict(low=-1.0, high=1.0)),
        "normal": ("normal", dict(loc=0.0, scale=1.0)),
        "cauchy": ("cauchy", dict(loc=0.0, scale=1.0)),
        "laplace": ("laplace", dict(loc=0.0, scale=1.0)),
        "student_t3": ("student-t", dict(df=3.0, loc=0.0, scale=1.0)),
        "lower_bound_mixture": ("lower-bound-mixture", dict(
            min_density=float(config["min_density"]), radius=float(config["radius"]),
            median_bound=float(config["median_bound"]), shift=0.0)),
    }


def data_spec(distribution, n, config):
    """The engine's :class:`~gpuprivacy.sweeps.DataSpec` for one of :data:`DISTRIBUTIONS` (the law of
    :func:`sweep_datasets`), drawn fresh for every trial on the device."""
    laws = sweep_datasets(config)
    if distribution not in laws:
        raise ValueError(f"unknown distribution {distribution!r}; the study's are {list(laws)}")
    law, params = laws[distribution]
    return DataSpec(distribution, int(n), params, distribution=datasets.distribution(law), fresh=True)


def _trials_at(config, n):
    """Trials at sample size n: all of them, except that the full run caps trials x n at
    ``max_trial_elements`` (>= 100 trials) so that n = 10^6 fits a CPU session; the rows record it."""
    cap = config.get("max_trial_elements")
    return config["trials"] if cap is None else min(config["trials"], max(100, cap // n))


# Data values per engine chunk at least (the chunk of the study's former host loop, 32 MB of float64 data).
# The private median routes each chunk's trials on the host, one call per chunk, and a call that meets a
# new number of non-certified trials compiles the full route for it: fewer, larger chunks compile fewer.
_CHUNK_VALUES = 4_000_000


def _chunk(n, trials):
    """Trials per engine chunk: the engine's plan for n or, where more, what fits ``_CHUNK_VALUES``; split
    evenly, so that no padding trial is drawn and run only to be dropped."""
    devices = jax.local_device_count()
    most = max(plan_chunk(n, trials, devices, jax.local_devices()[0].platform),
               _CHUNK_VALUES // n // devices * devices, devices)
    pieces = -(-trials // most)
    return -(-trials // (pieces * devices)) * devices
