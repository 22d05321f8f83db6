"""Privacy filters (FSRC, Whitehouse et al.) and the fully adaptive Gaussian sparse vector (spec 004)."""

import functools
import math

import jax
import numpy as np
import pytest
from scipy import special, stats

from gpuprivacy import accounting, mechanisms
from gpuprivacy.accounting import ApproxDP
from tests._helpers import TEST_FAILURE_RATE
from tests.audit._controls import COUNTEREXAMPLE, counterexample_schedule, simulate_counterexample
from tests.mechanisms import _reference as reference

# ---------------------------------------------------------------------------------------------
# Delta schedules (spec 004, Sec. 3.5 [D]).


def test_inverse_square_schedule_sums_to_at_most_delta():
    deltas = mechanisms.self_reporting_filter_deltas(10**6, delta=1e-3)
    steps = np.arange(1, 6)
    np.testing.assert_allclose(deltas[:5], 6e-3 / (math.pi**2 * steps**2), rtol=1e-11)
    assert np.all(deltas[:5] <= 6e-3 / (math.pi**2 * steps**2))  # rounded down
    assert np.all(np.diff(deltas) < 0)
    # The tail beyond 10^6 steps holds 6 delta / (pi^2 10^6) of the mass.
    assert 1e-3 * (1 - 1e-6) < deltas.sum() <= 1e-3


def test_uniform_schedule_has_a_hard_cap():
    deltas = mechanisms.self_reporting_filter_deltas(7, delta=1e-2, schedule="uniform", max_steps=4)
    np.testing.assert_allclose(deltas[:4], 2.5e-3, rtol=1e-11)
    np.testing.assert_array_equal(deltas[4:], 0.0)
    assert deltas.sum() <= 1e-2


def test_paper_mode_warns_and_uses_the_same_delta_every_step():
    with pytest.warns(mechanisms.PaperModeWarning, match=r"Theorem 11/19.*FALSE.*NO \(epsilon, delta\) guarantee"):
        deltas = mechanisms.self_reporting_filter_deltas(5, delta=1e-2, paper_mode=True)
    np.testing.assert_array_equal(deltas, 1e-2)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(schedule="uniform"), ValueError, r"schedule='uniform' needs max_steps"),
    (dict(schedule="basel"), ValueError, r"schedule must be one of 'inverse_square', 'uniform'; got 'basel'"),
    (dict(delta=0.0), ValueError, r"delta must lie in the open interval \(0, 1\)"),
    (dict(paper_mode=1), TypeError, r"paper_mode must be True or False"),
    (dict(max_steps=0), ValueError, r"max_steps must be >= 1"),
])
def test_bad_schedule_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        mechanisms.self_reporting_filter_deltas(3, **{"delta": 1e-3, **kwargs})


# ---------------------------------------------------------------------------------------------
# The FSRC filter (Algorithm 4).


def fsrc_reference(eps_max, eps_post, epsilon):
    """Algorithm 4 in plain Python: HALT before M_t if spent + eps_max_t >= epsilon."""
    spent, released = 0.0, []
    for bound, loss in zip(eps_max, eps_post):
        if released and not released[-1] or spent + bound >= epsilon:
            released.append(False)
            continue
        released.append(True)
        spent += loss
    return np.array(released), spent


def test_fsrc_never_releases_once_spent_plus_eps_max_reaches_the_budget():
    rng = np.random.default_rng(0)
    step = jax.jit(functools.partial(mechanisms.self_reporting_filter_step, epsilon=2.0))
    for _ in range(50):
        eps_max = rng.uniform(0.0, 0.5, 30)
        eps_post = eps_max * rng.uniform(0.0, 1.5, 30)  # a realised ex-post loss may exceed eps_max
        state, released = mechanisms.self_reporting_filter_init(), []
        for bound, loss in zip(eps_max, eps_post):
            before = state
            state, ok = step(state, bound, loss)
            if bool(ok):
                assert float(before.spent) + bound < 2.0 and not bool(before.halted)
            else:
                assert bool(state.halted) and float(state.spent) == float(before.spent)
            released.append(bool(ok))
        expected, spent = fsrc_reference(eps_max, eps_post, 2.0)
        np.testing.assert_array_equal(released, expected)
        assert float(state.spent) == pytest.approx(spent, rel=1e-14)
        assert int(state.num_run) == expected.sum()


