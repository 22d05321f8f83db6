"""Positive controls: known-broken mechanisms the auditor must flag (never exported).

Sparse-vector variants from Lyu, Su & Li, "Understanding the Sparse Vector
Technique for Differential Privacy", PVLDB 10(6), 2017, Figure 1, each with
the epsilon its original authors claimed (LSL's analysis: Alg. 3, 5, 6 are
not private for any finite epsilon; Alg. 4 is ((1 + 6c)/4) epsilon-DP):

* Alg. 3 (Roth 2011 notes): threshold Lap(Delta/eps1), query noise
  Lap(c Delta/eps2) (half of Alg. 1's), and it releases the noisy value
  q_i + nu_i of each positive. We audit the released values rounded to a
  grid of width 8 (post-processing, so a violation there is a violation of
  Alg. 3; a coarse grid keeps the output space small enough to count).
* Alg. 4 (Stoddard et al. 2014): eps1 = eps/4, query noise Lap(Delta/eps2).
* Alg. 5 (Chen et al. 2015): no query noise at all.
* Alg. 6 (Chen & Machanavajjhala 2015): query noise Lap(Delta/eps2) and no cutoff.

Plus report-noisy-max with a quarter of the Laplace noise it needs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from gpuprivacy import PureDP
from gpuprivacy.audit import AuditableMechanism


def _svt_variant(key, queries, *, threshold, threshold_scale, query_scale, cutoff, release_values, grid=8.0):
    """Bits (or rounded noisy values) of a sparse-vector variant; -inf codes the halted/⊥ slots."""
    k_threshold, k_queries = jax.random.split(key)
    rho = threshold_scale * jax.random.laplace(k_threshold, (), jnp.float64)
    nu = query_scale * jax.random.laplace(k_queries, queries.shape, jnp.float64)
    above = queries + nu >= threshold + rho
    count = jnp.cumsum(above.astype(jnp.int32))
    if cutoff is not None:
        # Positives after the c-th one are never reached (the algorithm halted).
        above = above & (count <= cutoff)
    if release_values:
        return jnp.where(above, jnp.round((queries + nu) / grid), -1e9)
    return above.astype(jnp.int8)


def svt_control(variant: int, *, epsilon=1.0, sensitivity=1.0, threshold=0.0, cutoff=1) -> AuditableMechanism:
    eps1 = epsilon / 4 if variant == 4 else epsilon / 2
    eps2 = epsilon - eps1
    scales = {
        3: dict(threshold_scale=sensitivity / eps1, query_scale=cutoff * sensitivity / eps2, cutoff=cutoff,
                release_values=True),
        4: dict(threshold_scale=sensitivity / eps1, query_scale=sensitivity / eps2, cutoff=cutoff,
                release_values=False),
        5: dict(threshold_scale=sensitivity / eps1, query_scale=0.0, cutoff=None, release_values=False),
        6: dict(threshold_scale=sensitivity / eps1, query_scale=sensitivity / eps2, cutoff=None,
                release_values=False),
    }[variant]
    body = functools.partial(_svt_variant, threshold=threshold, **scales)

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        return jax.vmap(lambda k: body(k, x))(jax.random.split(key, num_samples))

    return AuditableMechanism(
        name=f"lyu-su-li-alg{variant}", sample=lambda key, x, n: run(key, jnp.asarray(x, jnp.float64), int(n)),
        claim=PureDP(epsilon), output_kind="discrete", positive_control=True,
        description=f"Lyu-Su-Li Alg. {variant} (broken sparse vector)")


def too_little_noise_rnm(*, epsilon=1.0, sensitivity=1.0, num_candidates=10) -> AuditableMechanism:
    scale = sensitivity / (2 * epsilon)  # a quarter of the 2 Delta / epsilon that report noisy max needs

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        noise = jax.random.laplace(key, (num_samples, x.shape[0]), jnp.float64)
        return jnp.argmax(x[None, :] + scale * noise, axis=1)

    return AuditableMechanism(
        name="rnm-too-little-noise", sample=lambda key, x, n: run(key, jnp.asarray(x, jnp.float64), int(n)),
        claim=PureDP(epsilon), output_kind="discrete", output_range_size=num_candidates, positive_control=True,
        description="report noisy max with Laplace(Delta / (2 epsilon)) noise")


# ---------------------------------------------------------------------------------------------
# Spec 004 (Lebensold, Precup & Balle, arXiv 2402.06137v2) positive controls.

import math  # noqa: E402

from scipy import special  # noqa: E402

from gpuprivacy import ApproxDP, accounting, mechanisms  # noqa: E402


def _gaussian_expectation_log(log_integrand, num_points=200_001, width=14.0):
    """log E_x[exp(log_integrand(x))], x ~ N(0, 1), by a dense trapezoid rule in log space."""
    x = np.linspace(-width, width, num_points)
    log_values = -0.5 * x * x + log_integrand(x)
    peak = log_values.max()
    return peak + math.log(np.trapezoid(np.exp(log_values - peak), x)) - 0.5 * math.log(2 * math.pi)


def theorem_10_literal_epsilon_post(t, *, threshold, sigma_threshold, sigma_query, sensitivity, lower, upper):
    """Lebensold et al. Theorem 10 AS PRINTED (typo 2 of spec 004 Sec. 3.3): "+x" in the last factor.

    beta_xi(x) = Phi((x - rho + a + xi) / sigmaZ) instead of the correct Phi((-x - rho + a + xi) / sigmaZ).
    (Typo 1, "rho - (b + a)", is invisible at a = 0 and is not used here.) This under-reports the loss
    for t >= 2 and must NEVER be used for accounting; it exists only as a positive control.
    """
    def log_integral(xi):
        return _gaussian_expectation_log(
            lambda x: (t - 1) * special.log_ndtr((sigma_threshold * x + threshold - upper + xi) / sigma_query)
            + special.log_ndtr((sigma_threshold * x - threshold + lower + xi) / sigma_query))
    return log_integral(sensitivity) - log_integral(0.0)


def theorem_10_literal_above_threshold(*, threshold=0.5, sigma_threshold=0.3, sigma_query=0.3 * 3**0.5,
                                       sensitivity=0.2, lower=0.0, upper=1.0, num_queries=2) -> AuditableMechanism:
    """The (correct) Gaussian above threshold, accounted with the literal Theorem 10 formula.

    The claim is the capped ex-ante bound max(max_t eps_literal(t), eps_bot(k)), with the correct
    eps_bot (Theorem 10 does not cover the all-bottom output). At the defaults the literal value is
    0.71 while the true loss of output t = 2 on Lemma 18's worst-case pair is 1.05.
    """
    params = dict(threshold=threshold, sigma_threshold=sigma_threshold, sigma_query=sigma_query,
                  sensitivity=sensitivity, lower=lower, upper=upper)
    literal = [theorem_10_literal_epsilon_post(t, **params) for t in range(1, num_queries + 1)]
    bottom = accounting.gaussian_at_epsilon_no_top(num_queries, sigma_threshold, sigma_query, threshold,
                                                   sensitivity, lower, upper)

    @functools.partial(jax.jit, static_argnums=2)
    def run(key, x, num_samples):
        release = lambda k: mechanisms.gaussian_above_threshold(k, x, **params).value
        return jax.vmap(release)(jax.random.split(key, num_samples))

    return AuditableMechanism(
        name="gaussian-above-threshold-theorem-10-literal",
        sample=lambda key, x, n: run(key, jnp.asarray(x, jnp.float64), int(n)),
        claim=PureDP(max(max(literal), bottom)), output_kind="discrete", output_range_size=num_queries + 1,
        positive_control=True, description="Gaussian AT with the sign typo of Lebensold et al. Theorem 10")


def above_threshold_worst_case_pair(t, num_queries, *, sensitivity, lower, upper):
    """Lemma 18's maximiser for output t: b - Delta vs b before t, a + Delta vs a at t."""
    x = np.full(num_queries, upper - sensitivity)
    x_prime = np.full(num_queries, float(upper))
    x[t - 1], x_prime[t - 1] = lower + sensitivity, lower
    return x, x_prime


