"""`gpuprivacy estimate --mechanism laplace|gaussian --oracle FILE.py:f` needs `--clamp LO HI` (issue 27 item 6).

Nothing bounds an analyst's oracle's sensitivity, so the CLI takes none from the user: it clamps the oracle's
value into the public interval [LO, HI] and calibrates the noise to HI - LO, which holds for every oracle.
"""

import json
import subprocess
import sys

import jax
import numpy as np
import pytest

import gpuprivacy as gp
from gpuprivacy.cli import main

# The attack: ~0 on x, 100 on a neighbour x' (one row moved to >= 0.85). A declared --sensitivity 1 was a lie.
ATTACK = """
import jax.numpy as jnp

def f(rows, valid):
    return 100.0 * jnp.any(valid & (rows >= 0.85)).astype(rows.dtype)
"""
# NaN on x, +inf on x': the clamp is total (NaN -> LO, +inf -> HI), never a data-dependent error.
NON_FINITE = """
import jax.numpy as jnp

def f(rows, valid):
    return jnp.where(jnp.any(valid & (rows >= 0.85)), jnp.inf, jnp.nan).astype(rows.dtype)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clamp")
    x = np.linspace(0.1, 0.5, 10)
    x_prime = x.copy()
    x_prime[0] = 0.9  # differs from x in one row
    for name, column in (("x", x), ("x_prime", x_prime)):
        (folder / f"{name}.csv").write_text("v\n" + "".join(f"{float(value)!r}\n" for value in column))
    (folder / "attack.py").write_text(ATTACK)
    (folder / "non_finite.py").write_text(NON_FINITE)
    return folder


def _estimate(capsys, *args):
    code = main(["estimate", "--column", "v", *args])
    captured = capsys.readouterr()
    return code, captured


def _laplace_noise(seed, *, epsilon, sensitivity):
    """The noise the CLI's seed draws: the public mechanism on 0.0 with the same key."""
    release = gp.mechanisms.laplace_mechanism(jax.random.key(seed), 0.0, epsilon=epsilon, sensitivity=sensitivity)
    return float(release.value)


def test_positive_control_the_attack_oracle_jumps_by_100_between_neighbours(files):
    f = gp.oracle.untrusted(str(files / "attack.py"), "f")
    values = {}
    for name in ("x", "x_prime"):
        data = gp.datasets.load_column(files / f"{name}.csv", "v")
        values[name] = float(np.asarray(gp.oracle.evaluate(f, data, gp.subsets.removals(data.shape[0], 0)))[0])
    assert values == {"x": 0.0, "x_prime": 100.0}  # with --sensitivity 1 the release would move by 100 scales


@pytest.mark.parametrize("seed", [1, 2])
def test_the_attack_oracle_is_clamped_and_the_noise_is_calibrated_to_the_interval(files, capsys, seed):
    lower, upper, epsilon = 0.0, 2.0, 0.5
    noise = _laplace_noise(seed, epsilon=epsilon, sensitivity=upper - lower)
    centres = {}
    for name in ("x", "x_prime"):
        code, captured = _estimate(capsys, "--data", str(files / f"{name}.csv"), "--oracle", f"{files}/attack.py:f",
                                   "--mechanism", "laplace", "--epsilon", str(epsilon), "--clamp", str(lower),
                                   str(upper), "--seed", str(seed), "--json")
        assert code == 0, captured.err
        payload = json.loads(captured.out)
        assert payload["guarantee"] == {"type": "PureDP", "epsilon": epsilon}
        assert payload["clamp"] == [lower, upper] and payload["sensitivity"] == upper - lower
        assert payload["scale"] == (upper - lower) / epsilon
        # The release is (the value the noise was added to) + Lap((HI - LO)/epsilon) with this seed's draw.
        centres[name] = payload["value"] - noise
        assert lower <= centres[name] <= upper
    # The oracle gave 0 on x and 100 on x': the mechanism saw 0 and HI, which differ by at most HI - LO.
    assert centres["x"] == pytest.approx(0.0, abs=1e-12)
    assert centres["x_prime"] == pytest.approx(upper, abs=1e-12)


def test_gaussian_with_a_clamp_states_its_interval(files, capsys):
    code, captured = _estimate(capsys, "--data", str(files / "x_prime.csv"), "--oracle", f"{files}/attack.py:f",
                               "--mechanism", "gaussian", "--epsilon", "1", "--delta", "1e-6", "--clamp", "-0.5", "2",
                               "--seed", "3", "--json")
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert payload["guarantee"] == {"type": "ApproxDP", "epsilon": 1.0, "delta": 1e-6}
    assert payload["clamp"] == [-0.5, 2.0] and payload["sensitivity"] == 2.5
    sigma = gp.mechanisms.gaussian_mechanism(jax.random.key(3), 0.0, epsilon=1.0, delta=1e-6, sensitivity=2.5)
    assert payload["sigma"] == float(sigma.info.sigma)
    assert payload["value"] - float(sigma.value) == pytest.approx(2.0, abs=1e-12)