def test_fsrc_halts_at_equality_and_stays_halted():
    state = mechanisms.self_reporting_filter_init()
    state, ok = mechanisms.self_reporting_filter_step(state, 0.5, 0.5, epsilon=1.0)
    assert bool(ok)
    state, ok = mechanisms.self_reporting_filter_step(state, 0.5, 0.0, epsilon=1.0)  # 0.5 + 0.5 >= 1: halt
    assert not bool(ok) and bool(state.halted)
    state, ok = mechanisms.self_reporting_filter_step(state, 0.0, 0.0, epsilon=1.0)  # never resumes
    assert not bool(ok) and int(state.num_run) == 1


def test_fsrc_in_lax_scan_equals_the_python_loop():
    rng = np.random.default_rng(1)
    eps_max, eps_post = rng.uniform(0.0, 0.3, (2, 40))

    @jax.jit
    def scan(eps_max, eps_post):
        def step(state, inputs):
            return mechanisms.self_reporting_filter_step(state, *inputs, epsilon=1.5)
        return jax.lax.scan(step, mechanisms.self_reporting_filter_init(), (eps_max, eps_post))

    state, released = scan(eps_max, eps_post)
    expected, spent = fsrc_reference(eps_max, eps_post, 1.5)
    np.testing.assert_array_equal(np.asarray(released), expected)
    assert float(state.spent) == pytest.approx(spent, rel=1e-14) and bool(state.halted)


def test_fsrc_guarantee():
    assert mechanisms.self_reporting_filter_guarantee(epsilon=1.0, delta=1e-6) == ApproxDP(1.0, 1e-6)


# The two-output counterexample to the paper's Theorem 11/19 (spec 004, Sec. 3.5).

RUNS = 1 << 16  # one simulation block


def _all_good_length(schedule, epsilon):
    """Number of mechanisms FSRC runs on the all-good transcript (deterministic)."""
    _, eps_max, eta = schedule
    released, _ = fsrc_reference(eps_max, eta, epsilon)
    return int(released.sum())


def _binomial_interval(successes, n, alpha):
    lo = stats.beta.ppf(alpha / 2, successes, n - successes + 1) if successes else 0.0
    hi = stats.beta.ppf(1 - alpha / 2, successes + 1, n - successes) if successes < n else 1.0
    return lo, hi


def test_paper_mode_fsrc_exceeds_its_delta_on_the_counterexample(key):
    p, epsilon, delta = COUNTEREXAMPLE["p"], COUNTEREXAMPLE["epsilon"], COUNTEREXAMPLE["delta"]
    with pytest.warns(mechanisms.PaperModeWarning):
        schedule = counterexample_schedule(128, mode="paper", p=p, K=COUNTEREXAMPLE["K"], delta=delta)
    steps = _all_good_length(schedule, epsilon)
    assert steps == 100  # runs until 100 eta >= 1 - eta, with eta = 0.00998
    loss, contains_bad = simulate_counterexample(key, RUNS, schedule, on_neighbour=False, K=COUNTEREXAMPLE["K"],
                                                 epsilon=epsilon)
    loss, contains_bad = np.asarray(loss), np.asarray(contains_bad)
    np.testing.assert_array_equal(loss > epsilon, contains_bad)  # L > 1 iff a bad output was released
    exact = 1 - (1 - p) ** steps  # 0.634
    lo, hi = _binomial_interval(int((loss > epsilon).sum()), loss.size, TEST_FAILURE_RATE)
    assert lo <= exact <= hi
    assert lo > 50 * delta  # Pr[L > epsilon] = 0.63, not <= delta = 0.01


def test_sound_fsrc_holds_on_the_counterexample(key):
    K, epsilon, delta = COUNTEREXAMPLE["K"], COUNTEREXAMPLE["epsilon"], COUNTEREXAMPLE["delta"]
    # Same mechanisms: they are only (K, delta_t)-pDP at delta_t < p, so FSRC halts before the first one.
    schedule = counterexample_schedule(8, mode="sound", p=COUNTEREXAMPLE["p"], K=K, delta=delta)
    loss, contains_bad = simulate_counterexample(key, RUNS, schedule, on_neighbour=False, K=K, epsilon=epsilon)
    assert not np.asarray(contains_bad).any() and not np.asarray(loss).any()
    # Mechanisms adapted to the schedule (p_t = delta_t): they run on and on, yet Pr[L > 1] <= sum p_t <= delta.
    schedule = counterexample_schedule(256, mode="sound-adapted", K=K, delta=delta)
    assert _all_good_length(schedule, epsilon) == 256  # never halts within the simulated horizon
    exact = 1 - np.prod(1 - schedule[0])
    assert exact <= delta
    loss, _ = simulate_counterexample(jax.random.fold_in(key, 1), RUNS, schedule, on_neighbour=False, K=K,
                                      epsilon=epsilon)
    lo, hi = _binomial_interval(int((np.asarray(loss) > epsilon).sum()), RUNS, TEST_FAILURE_RATE)
    assert lo <= exact <= hi and lo <= delta


