"""The sandbox worker is a jail: the analyst's code cannot reach the data holder's files, memory, network or code.

Every attack runs twice. The positive control runs it against a worker started WITHOUT kernel confinement (the
test-only switch ``_Worker.force_unconfined``), where it must succeed: otherwise a refusal below would only show
a broken attack. Then the same attack, in a fresh trace, runs against the confined worker and must fail. Each
attack bakes what it learned into the constant its oracle returns (a constant has sensitivity 0, so every
wrapper's check passes while the secret rides in the value), so the test reads the attack's result from the
engine's own ``evaluate``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import uuid

import jax
import numpy as np
import pytest

import gpuprivacy as gp
from gpuprivacy.oracle import _confine, _sandbox

pytestmark = pytest.mark.skipif(_confine.features()["missing"] != [],
                                reason=f"this kernel cannot confine the worker: {_confine.features()['missing']}")

X = np.linspace(0.1, 0.5, 6)
FAMILY = gp.subsets.removals(len(X), 1)
FOUND, NOT_FOUND = 1.0, -1.0


@pytest.fixture
def unconfined():
    """A worker without kernel confinement, for the positive controls only (see :func:`_both`)."""
    worker = _sandbox._Worker()
    worker.force_unconfined = True
    try:
        yield worker
    finally:
        worker.stop()


def _run(attack: str) -> float:
    """The attack's oracle, as an analyst's source (a fresh trace: a nonce defeats the rebuild cache)."""
    source = f"# {uuid.uuid4().hex}\nimport jax.numpy as jnp\n{textwrap.dedent(attack)}\n" \
             "def f(rows, valid):\n    return jnp.float64(RESULT) + 0.0 * rows.sum()\n"
    values = np.asarray(gp.oracle.evaluate(gp.oracle.untrusted(source=source, name="f"), X, FAMILY))
    assert np.all(values == values[0])
    return float(values[0])


def _both(attack: str, unconfined_worker) -> tuple[float, float]:
    confined_worker = _sandbox._WORKER
    _sandbox._WORKER = unconfined_worker
    try:
        control = _run(attack)
    finally:
        _sandbox._WORKER = confined_worker
    assert unconfined_worker.confined is False
    result = _run(attack)
    assert _sandbox._WORKER.confined is True
    return control, result


def _engine_pid_lookup() -> str:
    # The tracing child's parent is the worker's template; the template's parent is the engine.
    return textwrap.dedent("""
        import os
        def _parent_of(pid):
            with open(f"/proc/{pid}/status") as fh:
                return int(next(l for l in fh if l.startswith("PPid:")).split()[1])
        try:
            ENGINE = _parent_of(os.getppid())
        except Exception:
            ENGINE = None
    """)


def test_reading_a_data_file(tmp_path, unconfined):
    secret = tmp_path / "secret.csv"
    secret.write_text("0.8125\n")
    attack = f"""
try:
    RESULT = float(open({str(secret)!r}).read().split()[0])
except Exception:
    RESULT = {NOT_FOUND}
"""
    control, confined = _both(attack, unconfined)
    assert control == 0.8125  # the unconfined worker reads the data holder's file
    assert confined == NOT_FOUND


def test_reading_the_engine_command_line(unconfined):
    # The engine's own command line (under pytest-xdist a worker's does not name pytest): what the attack
    # must read back exactly for the positive control to find it.
    with open("/proc/self/cmdline", "rb") as fh:
        command_line = fh.read()
    attack = _engine_pid_lookup() + f"""
try:
    RESULT = {FOUND} if open(f"/proc/{{ENGINE}}/cmdline", "rb").read() == {command_line!r} else {NOT_FOUND}
except Exception:
    RESULT = {NOT_FOUND}
"""
    assert _both(attack, unconfined) == (FOUND, NOT_FOUND)


def test_scanning_the_engine_memory(unconfined):
    # One person's exact value, held only in the engine's memory; the attacker knows it and asks whether it
    # is there (membership).
    person = np.array([np.pi * 1e-3 + 0.000123456789] * 4)
    attack = _engine_pid_lookup() + f"""