def test_a_non_finite_oracle_value_is_mapped_not_raised(files, capsys):
    noise = _laplace_noise(5, epsilon=1.0, sensitivity=1.0)
    expected = {"x": 0.0, "x_prime": 1.0}  # NaN -> LO, +inf -> HI
    for name, centre in expected.items():
        code, captured = _estimate(capsys, "--data", str(files / f"{name}.csv"), "--oracle",
                                   f"{files}/non_finite.py:f", "--mechanism", "laplace", "--epsilon", "1", "--clamp",
                                   "0", "1", "--seed", "5", "--json")
        assert code == 0, captured.err
        assert json.loads(captured.out)["value"] - noise == pytest.approx(centre, abs=1e-12)


def test_the_human_output_names_the_clamp(files, capsys):
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--oracle", f"{files}/attack.py:f",
                               "--mechanism", "laplace", "--epsilon", "1", "--clamp", "0", "1", "--seed", "1")
    assert code == 0, captured.err
    assert "clamped to [0.0, 1.0] before noise (sensitivity 1.0)" in captured.out


@pytest.mark.parametrize("mechanism,extra", [("laplace", []), ("laplace", ["--sensitivity", "1"]),
                                             ("gaussian", ["--delta", "1e-6", "--sensitivity", "1"])])
def test_without_a_clamp_an_oracle_is_refused_through_a_real_process(files, mechanism, extra):
    proc = subprocess.run([sys.executable, "-m", "gpuprivacy", "estimate", "--data", str(files / "x.csv"), "--column",
                           "v", "--oracle", f"{files}/attack.py:f", "--mechanism", mechanism, "--epsilon", "1",
                           *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    named = {"laplace": "laplace-mechanism", "gaussian": "gaussian-mechanism"}[mechanism]  # older name, answered
    assert f"--mechanism {named} with an analyst's --oracle needs a public clamp interval: pass --clamp LO HI" \
        in proc.stderr
    assert "--mechanism blackbox-estimate, --mechanism sens-o-matic" in proc.stderr
    if "--sensitivity" in extra:
        assert "instead of --sensitivity" in proc.stderr


@pytest.mark.parametrize("clamp,match", [
    (["1", "1"], "needs LO < HI (a public interval of positive width), got --clamp 1.0 1.0"),
    (["2", "1"], "got --clamp 2.0 1.0"),
    (["-1" + "0" * 308, "1e308"], "--clamp width 1e+308 - (-1e+308) is about 2.0e+308"),
])
def test_a_bad_clamp_interval_is_named(files, capsys, clamp, match):
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--oracle", f"{files}/attack.py:f",
                               "--mechanism", "laplace", "--epsilon", "1", "--clamp", *clamp)
    assert code == 2
    assert match in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("clamp,bad", [(["0", "inf"], "inf"), (["nan", "1"], "nan"), (["0", "NaN"], "NaN")])
def test_a_non_finite_clamp_end_is_refused_by_the_parser(files, capsys, clamp, bad):
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", "--data", str(files / "x.csv"), "--column", "v", "--oracle", f"{files}/attack.py:f",
              "--mechanism", "laplace", "--epsilon", "1", "--clamp", *clamp])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--clamp must be finite, got {bad!r}" in err and "Traceback" not in err


def test_sensitivity_and_clamp_together_are_refused_for_an_oracle(files, capsys):
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--oracle", f"{files}/attack.py:f",
                               "--mechanism", "laplace", "--epsilon", "1", "--clamp", "0", "1", "--sensitivity", "1")
    assert code == 2
    assert "--sensitivity cannot be combined with --clamp for an analyst's --oracle" in captured.err
    assert "Remove --sensitivity 1.0" in captured.err


def test_other_mechanisms_do_not_take_a_clamp(files, capsys):
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--oracle", f"{files}/attack.py:f",
                               "--mechanism", "blackbox", "--epsilon", "1", "--lower", "0", "--upper", "1", "--clamp",
                               "0", "1")
    assert code == 2
    assert "--mechanism blackbox-estimate does not use --clamp" in captured.err


def test_a_library_statistic_keeps_its_declared_sensitivity(files, capsys):
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--statistic", "median", "--mechanism",
                               "laplace", "--epsilon", "2", "--sensitivity", "0.5", "--seed", "11", "--json")
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert set(payload) == {"mechanism", "statistic", "params", "column", "epsilon", "delta", "seed", "value", "scale",
                            "guarantee"}
    assert payload["scale"] == 0.25 and payload["guarantee"] == {"type": "PureDP", "epsilon": 2.0}
    noise = _laplace_noise(11, epsilon=2.0, sensitivity=0.5)
    median = float(np.median(np.linspace(0.1, 0.5, 10)))
    assert payload["value"] - noise == pytest.approx(median, abs=1e-12)
    # --clamp is for an analyst's oracle only.
    code, captured = _estimate(capsys, "--data", str(files / "x.csv"), "--statistic", "median", "--mechanism",
                               "laplace", "--epsilon", "2", "--sensitivity", "0.5", "--clamp", "0", "1")
    assert code == 2
    assert "--clamp LO HI applies to an analyst's --oracle only" in captured.err
