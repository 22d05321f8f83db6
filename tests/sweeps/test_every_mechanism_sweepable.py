"""Every public mechanism the auditor knows is sweepable by name, and a trial is the public mechanism's own release.

The mechanisms whose inputs are not one data vector (local bounds, a count, an oracle and a grid, a
covering design) run through the adapters of ``gpuprivacy/sweeps/_adapters.py``; here each trial of a
tiny cell is checked against the public mechanism called directly, on inputs built here independently
of the adapter, with the engine's key split and data draw.
"""

import json
import math

import jax
import numpy as np
import pytest

from gpuprivacy import audit, datasets, designs, mechanisms, oracle, sweeps
from gpuprivacy.cli import main
from gpuprivacy.mechanisms import blackbox, instance_optimal as io, wrappers
from gpuprivacy.sweeps import SweepConfigError, run_sweep
from gpuprivacy.sweeps._mechanisms import NOT_SWEEPABLE, TARGETS, builtin_sweepables

# Auditor registry name -> (sweepable name, the parameters that make it that variant): the registry's name is the
# sweepable's, with the variant's parameters in brackets (tests/test_mechanism_names.py checks the functions).
# (At collection no test has registered a positive control yet: each registers and unregisters its own.)
REGISTRY_TO_SWEEPABLE = {name: audit.parse_name(name) for name in audit.registered()}
assert len(REGISTRY_TO_SWEEPABLE) >= 41


def test_every_auditor_registry_entry_maps_to_a_sweepable_mechanism():
    table = builtin_sweepables()
    registered = set(audit.registered())
    assert set(REGISTRY_TO_SWEEPABLE) <= registered
    # Anything else registered must be a test's positive control (never a public mechanism).
    for name in registered - set(REGISTRY_TO_SWEEPABLE):
        assert audit.get(name).positive_control, f"{name}: a public mechanism the study engine cannot sweep"
    for name, (sweepable, params) in REGISTRY_TO_SWEEPABLE.items():
        assert sweepable in table, (name, sweepable)
        parameters = table[sweepable].parameters
        for pname, value in params.items():
            assert pname in parameters, (name, pname)
            assert parameters[pname].check(value) == value, (name, pname, value)
    assert NOT_SWEEPABLE == {}


U = ("uniform", {"low": 0.0, "high": 1.0})
S = ("scores-uniform", {})
N = ("normal", {"loc": 0.0, "scale": 1.0})
GAUSS = dict(sigma_threshold=0.05, sigma_query=0.1, sensitivity=0.01, lower=0.0, upper=1.0)
BOX = dict(epsilon=1.0, lower=-5.0, upper=5.0, clip=True)