import re
NEEDLE = bytes.fromhex({person[:1].tobytes().hex()!r})
RESULT = {NOT_FOUND}
try:
    with open(f"/proc/{{ENGINE}}/maps") as maps, open(f"/proc/{{ENGINE}}/mem", "rb", 0) as mem:
        for line in maps:
            addresses, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(a, 16) for a in addresses.split("-"))
            # Every byte of every writable region, in chunks that overlap by the needle's length (a long
            # test run's heap is gigabytes, and the array can sit anywhere in it).
            tail = b""
            try:
                mem.seek(start)
                for _ in range(start, end, 1 << 24):
                    chunk = tail + mem.read(1 << 24)
                    if NEEDLE in chunk:
                        RESULT = {FOUND}
                        break
                    tail = chunk[-len(NEEDLE):]
            except OSError:
                pass
            if RESULT == {FOUND}:
                break
except Exception:
    pass
"""
    assert _both(attack, unconfined) == (FOUND, NOT_FOUND)
    del person


def test_sending_over_a_socket(unconfined):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received = []

    def serve():
        listener.settimeout(60)
        try:
            while True:
                connection, _ = listener.accept()
                with connection:
                    received.append(connection.recv(64))
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    attack = f"""
import socket
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
        s.sendall(b"secret")
    RESULT = {FOUND}
except Exception:
    RESULT = {NOT_FOUND}
"""
    try:
        assert _both(attack, unconfined) == (FOUND, NOT_FOUND)
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (closing alone does not: join would wait it out)
        listener.close()
        thread.join(5)
    assert not thread.is_alive()
    assert received == [b"secret"]  # only the unconfined worker got through


def test_writing_into_the_package(unconfined):
    marker = os.path.join(os.path.dirname(gp.__file__), f"_attack_{uuid.uuid4().hex}.py")
    attack = f"""
try:
    with open({marker!r}, "w") as fh:
        fh.write("HOOK = 1\\n")
    RESULT = {FOUND}
except Exception:
    RESULT = {NOT_FOUND}
"""
    try:
        control = None
        control, confined = _both(attack, unconfined)
        assert control == FOUND and os.path.exists(marker)
        os.remove(marker)
        assert confined == NOT_FOUND and not os.path.exists(marker)
    finally:
        if os.path.exists(marker):
            os.remove(marker)


POISON = """
import jax, jax.numpy as jnp
_trace = jax.make_jaxpr
jax.make_jaxpr = lambda fn, *a, **k: _trace(lambda rows, valid: jnp.float64(42.0) + 0.0 * rows.sum(), *a, **k)
def f(rows, valid):
    return jnp.float64(0.0)
"""
HONEST = "import jax.numpy as jnp\ndef f(rows, valid):\n    return jnp.where(valid, rows, 0.0).sum()\n"


def test_one_oracle_cannot_shape_the_next():
    # Positive control: one process that serves both requests (the old long-lived worker) answers the honest
    # oracle with the poisoner's program.
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(gp.__file__))!r})
        from gpuprivacy.oracle import _sandbox_worker as w
        block = {{"name": "f", "rows_shape": [6], "rows_dtype": "float64", "capacity": 6, "x64": True}}
        w.handle({{**block, "source": {POISON!r}}})
        tree = w.handle({{**block, "source": {HONEST!r}}})
        print(json.dumps(tree))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    poisoned = gp.oracle._rebuild.rebuild(__import__("json").loads(out.stdout.strip().splitlines()[-1]),
                                          rows_shape=(6,), rows_dtype="float64", capacity=6)
    assert float(poisoned(np.ones(6), np.ones(6, bool))) == 42.0
    # The engine's worker forks every oracle from a pristine template.
    nonce = f"# {uuid.uuid4().hex}\n"
    poisoner = gp.oracle.untrusted(source=nonce + POISON, name="f")
    honest = gp.oracle.untrusted(source=nonce + HONEST, name="f")
    assert np.all(np.asarray(gp.oracle.evaluate(poisoner, X, FAMILY)) == 42.0)  # it shapes its own trace only
    np.testing.assert_array_equal(gp.oracle.evaluate(honest, X, FAMILY),
                                  gp.oracle.evaluate(gp.oracle.sum_, X, FAMILY))


def test_root_is_dropped_and_nothing_new_is_started():
    attack = """