# ---------------------------------------------------------------------------------------------
# The Whitehouse et al. filter (eq. (40)/(41), corrected reading).


def whitehouse_stopping_time(eps, deltas, epsilon, delta_prime, delta_double_prime):
    """N = inf{n >= 0 : epsilon < sqrt(2 log(1/delta') S_{n+1}) + S_{n+1} / 2 or delta'' < D_{n+1}}."""
    squares, total = np.cumsum(np.square(eps)), np.cumsum(deltas)
    for n in range(len(eps)):
        s = squares[n]
        if epsilon < math.sqrt(2 * math.log(1 / delta_prime) * s) + s / 2 or delta_double_prime < total[n]:
            return n
    return len(eps)


def test_whitehouse_filter_releases_exactly_the_first_n_mechanisms():
    rng = np.random.default_rng(2)
    params = dict(epsilon=2.0, delta_prime=1e-5, delta_double_prime=1e-6)
    step = jax.jit(functools.partial(mechanisms.whitehouse_filter_step, **params))
    for _ in range(50):
        eps = rng.uniform(0.0, 0.4, 25)
        deltas = rng.uniform(0.0, 1e-7, 25)
        state, admitted = mechanisms.whitehouse_filter_init(), []
        for e, d in zip(eps, deltas):
            state, ok = step(state, e, d)
            admitted.append(bool(ok))
        n = whitehouse_stopping_time(eps, deltas, **params)
        np.testing.assert_array_equal(admitted, np.arange(25) < n)
        s = np.sum(np.square(eps[:n]))
        assert float(mechanisms.whitehouse_filter_spend(state, delta_prime=1e-5)) == pytest.approx(
            math.sqrt(2 * math.log(1e5) * s) + s / 2, rel=1e-13)
        assert float(mechanisms.whitehouse_filter_spend(state, delta_prime=1e-5)) <= 2.0


def test_whitehouse_filter_halts_on_the_delta_budget():
    state = mechanisms.whitehouse_filter_init()
    admitted = []
    for _ in range(5):
        state, ok = mechanisms.whitehouse_filter_step(state, 1e-3, 0.3, epsilon=10.0, delta_prime=0.5,
                                                      delta_double_prime=1.0 - 1e-9)
        admitted.append(bool(ok))
    assert admitted == [True, True, True, False, False]


def test_whitehouse_guarantee():
    assert mechanisms.whitehouse_filter_guarantee(epsilon=1.0, delta_prime=1e-6, delta_double_prime=1e-6) == \
        ApproxDP(1.0, 2e-6)
    with pytest.raises(ValueError, match=r"delta_prime \+ delta_double_prime must be < 1"):
        mechanisms.whitehouse_filter_guarantee(epsilon=1.0, delta_prime=0.5, delta_double_prime=0.5)
    with pytest.raises(ValueError, match=r"delta_double_prime must lie in \[0, 1\)"):
        mechanisms.whitehouse_filter_guarantee(epsilon=1.0, delta_prime=0.5, delta_double_prime=-0.1)


# ---------------------------------------------------------------------------------------------
# Fully adaptive Gaussian sparse vector (spec 004, Sec. 4.4 and 4.6).

SV = dict(threshold=0.5, sigma_threshold=0.1, sigma_query=0.1 * math.sqrt(3), sensitivity=0.01, lower=0.0, upper=1.0)
QUERIES = np.random.default_rng(3).uniform(0.0, 1.0, 16)
RUNS_SV = 300  # one batch shape for the FSRC sparse-vector tests, so the kernel compiles once
# Nearly noiseless; Theorem 7's moment term is huge at threshold / sigma_threshold = 500, so cap at the stream.
CLEAR = dict(threshold=0.5, sigma_threshold=1e-3, sigma_query=2e-3, sensitivity=1e-4, lower=0.0, upper=1.0,
             query_cap=True)


