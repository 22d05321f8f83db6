"""The auditor's engine: chunked on-device counting, device splits, host fallbacks, Clopper-Pearson off-device.

Counts are integers and each block of samples depends only on ``(key, block number)``, so an audit's
result must be identical for every chunk size, device count and driver (compiled step or Python loop).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from jax.sharding import Mesh
from scipy import stats

from gpuprivacy import PureDP, audit
from gpuprivacy.audit import _streams as engine  # white-box knobs, as tests/oracle/test_engine_scale.py does
from tests.audit._controls import svt_control

HERE = Path(__file__).parent
BLOCK = audit.SAMPLES_PER_CALL


def _outcome(result):
    return (result.epsilon_lower, result.event, result.direction, result.p_lower, result.q_upper, result.violated)


@pytest.mark.parametrize("name,num_samples", [
    ("report-noisy-max-gumbel", 3 * BLOCK + 5),  # declared range: 4 blocks per side, the last one partial
    ("laplace", 6 * BLOCK + 7),  # real outputs: 3 blocks per half (pilot + 2), thresholds from the pilot
])
def test_results_do_not_depend_on_chunk_size(name, num_samples):
    mechanism = audit.get(name)
    x, x_prime = mechanism.worst_case_pairs[0]
    outcomes = {chunk: _outcome(audit.audit(mechanism, x, x_prime, num_samples=num_samples, key=jax.random.key(11),
                                            chunk_size=chunk))
                for chunk in (1, 2 * BLOCK + 1, None, 10**9)}
    assert len(set(outcomes.values())) == 1, outcomes


@pytest.mark.parametrize("name", ["report-noisy-max-gumbel", "laplace"])
def test_vmapped_micro_batches_of_blocks_give_the_same_result(name, monkeypatch):
    # An accelerator's budget draws several blocks per (vmapped) sampler call; a CPU's draws one. Force the
    # accelerator's path here: the blocks, and so the result, must not change.
    mechanism = audit.get(name)
    x, x_prime = mechanism.worst_case_pairs[0]
    run = lambda: _outcome(audit.audit(mechanism, x, x_prime, num_samples=6 * BLOCK + 7, key=jax.random.key(16)))
    reference = run()
    from gpuprivacy import _memory
    monkeypatch.setitem(_memory._BUDGETS["audit"], "cpu", (1 << 27, 1 << 30))  # 2 to 32 blocks per call, a few steps
    plan = engine._plan_stream(BLOCK, 336, Mesh(np.asarray(jax.devices()[:1]), ("samples",)), None)
    assert plan.micro_batch == 4 and plan.per_device % plan.micro_batch == 0
    assert run() == reference


def test_undeclared_range_results_do_not_depend_on_chunk_size():
    control = svt_control(5)
    x, x_prime = np.r_[np.ones(5), np.zeros(5)], np.r_[np.zeros(5), np.ones(5)]
    outcomes = {chunk: _outcome(audit.audit(control, x, x_prime, num_samples=4 * BLOCK + 3, key=jax.random.key(12),
                                            chunk_size=chunk))
                for chunk in (1, None)}
    assert len(set(outcomes.values())) == 1, outcomes
    assert outcomes[None][-1]  # still flagged


def _gumbel_sampler(on_host):
    @jax.jit
    def run(key, x):
        return jnp.argmax(x[None, :] + jax.random.gumbel(key, (BLOCK, x.shape[0])), axis=1).astype(jnp.int32)

    def sample(key, x, num_samples):
        data = np.asarray(x, np.float64) if on_host else jnp.asarray(x, jnp.float64)  # np.asarray: not traceable
        return run(key, data)[:num_samples]

    return sample


def _laplace_sampler(on_host):
    @jax.jit
    def run(key, x):
        return x[0] + jax.random.laplace(key, (BLOCK,), jnp.float64)

    def sample(key, x, num_samples):
        data = np.asarray(x, np.float64) if on_host else jnp.asarray(x, jnp.float64)
        return run(key, data)[:num_samples]

    return sample


@pytest.mark.parametrize("kind", ["discrete", "real"])
def test_a_sampler_that_needs_its_data_on_the_host_gives_the_same_result(kind):
    # np.asarray(x) inside the sampler cannot be traced: the auditor drives it block by block from Python and
    # counts its blocks with the same device counters. Same blocks, same keys: the same result.
    if kind == "discrete":
        make, x, x_prime, extra = _gumbel_sampler, np.eye(6)[0], np.zeros(6), {"output_range_size": 6}
    else:
        make, x, x_prime, extra = _laplace_sampler, np.zeros(1), np.ones(1), {}
    results = [audit.audit(audit.AuditableMechanism(name=f"{kind}-{on_host}", sample=make(on_host), claim=PureDP(1.0),
                                                    output_kind=kind, **extra),
                           x, x_prime, num_samples=3 * BLOCK + 1, key=jax.random.key(13))
               for on_host in (False, True)]
    assert _outcome(results[0]) == _outcome(results[1])
    assert results[0].epsilon_lower > 0.5


def test_a_real_valued_audit_compiles_its_sampler_once_the_pilot_drawn_by_the_counting_step():
    # The pilot (block 0 of each selection stream, whose quantiles place the thresholds) is drawn by the same
    # compiled step that then counts the streams, so the sampler is compiled into one program per audit. Drawn
    # from Python instead, it would be compiled a second time as a program of its own: seen here as a lowering of
    # the sampler's jit as a top-level program.
    @jax.jit
    def laplace_block_for_the_pilot_test(key, x):
        return x[0] + jax.random.laplace(key, (BLOCK,), jnp.float64)

    def sample(key, x, num_samples):
        return laplace_block_for_the_pilot_test(key, jnp.asarray(x, jnp.float64))[:num_samples]

    lowered = []

    def listener(event, duration, **kw):
        if event == "/jax/core/compile/jaxpr_to_mlir_module_duration":
            lowered.append(kw.get("fun_name"))

    mechanism = audit.AuditableMechanism(name="pilot", sample=sample, claim=PureDP(1.0), output_kind="real")
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        result = audit.audit(mechanism, np.zeros(1), np.ones(1), num_samples=3 * BLOCK + 1, key=jax.random.key(13))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert "jit(laplace_block_for_the_pilot_test)" not in lowered, lowered
    assert lowered.count("jit(per_device_step)") == 1, lowered
    # The same samples as the sampler called from Python (a traceable sampler and a host-driven one agree on the
    # whole audit: test_a_sampler_that_needs_its_data_on_the_host_gives_the_same_result[real]).
    assert result.epsilon_lower > 0.5


def test_outputs_wider_than_a_word_are_counted_on_the_host_with_the_same_result():
    # The same outputs as int32 scalars (one word: counted on the device) and as int64 triples (three words:
    # counted on the host, block by block).
    scalar = _gumbel_sampler(False)

    def triple(key, x, num_samples):
        out = scalar(key, x, num_samples).astype(jnp.int64)
        return jnp.stack([out, jnp.zeros_like(out), -out], axis=1)

    results = [audit.audit(audit.AuditableMechanism(name="rows", sample=sample, claim=PureDP(1.0),
                                                    output_kind="discrete", output_range_size=6),
                           np.eye(6)[0], np.zeros(6), num_samples=2 * BLOCK, key=jax.random.key(14))
               for sample in (scalar, triple)]
    assert _outcome(results[0])[2:] == _outcome(results[1])[2:] and results[0].epsilon_lower == results[1].epsilon_lower
    assert results[1].event == "output == [0, 0, 0]" and results[0].event == "output == 0"


def test_more_distinct_outputs_than_a_device_table_holds_are_counted_on_the_host():
    # No declared range and ~10^5 distinct outputs: the selection table (4096 rows) overflows, the stream is
    # counted again on the host, and the audit of identical inputs finds nothing.
    def sample(key, x, num_samples):
        return jax.random.randint(key, (num_samples,), 0, 10**6, jnp.int32)

    mechanism = audit.AuditableMechanism(name="many-outputs", sample=sample, claim=PureDP(1.0),
                                         output_kind="discrete")
    result = audit.audit(mechanism, np.zeros(1), np.zeros(1), num_samples=2 * BLOCK, key=jax.random.key(15))
    assert not result.violated and result.epsilon_lower == 0.0


def test_more_distinct_outputs_than_declared_is_an_error():
    mechanism = audit.AuditableMechanism(name="liar", sample=lambda key, x, n: jax.random.randint(key, (n,), 0, 5),
                                         claim=PureDP(1.0), output_kind="discrete", output_range_size=2)
    with pytest.raises(ValueError, match="distinct outputs but declares an output range of 2"):
        audit.audit(mechanism, np.zeros(1), np.zeros(1), num_samples=1000)


def test_negative_zero_and_nans_are_one_output_each():
    # Outputs are compared by value on the device: -0.0 is 0.0, and every NaN is the same output.
    def sample(key, x, num_samples):
        u = jax.random.randint(key, (num_samples,), 0, 3)
        return jnp.where(u == 0, -0.0, jnp.where(u == 1, 0.0, jnp.nan))

    mechanism = audit.AuditableMechanism(name="zeros", sample=sample, claim=PureDP(1.0), output_kind="discrete",
                                         output_range_size=2)
    result = audit.audit(mechanism, np.zeros(1), np.zeros(1), num_samples=1000)  # two outputs: no error
    assert result.epsilon_lower == 0.0


def test_bad_chunk_size_and_mesh_are_clear_errors():
    mechanism = audit.get("laplace")
    with pytest.raises(ValueError, match="chunk_size"):
        audit.audit(mechanism, np.zeros(1), np.ones(1), num_samples=100, chunk_size=0)
    with pytest.raises(ValueError, match="axis named 'samples'"):
        audit.audit(mechanism, np.zeros(1), np.ones(1), num_samples=100,
                    mesh=Mesh(np.asarray(jax.devices()), ("subsets",)))
    # A one-device mesh of the right name is accepted.
    audit.audit(mechanism, np.zeros(1), np.ones(1), num_samples=100, mesh=Mesh(np.asarray(jax.devices()[:1]),
                                                                               ("samples",)))


def _on_devices(devices, tmp_path):
    path = tmp_path / f"devices-{devices}.json"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update({"XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"})
    proc = subprocess.run([sys.executable, str(HERE / "_audit_devices_worker.py"), str(path)], env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(path.read_text())


@pytest.mark.slow
def test_four_devices_split_the_draws_instead_of_repeating_them(tmp_path):
    # Equal results alone would also hold if every device drew every block. The property is the work each
    # device does: the samples it counted (read from its own counter state), the loop its compiled step runs,
    # the steps the host runs, and the process's CPU time.
    one, four = (_on_devices(devices, tmp_path) for devices in (1, 4))
    assert one["device_count"] == 1 and four["device_count"] == 4
    assert one["results"] == four["results"]
    for run in (one, four):
        assert len({tuple(v) for k, v in run["results"].items() if k.startswith("declared")}) == 1
        assert len({tuple(v) for k, v in run["results"].items() if k.startswith("real")}) == 1
        assert run["device_counts_equal_host_counts"]
    n, block = four["num_samples"], four["block"]
    blocks = -(-n // block)
    for run, devices in ((one, 1), (four, 4)):
        share = -(-blocks // devices)
        assert run["run_blocks"] == share
        assert sum(run["per_device_counted"]) == n and len(run["per_device_counted"]) == devices
        assert max(run["per_device_counted"]) <= share * block
        # The step's scan covers per_device blocks, in micro-batches; the host runs num_steps steps.
        assert run["per_device"] // run["micro_batch"] in run["trip_counts"]
        assert share <= run["num_steps"] * run["per_device"] < share + run["per_device"]
    assert four["cpu_seconds"] < 1.6 * one["cpu_seconds"], (four["cpu_seconds"], one["cpu_seconds"])


# --------------------------------------------------------------------------- Clopper-Pearson, off-device


def _binomial_cdf(k, n, p):
    """P[Bin(n, p) <= k] exactly (mpmath, 50 digits), for small k."""
    with mpmath.workdps(50):
        p = mpmath.mpf(p)
        term = (1 - p) ** n
        total = term
        for i in range(1, k + 1):
            term = term * (n - i + 1) / i * p / (1 - p)
            total += term
        return total


@pytest.mark.parametrize("n", [1, 2, 10, 1000, 10**5, 5 * 10**5, 10**7])
@pytest.mark.parametrize("alpha", [2.5e-8, 1e-3, 0.05, 0.4])
def test_clopper_pearson_is_never_narrower_than_scipy_and_as_tight(n, alpha):
    k = np.unique(np.clip([0, 1, 2, 5, 7, 500, 1001, 5000, n // 3, n // 2, n - 5000, n - 1001, n - 7, n - 1, n], 0, n))
    lower, upper = audit.clopper_pearson(k, n, alpha)
    ref_lower = np.where(k == 0, 0.0, stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1))
    ref_upper = np.where(k == n, 1.0, stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)))
    assert np.all(lower <= ref_lower) and np.all(upper >= ref_upper)
    # Wider by the stated 1e-6 (relative to the nearer of 0 and 1) plus float error (1e-8 relative, and a few
    # ulps of numbers near 1); scipy itself errs by more than that for k near 1000 at large n (checked exactly
    # below), so those are compared loosely.
    slack = lambda v: (1e-6 + 1e-8) * np.minimum(v, 1 - v) + 4e-16
    exact = np.minimum(np.abs(k - 1000), np.abs(n - k - 1000)) > 10
    np.testing.assert_array_less((ref_lower - lower)[exact], slack(ref_lower[exact]))
    np.testing.assert_array_less((upper - ref_upper)[exact], slack(ref_upper[exact]))
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-5)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-5)


@pytest.mark.parametrize("k,n,alpha", [(0, 10**9, 1e-3), (1, 10**9, 2.5e-8), (5, 10**9, 1e-3), (999, 10**7, 2.5e-8),
                                       (999, 10**9, 1e-3), (20, 10**9, 0.7)])
def test_clopper_pearson_upper_bounds_are_exact_at_a_billion_trials(k, n, alpha):
    # The upper bound solves P[Bin(n, p) <= k] = alpha: at the bound less its 1e-6 margin the exact binomial sum
    # is alpha to 1e-7 (the sum's log moves ~n p ~ 20 times faster than log p, so p is right to ~5e-9), and at
    # the bound itself it is below alpha (the bound is conservative).
    _, (upper,) = audit.clopper_pearson([k], n, alpha)
    raw = upper / (1 + 1e-6)
    assert abs(float(_binomial_cdf(k, n, raw)) / alpha - 1) < 1e-7
    assert _binomial_cdf(k, n, upper) < alpha


def test_clopper_pearson_repeated_counts_are_solved_once_and_agree():
    k = np.array([[3, 3, 7], [7, 3, 0]])
    lower, upper = audit.clopper_pearson(k, 100, 1e-3)
    assert lower.shape == upper.shape == (2, 3)
    assert lower[0, 0] == lower[0, 1] == lower[1, 1] and upper[0, 2] == upper[1, 0]
