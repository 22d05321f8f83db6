"""Traced data get the same contract as eager data (docs/fail_closed.md "Traced data").

Under ``jax.jit``, ``jax.vmap`` or ``run_trials(..., batched_args=True)`` the data are tracers: the eager
checks (NaN, inf, rows outside the declared domain) cannot raise, and a withholding that depended on the
values would itself leak. So every data-taking release function refuses traced data at trace time, naming
the argument and the fix, unless the caller chose ``clip=True``, the documented data-independent map of
out-of-range values; with it, the traced release equals the eager release on the mapped data.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpuprivacy import audit, mechanisms, sweeps
from gpuprivacy.mechanisms import instance_optimal
from tests.mechanisms._cases import RELEASE_CASES
from tests.mechanisms.test_fail_closed import _JAX_INTERNALS
from tests.mechanisms.test_invariants import assert_same_release



def _takes_clip(case) -> bool:
    return "clip" in inspect.signature(case.mechanism).parameters


def _vector_data(case) -> bool:
    data = np.asarray(case.data)
    return data.ndim == 1 and data.dtype.kind == "f" and data.shape[0] >= 3


DATA_CASES = [c for c in RELEASE_CASES if c.jittable and c.trace_data and _takes_clip(c) and _vector_data(c)]


def test_the_data_cases_cover_every_family():
    # The selections, AboveThreshold and sparse vector, their Gaussian forms, the piecewise-Laplace and
    # inverse-sensitivity statistics and the medians: the 19 functions the issue found taking traced NaN.
    names = {c.mechanism.__name__ for c in DATA_CASES}
    for expected in ("report_noisy_max", "exponential_mechanism", "permute_and_flip", "above_threshold",
                     "sparse_vector", "laplace_report_noisy_max", "gaussian_report_noisy_max",
                     "gaussian_above_threshold", "gaussian_sparse_vector", "gaussian_sparse_vector_whitehouse",
                     "piecewise_laplace_median", "inverse_sensitivity_median", "piecewise_laplace_quantile",
                     "piecewise_laplace_clipped_mean", "laplace_median", "smooth_sensitivity_median",
                     "exponential_mechanism_median"):
        assert expected in names, expected


def _with_bad_rows(case) -> np.ndarray:
    data = np.array(case.data, dtype=np.float64)
    data[0], data[-1] = np.nan, np.inf
    return data


def _mapped(case, data: np.ndarray) -> np.ndarray:
    """What clip=True maps the data to: the domain's clamp (NaN to lower) where there is a domain."""
    if "lower" in case.kwargs and "upper" in case.kwargs:
        lower, upper = case.kwargs["lower"], case.kwargs["upper"]
        return np.clip(np.where(np.isnan(data), lower, data), lower, upper)
    return data


@pytest.mark.parametrize("case", DATA_CASES, ids=[c.name for c in DATA_CASES])
def test_traced_data_without_clip_are_refused_at_trace_time_naming_the_fix(case):
    key = jax.random.key(0)
    kwargs = {k: v for k, v in case.kwargs.items() if k != "clip"}
    with pytest.raises(TypeError) as refused:
        jax.jit(lambda d: case.mechanism(key, d, *case.args, **kwargs))(jnp.asarray(_with_bad_rows(case)))
    message = str(refused.value)
    assert "clip=True" in message and "cannot be checked" in message, message
    assert not any(internal in message for internal in _JAX_INTERNALS), message
    # The same under vmap over a batch of datasets.
    with pytest.raises(TypeError, match="clip=True"):
        jax.vmap(lambda d: case.mechanism(key, d, *case.args, **kwargs))(jnp.stack([jnp.asarray(case.data)] * 2))


@pytest.mark.parametrize("case", DATA_CASES, ids=[c.name for c in DATA_CASES])
def test_with_clip_the_traced_release_is_the_eager_release_on_the_mapped_data(case):
    key = jax.random.key(3)
    kwargs = {**case.kwargs, "clip": True}
    bad = _with_bad_rows(case)
    traced = jax.jit(lambda d: case.mechanism(key, d, *case.args, **kwargs))(jnp.asarray(bad))
    unbounded = "lower" in inspect.signature(case.mechanism).parameters and "lower" not in case.kwargs
    if not unbounded:  # an unbounded domain maps NaN to -inf, which no eager call accepts: checked below only
        assert_same_release(traced, case.mechanism(key, _mapped(case, bad), *case.args, **kwargs))
    assert bool(getattr(traced.info, "valid", True))
    assert all(np.isfinite(np.asarray(leaf, np.float64)).all() for leaf in jax.tree.leaves(traced.value))


