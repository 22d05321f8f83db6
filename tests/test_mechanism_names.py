"""One name per mechanism: the auditor, the study engine and the CLI name each mechanism by its release function.

The name is the public release function's name in kebab case (``laplace-mechanism`` is
:func:`gpuprivacy.mechanisms.laplace_mechanism`); the auditor adds the parameters of a configuration in brackets
(``gaussian-mechanism[calibration=classic]``). Each test resolves the names to functions and compares the
functions, not the strings.
"""

import functools
import inspect

import pytest

from gpuprivacy import audit, mechanisms
from gpuprivacy.cli._estimators import ESTIMATORS, canonical_estimator
from gpuprivacy.cli._main import build_parser
from gpuprivacy.sweeps._mechanisms import builtin_sweepables, kebab


def _public(dotted: str):
    """``"instance_optimal.piecewise_laplace"`` -> the function under :mod:`gpuprivacy.mechanisms`."""
    return functools.reduce(getattr, dotted.split("."), mechanisms)


def _sweep_function(name: str):
    """The public function the study engine's ``name`` runs: the release itself, or the public function its
    adapter calls (an adapter is named after it and calls it by that name)."""
    release = builtin_sweepables()[name].release
    if release.__module__ != "gpuprivacy.sweeps._adapters":
        return release
    source = inspect.getsource(release)
    candidates = [fn for fn in (getattr(ns, release.__name__, None) for ns in (
        mechanisms, mechanisms.instance_optimal, mechanisms.wrappers, mechanisms.blackbox, mechanisms.median))
        if fn is not None and fn is not release]
    assert candidates, f"adapter {release.__name__} is named after no public function"
    fn = candidates[0]
    assert f"{fn.__name__}(" in source, f"adapter {release.__name__} does not call {fn.__name__}"
    return fn


# The registry at collection: positive controls are registered inside their own tests only, never at import.
PUBLIC = audit.registered()


@pytest.mark.parametrize("name", PUBLIC)
def test_audit_name_is_the_sweep_name_of_the_same_function(name):
    base, params = audit.parse_name(name)
    entry = audit.get(name)
    assert not entry.positive_control
    audited = _public(entry.audits[0])
    assert kebab(audited.__name__) == base, (name, entry.audits[0])
    assert base in builtin_sweepables(), f"{name}: the study engine has no mechanism named {base!r}"
    assert _sweep_function(base) is audited
    sweep_parameters = builtin_sweepables()[base].parameters
    for key, value in params.items():  # the bracket's parameters are the release function's own
        assert key in sweep_parameters, (name, key)
        assert sweep_parameters[key].check(value) == value
        assert audit.default_params(name)[key] == value


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_cli_name_is_the_sweep_name_of_the_same_function(name):
    releases = ESTIMATORS[name].releases
    assert releases, f"--mechanism {name} declares no public release function"
    fn = _public(releases[0])
    assert kebab(fn.__name__) == name
    assert _sweep_function(name) is fn
    for dotted in releases[1:]:
        assert callable(_public(dotted))


def test_every_audited_function_has_one_sweep_name():
    by_function = {}
    for name in PUBLIC:
        by_function.setdefault(_public(audit.get(name).audits[0]), set()).add(audit.parse_name(name)[0])
    assert all(len(names) == 1 for names in by_function.values()), by_function


@pytest.mark.parametrize("old, new", [
    ("laplace", "laplace-mechanism"), ("laplace-secure", "laplace-mechanism[secure=true]"),
    ("gaussian-analytic", "gaussian-mechanism[calibration=analytic]"),
    ("gaussian-classic", "gaussian-mechanism[calibration=classic]"), ("gaussian-zcdp", "gaussian-mechanism-zcdp"),
    ("report-noisy-max-gumbel", "report-noisy-max[noise=gumbel]"), ("plm-median", "piecewise-laplace-median"),
    ("inv-count", "inverse-sensitivity-count"), ("plm-vector-l2", "piecewise-laplace-vector[norm=l2]"),
    ("smooth-sensitivity-median-cauchy", "smooth-sensitivity-median[noise=cauchy]"),
    ("laplace-report-noisy-max-post-processing", "laplace-report-noisy-max[calibration=post_processing]"),
    ("seed001-laplace-median", "laplace-median"),
])
def test_old_audit_names_are_aliases(old, new):
    assert audit.canonical_name(old) == new
    assert audit.get(old) is audit.get(new)


def test_audit_bracket_order_and_conflicts():
    assert audit.canonical_name("gaussian-mechanism[calibration=classic]") == "gaussian-mechanism[calibration=classic]"
    with pytest.raises(ValueError, match=r"2 configurations; name one: gaussian-mechanism\[calibration=analytic\]"):
        audit.get("gaussian-mechanism")
    with pytest.raises(ValueError, match="calibration=classic; got calibration='analytic'"):
        audit.get("gaussian-mechanism[calibration=classic]", calibration="analytic")
    with pytest.raises(ValueError, match="Did you mean 'laplace-mechanism'"):
        audit.get("laplace-mechansim")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        audit.get("gaussian-mechanism[classic]")


@pytest.mark.parametrize("old, new", [("laplace", "laplace-mechanism"), ("gaussian", "gaussian-mechanism"),
                                      ("blackbox", "blackbox-estimate"), ("private_median", "private-median")])
def test_old_cli_names_are_aliases(old, new):
    args = build_parser().parse_args(["estimate", "--data", "d.csv", "--column", "x", "--statistic", "mean",
                                      "--mechanism", old, "--epsilon", "1"])
    assert args.mechanism == new
    assert new in ESTIMATORS


def test_cli_accepts_the_python_name():
    assert canonical_estimator("private_median") == "private-median"
    assert canonical_estimator("laplace_mechanism") == "laplace-mechanism"


# The auditor checks each claim on its own inputs; the study engine states the relation on a trial's data. Where
# the audit's input is a function of the data (a count, a row mean), its "bounded" relation is the image of the
# data relation: one record changes the count by at most 1, one row moves the mean by at most its sensitivity.
_IMAGE_OF_BOUNDED = {"count": "swap-or-add-remove", "row-mean": "swap"}


@pytest.mark.parametrize("name", PUBLIC)
def test_the_sweep_states_the_neighbour_relation_the_auditor_checks(name):
    base = audit.parse_name(name)[0]
    sweepable = builtin_sweepables()[base]
    relation = audit.get(name).neighbours.relation
    if relation == "bounded":
        assert sweepable.neighbours == _IMAGE_OF_BOUNDED.get(sweepable.target, "bounded"), (name, sweepable.target)
    else:
        assert sweepable.neighbours == relation, name