def _at_args(params):
    return [params[n] for n in ("sigma_threshold", "sigma_query", "threshold", "sensitivity", "lower", "upper")]


def _zhu_wang(params, delta, conversion="markov"):
    shifted = max(params["threshold"] - params["lower"], 0.0)
    return accounting.zhu_wang_at_epsilon(params["sigma_threshold"], params["sigma_query"], shifted,
                                          params["sensitivity"], delta, conversion=conversion)


def _runs(bits):
    """(stopping times of the completed runs, length of a trailing run without a top, or 0)."""
    tops = np.flatnonzero(bits)
    times = np.diff(np.r_[-1, tops])
    return times, len(bits) - 1 - (tops[-1] if tops.size else -1)


def test_sparse_vector_spend_replays_from_the_released_bits(key):
    epsilon, delta, queries = 3.5, 1e-3, QUERIES
    release = mechanisms.run_trials(mechanisms.gaussian_sparse_vector, key, RUNS_SV, queries, epsilon=epsilon,
                                    delta=delta, **SV)
    post, bottom = accounting.gaussian_at_epsilon_table(len(queries), *_at_args(SV))
    delta_j = 6 * delta / (math.pi**2 * np.arange(1, 17) ** 2)
    eps_max = np.array([_zhu_wang(SV, d) for d in delta_j])
    info = jax.tree_util.tree_map(np.asarray, release.info)
    halted_runs = 0
    for i, bits in enumerate(np.asarray(release.value)):
        # Replay Algorithm 4 from the release: runs that topped after t queries cost eps_post(t); a run that
        # met the end of the stream after L bottoms costs eps_bot(L); run j needs spent + eps_max_j < epsilon.
        times, trailing = _runs(bits)
        segments = [(t, True) for t in times] + ([(trailing, False)] if trailing else [])
        spent, run, halted = 0.0, 0, False
        for t, topped in segments:
            if spent + eps_max[run] >= epsilon:
                halted = True  # the filter refused this run: its segment must be all bottoms
                assert not topped
                break
            spent += post[t - 1] if topped else bottom[t - 1]
            run += 1
        assert bool(info.halted[i]) == halted
        assert int(info.num_runs[i]) == run
        assert float(info.spent[i]) == pytest.approx(spent, rel=1e-12)
        assert float(info.delta_used[i]) == pytest.approx(delta_j[:run].sum(), rel=1e-9)
        assert np.all(np.diff(info.spent_by_step[i]) >= 0) and info.spent_by_step[i][-1] == info.spent[i]
        halted_runs += halted
    assert 0 < halted_runs < RUNS_SV  # both branches are exercised


def _fresh_and_shared_laws(q, length, threshold, sigma_threshold, sigma_query):
    """Bit-pattern laws of restarted AT on a constant stream: fresh threshold noise per run vs one shared draw."""
    x = np.linspace(-12, 12, 24_001)
    weights = stats.norm.pdf(x) * (x[1] - x[0])
    log_below = special.log_ndtr((threshold + sigma_threshold * x - q) / sigma_query)
    log_above = special.log_ndtr(-(threshold + sigma_threshold * x - q) / sigma_query)
    stop = [np.dot(weights, np.exp((t - 1) * log_below + log_above)) for t in range(1, length + 1)]
    survive = [np.dot(weights, np.exp(t * log_below)) for t in range(length + 1)]
    fresh, shared = np.zeros(2**length), np.zeros(2**length)
    for code in range(2**length):
        bits = [(code >> i) & 1 for i in range(length)]
        times, trailing = _runs(np.array(bits, dtype=bool))
        fresh[code] = np.prod([stop[t - 1] for t in times]) * survive[trailing]
        shared[code] = np.dot(weights, np.exp(sum(bits) * log_above + (length - sum(bits)) * log_below))
    return fresh, shared