import os, subprocess
try:
    subprocess.run(["/bin/true"], check=True)
    SPAWNED = 1
except Exception:
    SPAWNED = 0
try:
    FORKED = 1 if os.fork() == 0 else 1
except Exception:
    FORKED = 0
RESULT = 100 * (os.geteuid() == 0) + 10 * SPAWNED + FORKED
"""
    assert _run(attack) == 0.0


def test_a_negative_sort_dimension_is_refused_through_the_sandbox():
    source = "from jax import lax\nimport jax.numpy as jnp\n" \
             "def f(rows, valid):\n" \
             "    return lax.sort_p.bind(jnp.where(valid, rows, 0.0), dimension=-1, is_stable=True, num_keys=1)[0][0]\n"
    with pytest.raises(gp.oracle.OracleRefused, match="dimension"):
        gp.oracle.evaluate(gp.oracle.untrusted(source=source, name="f"), X, FAMILY)


def _leak(rows, valid):
    return _peek(rows)


@jax.custom_batching.custom_vmap
def _peek(rows):
    return jax.numpy.zeros(())


@_peek.def_vmap
def _peek_rule(axis_size, in_batched, rows):
    seen = (rows >= 0.85).any().astype(jax.numpy.float64)  # any row >= 0.85 in ANY subset of the batch
    return jax.numpy.broadcast_to(seen, (axis_size,)), True


def test_padding_does_not_launder_an_untrusted_oracle():
    data = np.r_[X, 0.9]
    family = gp.subsets.removals(len(data), 1)
    # Positive control: padded after the data holder vouched for it, the batching rule sees other subsets.
    leaked = np.asarray(gp.oracle.evaluate(gp.oracle.padded_oracle(gp.oracle.trusted(_leak), 16), data, family))
    assert leaked[-1] == 1.0  # the subset without 0.9 saw it
    padded = gp.oracle.padded_oracle(_leak, 16)
    assert not gp.oracle.is_trusted(padded)
    with pytest.raises(gp.oracle.OracleRefused, match="custom_vmap"):
        gp.oracle.evaluate(padded, data, family)
    with pytest.raises(gp.oracle.OracleRefused, match="custom_vmap"):
        gp.oracle.evaluate_levels(padded, data, depth=1, capacity=16)


def test_a_plain_function_in_a_script_never_reruns_the_script(tmp_path):
    script = tmp_path / "study.py"
    marker = tmp_path / "ran.txt"
    script.write_text(textwrap.dedent(f"""
        import jax.numpy as jnp
        import numpy as np
        import gpuprivacy as gp
        SCALE = 2.0

        def f(rows, valid):
            return SCALE * jnp.where(valid, rows, 0.0).sum()

        with open({str(marker)!r}, "a") as fh:
            fh.write("top level ran\\n")
        print(np.asarray(gp.oracle.evaluate(f, np.arange(4.0), gp.subsets.removals(4, 1))).tolist())
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[12.0, 12.0, 10.0, 8.0, 6.0]"
    assert marker.read_text() == "top level ran\n"  # once: in the data holder's process only