def _gs(n, dim):
    return 10.0 * math.sqrt(dim) / (n // dim)  # (upper - lower) sqrt(dim) / rows: the mean's l2 sensitivity


def _design(mechanism, n, **kw):
    return designs.sample_and_aggregate(n, designs.required_t(mechanism, **kw)[0])


# name -> (dataset, n, config parameters, direct(key, x): the public mechanism on inputs built here).
CASES = {
    "above-threshold": (S, 8, dict(threshold=0.8, epsilon=2.0, sensitivity=0.01),
                        lambda k, x: mechanisms.above_threshold(k, x, threshold=0.8, epsilon=2.0, sensitivity=0.01)),
    "sparse-vector": (S, 8, dict(threshold=0.8, epsilon=2.0, max_positives=2, sensitivity=0.01),
                      lambda k, x: mechanisms.sparse_vector(k, x, threshold=0.8, epsilon=2.0, max_positives=2,
                                                            sensitivity=0.01)),
    "gaussian-above-threshold": (S, 8, dict(threshold=0.8, **GAUSS),
                                 lambda k, x: mechanisms.gaussian_above_threshold(k, x, threshold=0.8, **GAUSS)),
    "gaussian-sparse-vector": (S, 8, dict(threshold=0.8, epsilon=10.0, delta=1e-6, **GAUSS),
                               lambda k, x: mechanisms.gaussian_sparse_vector(k, x, threshold=0.8, epsilon=10.0,
                                                                              delta=1e-6, **GAUSS)),
    "gaussian-sparse-vector-whitehouse": (
        S, 8, dict(threshold=0.8, epsilon=60.0, delta_prime=1e-6, delta_double_prime=1e-6, **GAUSS),
        lambda k, x: mechanisms.gaussian_sparse_vector_whitehouse(k, x, threshold=0.8, epsilon=60.0, delta_prime=1e-6,
                                                                  delta_double_prime=1e-6, **GAUSS)),
    "piecewise-laplace": (N, 9, dict(statistic="median", **BOX),
                          lambda k, x: io.piecewise_laplace(k, io.median_bounds(x, lower=-5.0, upper=5.0, clip=True),
                                                            epsilon=1.0)),
    "inverse-sensitivity": (N, 9, dict(statistic="quantile", quantile=0.3, **BOX),
                            lambda k, x: io.inverse_sensitivity(k, io.quantile_bounds(
                                x, lower=-5.0, upper=5.0, quantile=0.3, clip=True), epsilon=1.0)),
    "piecewise-laplace-count": (U, 9, dict(epsilon=1.0),
                                lambda k, x: io.piecewise_laplace_count(k, int(np.sum(np.asarray(x) >= 0.5)),
                                                                        epsilon=1.0)),
    "inverse-sensitivity-count": (U, 9, dict(epsilon=1.0, cutoff=0.25),
                                  lambda k, x: io.inverse_sensitivity_count(k, int(np.sum(np.asarray(x) >= 0.25)),
                                                                            epsilon=1.0)),
    "piecewise-laplace-vector": (N, 8, dict(dim=2, **BOX),
                                 lambda k, x: io.piecewise_laplace_vector(
                                     k, np.clip(np.asarray(x), -5.0, 5.0).reshape(4, 2).mean(axis=0), [_gs(8, 2)],
                                     epsilon=1.0, global_sensitivity=_gs(8, 2))),
    "sens-o-matic": (U, 5, dict(oracle="mean", grid_lower=0.0, grid_upper=1.0, grid_size=11, epsilon=4.0, beta=0.1),
                     lambda k, x: wrappers.sens_o_matic(k, x, oracle_fn=oracle.mean, grid=np.linspace(0.0, 1.0, 11),
                                                        epsilon=4.0, beta=0.1)),
    "shifted-inverse": (U, 5, dict(oracle="count", grid_lower=0.0, grid_upper=8.0, grid_size=9, epsilon=8.0, beta=0.1,
                                   depth=3),
                        lambda k, x: wrappers.shifted_inverse(k, x, oracle_fn=oracle.count, grid=np.arange(9.0),
                                                              epsilon=8.0, beta=0.1, depth=3)),
    "cummings-durfee": (U, 5, dict(oracle="quantile:0.5", c=1.0, epsilon=1.0),
                        lambda k, x: wrappers.cummings_durfee(k, x, oracle_fn=oracle.quantile(0.5), c=1.0,
                                                              epsilon=1.0)),
    "double-monotonization": (U, 5, dict(oracle="count", r=2000.0, c=1.0, epsilon=8.0, beta=0.05),
                              lambda k, x: wrappers.double_monotonization(k, x, oracle_fn=oracle.count, r=2000.0,
                                                                          c=1.0, epsilon=8.0, beta=0.05)),
    "small-diameter-subset-extension": (
        U, 5, dict(oracle="sum", r=8.0, c=1.0, epsilon=8.0),
        lambda k, x: wrappers.small_diameter_subset_extension(k, x, oracle_fn=oracle.sum_, r=8.0, c=1.0,
                                                              epsilon=8.0)),
    "subset-extension": (U, 5, dict(oracle="count", c=1.0, epsilon=3.0, delta=1e-6),
                         lambda k, x: wrappers.subset_extension(k, x, oracle_fn=oracle.count, c=1.0, epsilon=3.0,
                                                                delta=1e-6)),
    "tahoe": (U, 5, dict(oracle="trimmed-mean:0.2", c=1.0, epsilon=3.0, delta=1e-6),
              lambda k, x: wrappers.tahoe(k, x, oracle_fn=oracle.trimmed_mean(0.2), c=1.0, epsilon=3.0, delta=1e-6)),
    "white-box-laplace": (U, 5, dict(oracle="clipped-mean:0.2:0.8", sensitivity=1.0, epsilon=1.0),
                          lambda k, x: wrappers.white_box_laplace(k, x, oracle_fn=oracle.clipped_mean(0.2, 0.8),
                                                                  sensitivity=1.0, epsilon=1.0)),
    "blackbox-estimate": (U, 12, dict(oracle="median", epsilon=1.0, lower=0.0, upper=1.0, resolution=0.5, beta=0.5),
                          lambda k, x: blackbox.blackbox_estimate(
                              k, x, oracle.median, design=_design("pure", 12, epsilon=1.0, num_outputs=3, beta=0.5),
                              epsilon=1.0, lower=0.0, upper=1.0, resolution=0.5, beta=0.5)),
    "blackbox-estimate-zcdp": (U, 6, dict(oracle="variance", rho=0.5, lower=0.0, upper=1.0, resolution=1.0, beta=0.1),
                               lambda k, x: blackbox.blackbox_estimate_zcdp(
                                   k, x, oracle.variance, design=_design("zcdp", 6, rho=0.5, num_outputs=2, beta=0.1),
                                   rho=0.5, lower=0.0, upper=1.0, resolution=1.0, beta=0.1)),
    "blackbox-binary": (U, 6, dict(oracle="mean", cutoff=0.5, epsilon=1.0, beta=0.25),
                        lambda k, x: blackbox.blackbox_binary(
                            k, x, oracle.trusted(lambda rows, valid: (oracle.mean(rows, valid) >= 0.5).astype(
                                np.float64)), design=_design("binary", 6, epsilon=1.0, beta=0.25),
                            epsilon=1.0, beta=0.25)),
}
TRIALS = 4


def test_every_adapted_mechanism_has_a_case():
    # (The nonprivate baseline, the one sweepable flagged private=False, is no mechanism: it has no case.)
    adapted = {name for name, m in builtin_sweepables().items() if m.private and m.target not in
               ("median", "quantile", "clipped-mean", "argmax", "identity")}
    assert adapted == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_trial_is_the_public_mechanism_called_directly(name):
    (dataset, dist_params), n, params, direct = CASES[name]
    mech = builtin_sweepables()[name]
    dist = datasets.distribution(dataset)
    spec = sweeps.DataSpec(dataset, n, dist_params, distribution=dist)
    cell_key = jax.random.key(7)
    out = sweeps.run_cell(mech, params, spec, cell_key, TRIALS)
    assert out.valid.shape == (TRIALS,)
    # The first and the last trial (each direct call of a host-side wrapper costs about what its trial does).
    trial_keys = jax.random.split(cell_key, TRIALS)
    for i in (0, TRIALS - 1):
        data_key, mechanism_key = jax.random.split(trial_keys[i])
        x = dist.draw(data_key, (n,), **dist_params)
        expected = direct(mechanism_key, x)
        got, want = np.asarray(out.values[i]), np.asarray(expected.value)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        if np.issubdtype(want.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
        # The release's own non-private truth, where it states one, is the target.
        truth = getattr(expected.info, "nonprivate_true_first_index", None)
        if truth is None:
            truth = getattr(expected.info, "nonprivate_true_stopping_time", None)
        if truth is not None:
            assert int(out.targets[i]) == int(truth), name
        if name == "gaussian-sparse-vector":
            np.testing.assert_array_equal(out.targets[i], expected.info.nonprivate_true_answers)
    assert out.guarantee == expected.guarantee


def test_targets_are_the_statistics_the_adapters_estimate():
    x = np.array([0.9, 0.1, 0.95, 0.2, 0.85, 0.3])
    assert int(TARGETS["first-above-threshold"].statistic(x, {"threshold": 0.8})) == 0
    assert int(TARGETS["first-above-threshold"].statistic(x, {"threshold": 0.99})) == -1
    assert int(TARGETS["stopping-time"].statistic(x, {"threshold": 0.92})) == 3
    assert int(TARGETS["stopping-time"].statistic(x, {"threshold": 0.99})) == 0
    answers = TARGETS["threshold-answers"].statistic(x, {"threshold": 0.8, "max_positives": 2})
    assert np.asarray(answers).tolist() == [True, False, True, False, False, False]  # halts at the 2nd top
    assert float(TARGETS["count"].statistic(x, {"cutoff": 0.5})) == 3.0
    stat = TARGETS["statistic"].statistic
    box = {"lower": 0.0, "upper": 1.0}
    assert float(stat(x, {"statistic": "median", **box})) == 0.3  # the left median, rank (n + 1) // 2
    assert float(stat(x, {"statistic": "quantile", "quantile": 0.3, **box})) == 0.2  # rank ceil(0.3 n) = 2
    assert float(stat(x, {"statistic": "clipped-mean", "lower": 0.0, "upper": 0.5})) == pytest.approx(
        (0.5 * 3 + 0.1 + 0.2 + 0.3) / 6)
    assert np.asarray(TARGETS["row-mean"].statistic(x, {"dim": 3, **box})) == pytest.approx(
        x.reshape(2, 3).mean(axis=0))
    assert float(TARGETS["oracle"].statistic(x, {"oracle": "median"})) == pytest.approx(np.median(x))
    assert float(TARGETS["oracle"].statistic(x, {"oracle": "quantile:0.25"})) == pytest.approx(np.quantile(x, 0.25))
    assert int(TARGETS["oracle-indicator"].statistic(x, {"oracle": "mean", "cutoff": 0.5})) == 1
    uniform = datasets.distribution("uniform")
    assert TARGETS["oracle"].population(uniform, {"low": 0.0, "high": 2.0}, {"oracle": "quantile:0.25"}) == 0.5
    assert TARGETS["oracle"].population(uniform, {"low": 0.0, "high": 2.0}, {"oracle": "variance"}) is None


def test_adapted_mechanisms_sweep_by_name_from_a_config(tmp_path):
    config = {"name": "adapted", "seed": 3, "trials": 4,
              "mechanism": [{"name": "sparse-vector", "threshold": 0.5, "epsilon": 100.0, "max_positives": 2,
                             "sensitivity": 1e-9},
                            {"name": "sens-o-matic", "oracle": "median", "grid_lower": 0.0, "grid_upper": 1.0,
                             "grid_size": 5, "epsilon": 4.0, "beta": 0.1}],
              "dataset": {"name": "uniform", "n": 5}}
    rows = {row["mechanism"]: row for row in run_sweep(config, results_path=tmp_path / "r.jsonl",
                                                       progress=False).rows}
    # Noise of scale ~1e-11 against uniform queries: every answer vector is the true one.
    assert rows["sparse-vector"]["metrics"]["selection_accuracy"] == 1.0
    assert rows["sparse-vector"]["target"] == "threshold-answers"
    assert rows["sens-o-matic"]["target"] == "oracle" and rows["sens-o-matic"]["population_value"] == 0.5
    assert rows["sens-o-matic"]["guarantee"] == {"type": "PureDP", "epsilon": 4.0, "neighbours": "add-remove"}
    assert rows["sens-o-matic"]["metrics"]["mae"] is not None


def _cell(**mechanism):
    return {"name": "bad", "seed": 1, "trials": 2, "mechanism": mechanism, "dataset": {"name": "uniform", "n": 5}}


GRID = dict(grid_lower=0.0, grid_upper=1.0, epsilon=1.0, beta=0.1)


@pytest.mark.parametrize("mechanism, match", [
    (dict(name="sens-o-matic", oracle="medain", grid_size=5, **GRID), r"oracle 'medain' is not a known statistic"),
    (dict(name="sens-o-matic", oracle="quantile:2", grid_size=5, **GRID), r"oracle 'quantile:2'"),
    (dict(name="white-box-laplace", oracle="quantile", sensitivity=1.0, epsilon=1.0),
     r"oracle 'quantile': 'quantile' takes 1 argument"),
    (dict(name="sens-o-matic", oracle="mean", grid_size=0, **GRID), r"grid_size must be an integer >= 2.*got 0"),
    (dict(name="shifted-inverse", oracle="count", grid_size=5, grid_lower=1.0, grid_upper=0.0, epsilon=1.0,
          beta=0.1), r"grid_lower must be < grid_upper"),
    (dict(name="piecewise-laplace", statistic="mode", epsilon=1.0, lower=0.0, upper=1.0), r"got 'mode'"),
    (dict(name="piecewise-laplace", statistic="quantile", epsilon=1.0, lower=0.0, upper=1.0),
     r"needs quantile"),
    (dict(name="inverse-sensitivity", statistic="median", quantile=0.5, epsilon=1.0, lower=0.0, upper=1.0),
     r"quantile=0.5 applies to statistic = \"quantile\" only"),
    (dict(name="piecewise-laplace-vector", dim=2, epsilon=1.0, lower=0.0, upper=1.0), r"dim=2 must divide.*n=5"),
    (dict(name="blackbox-binary", oracle="mean", cutoff=0.5, epsilon=1.0, design="block"), r"needs kept_blocks"),
    (dict(name="blackbox-binary", oracle="mean", cutoff=0.5, epsilon=1.0, budget=10), r"budget=10 applies to"),
    (dict(name="blackbox-estimate", oracle="mean", epsilon=1.0, lower=0.0, upper=1.0, resolution=0.5,
          design="latin-square"), r"got 'latin-square'"),
])
def test_a_bad_config_value_is_an_error_naming_it_before_any_cell_runs(tmp_path, mechanism, match):
    with pytest.raises(SweepConfigError, match=match):
        run_sweep(_cell(**mechanism), results_path=tmp_path / "r.jsonl", progress=False)
    assert not (tmp_path / "r.jsonl").exists() or not (tmp_path / "r.jsonl").read_text().strip()


def test_list_shows_every_adapted_mechanism_with_its_parameters(capsys):
    assert main(["sweep", "--list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["not_sweepable"] == {}
    for name in CASES:
        assert name in listing["mechanisms"], name
    assert listing["mechanisms"]["sens-o-matic"]["parameters"]["oracle"] == "REQUIRED"
    assert listing["mechanisms"]["sens-o-matic"]["target"] == "oracle"
    assert listing["mechanisms"]["blackbox-estimate"]["parameters"]["design"] == "'sample-and-aggregate'"
    assert listing["mechanisms"]["piecewise-laplace-count"]["parameters"]["cutoff"] == "0.5"
    assert main(["sweep", "--list"]) == 0
    text = capsys.readouterr().out
    assert "sens-o-matic(oracle=REQUIRED, grid_lower=REQUIRED" in text