# The two-output counterexample to FSRC's Theorem 11/19 (spec 004, Sec. 3.5): every M_t outputs "bad"
# with probability p_t on D and p_t e^-K on D'. Losses (D over D'): bad = K, good = -eta_t with
# eta_t = log((1 - p_t e^-K) / (1 - p_t)) > 0, and the reverse direction has good = eta_t, bad = -K.
# So M_t is eps_post-ex-post-DP with eps_post(bad) = K, eps_post(good) = eta_t, and it is
# (eta_t, delta_t)-pDP iff p_t <= delta_t; otherwise the smallest pDP epsilon at delta_t is K.
COUNTEREXAMPLE = dict(p=0.01, K=5.0, epsilon=1.0, delta=0.01)


def counterexample_schedule(num_steps, *, mode, p=0.01, K=5.0, delta=0.01):
    """Per-step (p_t, eps_max_t, eta_t) as NumPy arrays for the filter modes.

    ``"paper"``: delta_t = delta (emits the PaperModeWarning), p_t = p, so eps_max_t = eta.
    ``"sound"``: delta_t = 6 delta / (pi^2 t^2) < p, so eps_max_t = K and the filter halts at once.
    ``"sound-adapted"``: the analyst adapts the mechanisms, p_t = delta_t, so eps_max_t = eta_t.
    """
    deltas = mechanisms.self_reporting_filter_deltas(num_steps, delta=delta, paper_mode=(mode == "paper"))
    bad_probability = deltas if mode == "sound-adapted" else np.full(num_steps, p)
    eta = np.log1p(-bad_probability * math.exp(-K)) - np.log1p(-bad_probability)
    eps_max = np.where(bad_probability <= deltas, eta, K)
    return bad_probability, eps_max, eta