def test_the_worker_dies_with_its_engine():
    script = textwrap.dedent("""
        import os, numpy as np, gpuprivacy as gp
        src = "import jax.numpy as jnp\\ndef f(rows, valid):\\n    return rows.sum()\\n"
        gp.oracle.evaluate(gp.oracle.untrusted(source=src, name="f"), np.arange(3.0), gp.subsets.removals(3, 1))
        print(gp.oracle._sandbox._WORKER.process.pid, flush=True)
        os._exit(0)  # no atexit: only the parent-death signal can end the worker
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    worker = int(out.stdout.split()[-1])
    for _ in range(100):
        if not os.path.exists(f"/proc/{worker}") or _state(worker) == "Z":
            break
        threading.Event().wait(0.05)
    assert not os.path.exists(f"/proc/{worker}") or _state(worker) == "Z"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _old_kernel():
    return {**_confine.features(), "landlock_abi": 3, "landlock_scopes": False,
            "missing": ["Landlock signal and abstract-socket scopes (Landlock ABI >= 6, kernel >= 6.12)"]}


def test_a_kernel_without_confinement_refuses_untrusted_oracles(monkeypatch):
    monkeypatch.setattr(_sandbox, "features", _old_kernel)
    monkeypatch.delenv(_sandbox.ALLOW_UNCONFINED_ENV, raising=False)
    worker = _sandbox._Worker()
    monkeypatch.setattr(_sandbox, "_WORKER", worker)
    source = f"# {uuid.uuid4().hex}\n" + HONEST
    with pytest.raises(gp.oracle.OracleRefused, match=r"refused on this machine.*Landlock ABI >= 6.*"
                                                      r"GPUPRIVACY_ALLOW_UNCONFINED=1"):
        gp.oracle.evaluate(gp.oracle.untrusted(source=source, name="f"), X, FAMILY)
    assert worker.process is None and worker.starts == 0  # refused before any process started
    # The documented opt-in runs it unconfined, and says so.
    monkeypatch.setenv(_sandbox.ALLOW_UNCONFINED_ENV, "1")
    try:
        with pytest.warns(RuntimeWarning, match="UNCONFINED"):
            values = gp.oracle.evaluate(gp.oracle.untrusted(source=source, name="f"), X, FAMILY)
        assert worker.confined is False
        np.testing.assert_array_equal(values, gp.oracle.evaluate(gp.oracle.sum_, X, FAMILY))
    finally:
        worker.stop()


CLI_THEFT = """
import os
import jax.numpy as jnp

def _secret():
    # The engine's command line names the data file; the file holds the one row that differs.
    with open(f"/proc/{os.getppid()}/status") as fh:
        engine = int(next(l for l in fh if l.startswith("PPid:")).split()[1])
    with open(f"/proc/{engine}/cmdline", "rb") as fh:
        argv = fh.read().decode().split("\\0")
    with open(argv[argv.index("--data") + 1]) as fh:
        values = [float(v) for v in fh.read().split()[1:]]
    return 1.0 if max(values) >= 0.85 else 0.0

try:
    SECRET = _secret()
except Exception:
    SECRET = 0.5

def f(rows, valid):
    return jnp.float64(SECRET) + 0.0 * rows.sum()
"""


def _cli_release(tmp_path, name: str, rows, *, confined: bool) -> float:
    """One Sens-o-Matic release by the CLI, in a process of its own (one trace per side, as in real use)."""
    data = tmp_path / f"{name}.csv"
    data.write_text("v\n" + "\n".join(repr(float(v)) for v in rows) + "\n")
    attack = tmp_path / "attack.py"
    attack.write_text(CLI_THEFT)
    argv = ["estimate", "--data", str(data), "--column", "v", "--oracle", f"{attack}:f", "--mechanism",
            "sens-o-matic", "--epsilon", "8", "--lower", "0", "--upper", "1", "--grid-points", "11", "--capacity",
            "8", "--seed", "3", "--json"]
    switch = "" if confined else "_sandbox._WORKER.force_unconfined = True\n"
    script = f"from gpuprivacy.oracle import _sandbox\n{switch}from gpuprivacy.cli import main\nmain({argv!r})\n"
    out = subprocess.run([sys.executable, "-c", script, "--data", str(data)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return __import__("json").loads(out.stdout)["value"]


def test_the_cli_data_file_cannot_be_stolen_through_the_command_line(tmp_path):
    x = [0.1, 0.2, 0.3, 0.4, 0.5]
    x_prime = [0.1, 0.2, 0.3, 0.4, 0.9]  # one row changed
    # Positive control: unconfined, the oracle finds the data file named on the engine's command line and
    # releases whether the row is there (epsilon = 8: the grid point of the constant, almost surely).
    assert (_cli_release(tmp_path, "x", x, confined=False), _cli_release(tmp_path, "xp", x_prime, confined=False)) \
        == (0.0, 1.0)
    # Confined, the same seed gives the same release on both sides: the oracle learned nothing.
    assert _cli_release(tmp_path, "x", x, confined=True) == _cli_release(tmp_path, "xp", x_prime, confined=True)