def test_sparse_vector_restarts_with_fresh_threshold_noise(key):
    # Threshold noise dominates, so reusing it across runs would correlate the bits strongly (spec 004, 7.11).
    params = dict(threshold=0.5, sigma_threshold=0.3, sigma_query=0.1, sensitivity=1e-3, lower=0.0, upper=1.0)
    release = mechanisms.run_trials(mechanisms.gaussian_sparse_vector, key, 200_000, np.full(3, 0.45),
                                    epsilon=1e3, delta=1e-6, query_cap=True, **params)
    bits = np.asarray(release.value)
    assert not np.asarray(release.info.halted).any()
    observed = np.bincount(bits @ np.array([1, 2, 4]), minlength=8)
    fresh, shared = _fresh_and_shared_laws(0.45, 3, 0.5, 0.3, 0.1)
    assert reference.chi_square_pvalue(observed, fresh) > TEST_FAILURE_RATE
    assert reference.chi_square_pvalue(observed, shared) < TEST_FAILURE_RATE  # power


def test_sparse_vector_clear_cut_bits_and_run_count(key):
    queries = np.array([0.9, 0.1, 0.9, 0.9, 0.1, 0.1])
    release = mechanisms.gaussian_sparse_vector(key, queries, epsilon=1e3, delta=1e-6, **CLEAR)
    np.testing.assert_array_equal(np.asarray(release.value), queries > 0.5)
    np.testing.assert_array_equal(np.asarray(release.info.nonprivate_true_answers), queries >= 0.5)
    assert int(release.info.num_runs) == 4 and not bool(release.info.halted)  # 3 tops + a trailing run
    post, bottom = accounting.gaussian_at_epsilon_table(6, *_at_args(CLEAR))
    assert float(release.info.spent) == pytest.approx(post[0] + post[1] + post[0] + bottom[1], rel=1e-12)


def test_sparse_vector_uniform_schedule_caps_the_number_of_runs(key):
    queries = np.array([0.9, 0.9, 0.9, 0.9])
    release = mechanisms.gaussian_sparse_vector(key, queries, epsilon=50.0, delta=1e-6, schedule="uniform",
                                                max_instances=2, **CLEAR)
    assert release.value.tolist() == [True, True, False, False]
    assert int(release.info.num_runs) == 2 and bool(release.info.halted)
    assert float(release.info.delta_used) == pytest.approx(1e-6, rel=1e-9)
    with pytest.raises(ValueError, match="schedule='uniform' needs max_instances"):
        mechanisms.gaussian_sparse_vector(key, queries, epsilon=50.0, delta=1e-6, schedule="uniform", **CLEAR)


def test_sparse_vector_paper_mode_warns_and_reports_the_union_delta(key):
    with pytest.warns(mechanisms.PaperModeWarning) as caught:
        release = mechanisms.gaussian_sparse_vector(key, np.array([0.9, 0.9, 0.1]), epsilon=50.0, delta=1e-4,
                                                    paper_mode=True, **CLEAR)
    assert sum(issubclass(w.category, mechanisms.PaperModeWarning) for w in caught) == 1  # once per call
    assert int(release.info.num_runs) == 3
    assert float(release.info.delta_used) == pytest.approx(3e-4, rel=1e-12)
    with pytest.warns(mechanisms.PaperModeWarning):
        guarantee = mechanisms.gaussian_sparse_vector_guarantee(epsilon=50.0, delta=1e-4, paper_mode=True,
                                                                num_queries=3, **CLEAR)
    assert guarantee.epsilon == 50.0 and guarantee.delta == pytest.approx(3e-4, rel=1e-12)
    assert guarantee.delta >= 3e-4
    with pytest.raises(ValueError, match="pass num_queries"):
        mechanisms.gaussian_sparse_vector_guarantee(epsilon=50.0, delta=1e-4, paper_mode=True, **CLEAR)
    assert mechanisms.gaussian_sparse_vector_guarantee(epsilon=50.0, delta=1e-4, **CLEAR) == ApproxDP(50.0, 1e-4)


def test_sparse_vector_query_cap(key):
    params = dict(CLEAR, sigma_query=CLEAR["sigma_threshold"], query_cap=False)  # sigma_Z < sqrt(3) sigma_X
    with pytest.raises(ValueError, match=r"sigma_query >= sqrt\(3\) \* sigma_threshold.*query_cap=True"):
        mechanisms.gaussian_sparse_vector(key, np.array([0.9, 0.1]), epsilon=10.0, delta=1e-6, **params)
    release = mechanisms.gaussian_sparse_vector(key, np.array([0.9, 0.1]), epsilon=10.0, delta=1e-6,
                                                **dict(params, query_cap=True))
    assert release.value.tolist() == [True, False]