_SIMULATION_BLOCK = 1 << 16


def simulate_counterexample(key, num_runs, schedule, *, on_neighbour, K=5.0, epsilon=1.0):
    """Runs the FSRC filter over the counterexample mechanisms; returns (loss L of D over D', contains_bad).

    ``schedule`` is :func:`counterexample_schedule`'s output. The transcript is the sequence of released
    outputs; the filter's halting decisions are functions of it, so L = sum over released outputs of
    (K if bad else -eta_t). Simulated under D, or under D' when ``on_neighbour``, in blocks of 2^16 runs
    (block i uses fold_in(key, i)), so every run count compiles one kernel.
    """
    bad_probability, eps_max, eta = schedule
    if on_neighbour:
        bad_probability = bad_probability * math.exp(-K)
    args = (jnp.asarray(bad_probability), jnp.asarray(eps_max), jnp.asarray(eta), K, epsilon)
    blocks = [_simulate_filter(jax.random.fold_in(key, i), *args) for i in range(-(-int(num_runs) // _SIMULATION_BLOCK))]
    loss, contains_bad = (np.concatenate(parts)[:num_runs] for parts in zip(*blocks))
    return loss, contains_bad


@jax.jit
def _simulate_filter(key, bad_probability, eps_max, eta, K, epsilon):
    # All runs advance together: the filter state has a leading runs axis (its step is elementwise).
    # Pr[bad] = p_t, resolved to 2^-32 (uint32 words compared with round(p_t 2^32)).
    cutoff = jnp.round(bad_probability * 2.0**32).astype(jnp.uint32)
    bad = jax.random.bits(key, (bad_probability.shape[0], _SIMULATION_BLOCK), jnp.uint32) < cutoff[:, None]
    state = jax.tree_util.tree_map(lambda leaf: jnp.broadcast_to(leaf, (_SIMULATION_BLOCK,)),
                                   mechanisms.self_reporting_filter_init())

    def step(carry, inputs):
        state, loss, released_bad = carry
        is_bad, eps_max_t, eta_t = inputs  # [runs], scalar, scalar
        eps_post = jnp.where(is_bad, K, eta_t)  # the ex-post loss of the output M_t produced
        state, released = mechanisms.self_reporting_filter_step(state, eps_max_t, eps_post, epsilon=epsilon)
        loss = loss + jnp.where(released, jnp.where(is_bad, K, -eta_t), 0.0)
        return (state, loss, released_bad | (released & is_bad)), None

    zeros = jnp.zeros(_SIMULATION_BLOCK, jnp.float64)
    (_, loss, released_bad), _ = jax.lax.scan(step, (state, zeros, jnp.zeros(_SIMULATION_BLOCK, jnp.bool_)),
                                              (bad, eps_max, eta))
    return loss, released_bad


def counterexample_filter_control(*, mode="paper", num_steps=None, p=0.01, K=5.0, epsilon=1.0,
                                  delta=0.01) -> AuditableMechanism:
    """The counterexample as an auditable mechanism: output = [transcript contains bad]; dataset [0] = D, [1] = D'.

    The claim is the paper's (epsilon, delta) = (1, 0.01). In paper mode it is violated; with the sound
    delta schedule it holds. Building the paper-mode control emits the PaperModeWarning.
    """
    if num_steps is None:
        # Paper mode halts within 101 steps; sound mode at once; sound-adapted never (simulate 256 steps).
        num_steps = {"paper": 128, "sound": 8, "sound-adapted": 256}[mode]
    schedule = counterexample_schedule(num_steps, mode=mode, p=p, K=K, delta=delta)

    def sample(key, x, num_samples):
        on_neighbour = bool(np.asarray(x)[0] > 0.5)
        _, contains_bad = simulate_counterexample(key, num_samples, schedule, on_neighbour=on_neighbour, K=K,
                                                  epsilon=epsilon)
        return contains_bad.astype(np.int8)

    return AuditableMechanism(
        name=f"fsrc-counterexample-{mode}", sample=sample, claim=ApproxDP(epsilon, delta), output_kind="discrete",
        worst_case_pairs=((np.array([0.0]), np.array([1.0])),), output_range_size=2,
        positive_control=(mode == "paper"), description=f"FSRC over the two-output counterexample ({mode} deltas)")