def test_report_noisy_max_no_longer_picks_a_traced_inf_silently():
    # The example: jax.jit(lambda d: report_noisy_max(k, d, epsilon=1.))([3, inf, 4]) chose the inf
    # candidate 500 times in 500 with valid=True. Now: refused; with clip=True the inf is mapped (documented).
    key = jax.random.key(0)
    scores = jnp.array([3.0, jnp.inf, 4.0])
    with pytest.raises(TypeError, match="scores is traced"):
        jax.jit(lambda d: mechanisms.report_noisy_max(key, d, epsilon=1.0))(scores)
    with pytest.raises(ValueError, match="non-finite"):  # positive control: eager raises as before
        mechanisms.report_noisy_max(key, np.asarray(scores), epsilon=1.0)
    released = jax.jit(lambda d: mechanisms.report_noisy_max(key, d, epsilon=1.0, clip=True))(scores)
    assert int(released.value) == 1  # +inf maps to the largest score: the documented map, asked for


def test_clip_false_under_jit_no_longer_releases_out_of_domain_data():
    # The example: piecewise_laplace_median on rows outside [lower, upper] returned 3.86 "valid" under
    # jit where the eager call raises.
    key = jax.random.key(0)
    data = np.array([0.5, 7.0, 9.0, 12.0, -3.0, 0.2])
    with pytest.raises(ValueError, match="outside the declared domain"):
        instance_optimal.piecewise_laplace_median(key, data, epsilon=1.0, lower=0.0, upper=1.0)
    with pytest.raises(TypeError, match="rows outside the domain"):
        jax.jit(lambda d: instance_optimal.piecewise_laplace_median(key, d, epsilon=1.0, lower=0.0, upper=1.0))(data)


def test_run_trials_with_batched_data_needs_clip():
    key = jax.random.key(0)
    data = np.tile(np.array([0.1, 0.4, 0.9]), (4, 1))
    with pytest.raises(TypeError, match="clip=True"):
        mechanisms.run_trials(mechanisms.report_noisy_max, key, 4, data, batched_args=True, epsilon=1.0)
    out = mechanisms.run_trials(mechanisms.report_noisy_max, key, 4, data, batched_args=True, epsilon=1.0, clip=True)
    keys = jax.random.split(key, 4)
    for i in range(4):
        assert int(out.value[i]) == int(mechanisms.report_noisy_max(keys[i], data[i], epsilon=1.0).value)


_UNCLIPPED = {"lower": -5.0, "upper": 5.0}


def test_a_sweep_cell_with_rows_outside_the_domain_and_no_clip_is_not_ok(tmp_path):
    # Was: clip = false silently clamped in a sweep ("status ok", another MAE than the clipped run).
    config = {"name": "unclipped-test", "seed": 3, "trials": 8,
              "mechanism": [{"name": "laplace-median", "epsilon": 1.0, **_UNCLIPPED}],
              "dataset": {"name": ["normal", "cauchy"], "n": [60]}}
    summary = sweeps.run_sweep(config, results_path=tmp_path / "r.jsonl", progress=False)
    by = {r["dataset"]: r for r in summary.rows}
    assert by["normal"]["status"] == "ok"  # positive control: in-domain data run
    assert by["cauchy"]["status"] == "infeasible"
    assert "outside the declared domain [lower, upper] = [-5.0, 5.0]" in by["cauchy"]["error"]
    assert "clip = true" in by["cauchy"]["error"] and by["cauchy"]["metrics"] == {}
    clipped = {**config, "mechanism": [{"name": "laplace-median", "epsilon": 1.0, "clip": True, **_UNCLIPPED}]}
    summary = sweeps.run_sweep(clipped, results_path=tmp_path / "clipped.jsonl", progress=False)
    assert {r["dataset"]: r["status"] for r in summary.rows} == {"normal": "ok", "cauchy": "ok"}


def test_the_auditor_runs_the_mechanisms_own_checks_on_its_datasets():
    entry = audit.get("laplace-median")
    x, x_prime = (np.asarray(d) for d in entry.worst_case_pairs[0])
    result = audit.audit(entry, x, x_prime, num_samples=2_000, key=jax.random.key(0))  # positive control
    assert result.num_samples == 2_000
    outside = np.array(x, dtype=np.float64)
    outside[0] = 1e6  # outside every audited domain
    moved = np.array(x_prime, dtype=np.float64)
    moved[0] = 1e6
    with pytest.raises(ValueError, match="outside the declared domain"):
        audit.audit(entry, outside, moved, num_samples=2_000, key=jax.random.key(0))


def test_an_audit_that_cannot_finish_is_refused_up_front_with_the_numbers():
    entry = audit.get("laplace")
    x, x_prime = (np.asarray(d) for d in entry.worst_case_pairs[0])
    with pytest.raises(ValueError, match=r"num_samples=1e\+12 cannot finish.*hours.*<= that"):
        audit.audit(entry, x, x_prime, num_samples=10**12)