def test_sparse_vector_is_invariant_under_a_common_shift(key):
    # Shifting queries, range and threshold together changes neither the release nor the accounting
    # (Theorem 7 is evaluated at the shifted threshold max(threshold - lower, 0), spec 004 [D]).
    shifted = dict(SV, threshold=SV["threshold"] - 2.0, lower=-2.0, upper=-1.0)
    a = mechanisms.run_trials(mechanisms.gaussian_sparse_vector, key, RUNS_SV, QUERIES, epsilon=3.5, delta=1e-3,
                              **SV)
    b = mechanisms.run_trials(mechanisms.gaussian_sparse_vector, key, RUNS_SV, QUERIES - 2.0, epsilon=3.5,
                              delta=1e-3, **shifted)
    np.testing.assert_array_equal(np.asarray(a.value), np.asarray(b.value))
    np.testing.assert_allclose(np.asarray(a.info.spent), np.asarray(b.info.spent), rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(a.info.num_runs), np.asarray(b.info.num_runs))


def test_whitehouse_sparse_vector_admits_runs_while_the_advanced_composition_spend_fits(key):
    params = dict(epsilon=12.0, delta_prime=1e-3, delta_double_prime=1e-3)
    release = mechanisms.run_trials(mechanisms.gaussian_sparse_vector_whitehouse, key, 100, QUERIES, **params, **SV)
    delta_j = 6 * 1e-3 / (math.pi**2 * np.arange(1, 11) ** 2)
    eps_j = np.array([_zhu_wang(SV, d) for d in delta_j])
    admitted = whitehouse_stopping_time(eps_j, delta_j, 12.0, 1e-3, 1e-3)
    assert 1 <= admitted < 10
    s = np.sum(eps_j[:admitted] ** 2)
    spend = math.sqrt(2 * math.log(1e3) * s) + s / 2
    for bits, num_runs, spent in zip(np.asarray(release.value), np.asarray(release.info.num_runs),
                                     np.asarray(release.info.spent)):
        times, trailing = _runs(bits)
        assert len(times) <= admitted
        if len(times) < admitted:  # the stream ended before the filter did
            assert num_runs == len(times) + (trailing > 0)
        else:
            assert num_runs == admitted
        s = np.sum(eps_j[:num_runs] ** 2)
        assert spent == pytest.approx(math.sqrt(2 * math.log(1e3) * s) + s / 2, rel=1e-12)
        assert spent <= spend * (1 + 1e-12) and spend <= 12.0
    assert mechanisms.gaussian_sparse_vector_whitehouse_guarantee(**params, **SV) == ApproxDP(12.0, 2e-3)


def test_whitehouse_sparse_vector_clear_cut_bits(key):
    queries = np.array([0.9, 0.1, 0.9, 0.9])
    release = mechanisms.gaussian_sparse_vector_whitehouse(key, queries, epsilon=100.0, delta_prime=1e-6,
                                                           delta_double_prime=1e-6, conversion="bbghs", **CLEAR)
    np.testing.assert_array_equal(np.asarray(release.value), queries > 0.5)


@pytest.mark.parametrize("mechanism, extra", [
    (mechanisms.gaussian_sparse_vector, dict(delta=1e-6)),
    (mechanisms.gaussian_sparse_vector_whitehouse, dict(delta_prime=1e-6, delta_double_prime=1e-6)),
])
@pytest.mark.parametrize("name, bad, error, match", [
    ("epsilon", 0.0, ValueError, r"epsilon must be finite and > 0"),
    ("sigma_threshold", -1.0, ValueError, r"sigma_threshold must be finite and > 0"),
    ("sensitivity", 2.0, ValueError, r"sensitivity must lie in \(0, upper - lower\]"),
    ("lower", 1.0, ValueError, r"lower must be < upper"),
    ("schedule", "geometric", ValueError, r"schedule must be one of"),
    ("max_instances", 0, ValueError, r"max_instances must be >= 1"),
    ("query_cap", "no", TypeError, r"query_cap must be True or False"),
])
def test_sparse_vector_bad_parameters(key, mechanism, extra, name, bad, error, match):
    kwargs = dict(CLEAR, epsilon=1.0, **extra)
    kwargs[name] = bad
    with pytest.raises(error, match=match):
        mechanism(key, np.array([0.2, 0.7]), **kwargs)
    with pytest.raises(ValueError, match=r"queries must lie in \[lower, upper\]"):
        mechanism(key, np.array([0.2, 1.7]), **dict(CLEAR, epsilon=1.0, **extra))
