"""`gpuprivacy doctor`: the sandbox's confinement features on this machine, and JAX's backend."""

import json

import jax
import pytest

from gpuprivacy import _config
from gpuprivacy.cli import main
from gpuprivacy.oracle import _confine

KEYS = {"platform", "machine", "landlock_abi", "landlock_fs", "landlock_net", "landlock_scopes", "seccomp",
        "no_new_privs", "uid", "missing", "jax_version", "backend", "num_devices", "xla_cpu_emitters",
        "untrusted_oracles"}


def test_json_reports_every_feature_and_jax(capsys, monkeypatch):
    monkeypatch.delenv("GPUPRIVACY_ALLOW_UNCONFINED", raising=False)
    assert main(["doctor", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # exactly one JSON object
    payload = json.loads(out)
    assert KEYS <= set(payload)
    assert payload["jax_version"] == jax.__version__ and payload["backend"] == jax.default_backend()
    assert payload["num_devices"] == len(jax.devices())
    assert payload["xla_cpu_emitters"] == _config.CPU_EMITTERS in ("loop", "flags", "default")
    # The project's machines (Linux 6.x, Landlock ABI 7): everything the sandbox needs is there.
    assert payload["landlock_abi"] == _confine.landlock_abi() >= 6
    assert payload["missing"] == [] and payload["untrusted_oracles"] == "confined"


def test_human_output_has_one_line_per_feature(capsys, monkeypatch):
    monkeypatch.delenv("GPUPRIVACY_ALLOW_UNCONFINED", raising=False)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"Landlock ABI: {_confine.landlock_abi()}" in out
    assert "Landlock TCP rules: yes" in out and "seccomp filters: yes" in out
    assert f"jax {jax.__version__}: backend {jax.default_backend()}" in out
    assert "XLA:CPU emitters: " in out
    assert out.rstrip().endswith("untrusted oracles: confined by the kernel")


def _old_kernel():
    return {"platform": "linux", "machine": "x86_64", "landlock_abi": 3, "landlock_fs": True, "landlock_net": False,
            "landlock_scopes": False, "seccomp": True, "no_new_privs": True, "uid": 1000,
            "missing": ["Landlock TCP rules (Landlock ABI >= 4, kernel >= 6.7)",
                        "Landlock signal and abstract-socket scopes (Landlock ABI >= 6, kernel >= 6.12)"]}


def test_a_machine_missing_features_refuses_untrusted_oracles(capsys, monkeypatch):
    monkeypatch.delenv("GPUPRIVACY_ALLOW_UNCONFINED", raising=False)
    monkeypatch.setattr("gpuprivacy.oracle.sandbox_features", _old_kernel)
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["untrusted_oracles"] == "refused"
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "Landlock ABI: 3" in out and "Landlock TCP rules: no" in out and "running as uid 1000\n" in out
    assert ("untrusted oracles: REFUSED on this machine (missing: Landlock TCP rules (Landlock ABI >= 4, kernel >= "
            "6.7); Landlock signal and abstract-socket scopes") in out
    assert "set GPUPRIVACY_ALLOW_UNCONFINED=1 to run them unconfined at your own risk" in out


def test_the_opt_in_is_reported_as_unconfined(capsys, monkeypatch):
    monkeypatch.setenv("GPUPRIVACY_ALLOW_UNCONFINED", "1")
    monkeypatch.setattr("gpuprivacy.oracle.sandbox_features", _old_kernel)
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["untrusted_oracles"] == "unconfined"
    assert main(["doctor"]) == 0
    assert "untrusted oracles: run UNCONFINED (GPUPRIVACY_ALLOW_UNCONFINED=1 is set" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["doctor", "--bogus"]])
def test_an_unknown_option_exits_2(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
