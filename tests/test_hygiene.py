"""Release hygiene: bad or extreme input gets a short, clear error naming the parameter (never a raw
exception, a 390-digit fraction or a hang)."""

import pathlib
import time

import jax
import numpy as np
import pytest

from gpuprivacy import accounting, mechanisms, oracle, subsets
from gpuprivacy.cli import main


@pytest.mark.parametrize("call,names", [
    (lambda: mechanisms.laplace_mechanism(jax.random.key(0), 1.0, epsilon=1e-310), ("Laplace scale", "1e-310")),
    (lambda: mechanisms.laplace_mechanism(jax.random.key(0), 1.0, epsilon=1e-10, sensitivity=1e300),
     ("Laplace scale", "1e+300")),
    (lambda: mechanisms.report_noisy_max(jax.random.key(0), [1.0, 2.0], epsilon=1e-310), ("noise scale", "1e-310")),
    (lambda: accounting.compose(accounting.PureDP(1e308), accounting.PureDP(1e308)), ("composed epsilon",)),
    (lambda: mechanisms.gaussian_mechanism(jax.random.key(0), 1.0, epsilon=1e-10, delta=1e-6, sensitivity=1e300),
     ("sigma", "sensitivity = 1e+300")),
])
def test_overflowing_parameters_name_themselves_in_a_short_message(call, names):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert len(message) < 300 and all(name in message for name in names), message
    assert not any(len(word) > 40 for word in message.split()), "a long run of digits in the message"


def test_a_tiny_epsilon_gaussian_calibration_is_bounded_and_correct():
    # As epsilon -> 0 the analytic sigma tends to Delta / (delta sqrt(2 pi)) (Balle & Wang's condition at
    # epsilon = 0); it used to hang (an overflowing start for the search).
    start = time.perf_counter()
    release = mechanisms.gaussian_mechanism(jax.random.key(0), 1.0, epsilon=1e-310, delta=1e-6)
    assert time.perf_counter() - start < 30
    limit = 1.0 / (1e-6 * np.sqrt(2 * np.pi))
    assert limit * (1 - 1e-6) <= float(release.info.sigma) <= limit * (1 + 1e-6)
    assert mechanisms.gaussian_delta_analytic(float(release.info.sigma), epsilon=1e-310) <= 1e-6


def test_an_oracle_factory_is_named():
    with pytest.raises(TypeError, match=r"least_squares is an oracle factory.*oracle\.least_squares\(\)"):
        oracle.evaluate(oracle.least_squares, np.arange(4.0), subsets.removals(4, 1))


def test_the_cli_reports_an_overflowing_epsilon_by_name(tmp_path, capsys):
    path = tmp_path / "x.csv"
    path.write_text("x\n1\n2\n3\n")
    assert main(["estimate", "--data", str(path), "--column", "x", "--statistic", "mean", "--mechanism", "laplace",
                 "--epsilon", "1e-310", "--sensitivity", "1"]) == 2
    err = capsys.readouterr().err
    assert "Laplace scale" in err and len(err) < 400


@pytest.mark.parametrize("call", [
    lambda data: mechanisms.instance_optimal.piecewise_laplace_median(jax.random.key(0), data, epsilon=1.0,
                                                                      lower=0.0, upper=1.0),
    lambda data: mechanisms.median.private_median(jax.random.key(0), data, epsilon=1.0, min_density=0.5,
                                                  radius=1.0, median_bound=10.0),
])
def test_a_batch_of_datasets_points_at_run_trials(call):
    with pytest.raises(ValueError, match=r"run_trials\(.*batched_args=True"):
        call(np.full((10, 100), 0.5))


def test_evaluate_has_a_default_work_budget():
    with pytest.raises(ValueError, match=r"166,666,666,750,001 subsets.*hours.*max_queries=N"):
        oracle.evaluate(oracle.mean, np.zeros(10**5), subsets.removals(10**5, 3))
    # the override works (a small budget, to keep the test fast)
    with pytest.raises(ValueError, match="more than max_queries=10;"):
        oracle.evaluate(oracle.mean, np.zeros(20), subsets.removals(20, 1), max_queries=10)
    assert oracle.evaluate(oracle.mean, np.zeros(20), subsets.removals(20, 1), max_queries=None).shape == (21,)


@pytest.mark.parametrize("x_prime,reason", [
    (np.arange(7.0), "shapes"),
    (np.full(10, np.nan), "NaN or inf"),
    (np.arange(10.0) + 45.0, "more than the sensitivity"),
])
def test_the_auditor_refuses_a_pair_outside_the_neighbour_relation(x_prime, reason):
    # These pairs used to report "violated, epsilon_lower 6.06 against 1": false alarms.
    from gpuprivacy import audit

    with pytest.raises(ValueError, match=f"not neighbours under its privacy claim.*{reason}"):
        audit.audit(audit.get("report-noisy-max-gumbel"), np.arange(10.0), x_prime, num_samples=100)


def test_the_auditor_refuses_a_delta_of_one_or_more():
    from gpuprivacy import audit

    mechanism = audit.get("report-noisy-max-gumbel")
    x, x_prime = mechanism.worst_case_pairs[0]
    with pytest.raises(ValueError, match=r"delta must be in \[0, 1\)"):
        audit.audit(mechanism, x, x_prime, num_samples=100, delta=2.0)


def test_an_oracle_returning_a_string_is_named():
    def says_hello(rows, valid):
        return "hello"

    with pytest.raises(TypeError, match=r"the oracle .*says_hello cannot be evaluated .*not a valid JAX type"):
        oracle.evaluate(oracle.trusted(says_hello), np.zeros(5), subsets.removals(5, 1))


def test_every_auditable_mechanism_declares_its_neighbour_relation():
    # ... and its own worst-case pairs and random neighbours lie inside it (so the relation is the claim's).
    from gpuprivacy import audit

    for name in audit.registered():
        mechanism = audit.get(name)
        assert mechanism.neighbours is not None, f"{name} declares no neighbour relation"
        for x, x_prime in mechanism.worst_case_pairs:
            assert mechanism.neighbours(x, x_prime) is None, (name, mechanism.neighbours(x, x_prime))
        if mechanism.random_dataset is not None and mechanism.random_neighbour is not None:
            for i in range(3):
                key = jax.random.key(i)
                x = mechanism.random_dataset(key)
                x_prime = mechanism.random_neighbour(jax.random.fold_in(key, 1), x)
                assert mechanism.neighbours(x, x_prime) is None, (name, mechanism.neighbours(x, x_prime))


def test_every_module_marked_slow_exists():
    # tests/conftest.py marks these modules slow by path; a renamed module would silently join the fast set.
    from tests.conftest import SLOW_MODULES

    root = pathlib.Path(__file__).resolve().parent.parent
    missing = sorted(path for path in SLOW_MODULES if not (root / path).is_file())
    assert not missing, f"SLOW_MODULES names modules that do not exist: {missing}"
