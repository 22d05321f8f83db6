"""Ctrl-C: exit 130 with the resume hint, no traceback, no crash, and a results file that resumes.

Before: a KeyboardInterrupt traceback and then, in some tries, SIGSEGV while Python finalized under XLA's
running threads (rc -11), or the interrupt swallowed by JAX's garbage-collection callback and the run going
on to exit 0 (gpuprivacy/cli/_interrupt.py).
"""

import signal
import subprocess
import sys
import time

import pytest

from gpuprivacy.sweeps._results import read_rows

CONFIG = """
name = "interrupt-test"
seed = 5
trials = 64
[[mechanism]]
name = ["piecewise-laplace-median", "smooth-sensitivity-median", "exponential-mechanism-median", "laplace-median"]
epsilon = [0.5, 1.0, 2.0]
lower = -50.0
upper = 50.0
clip = true
[dataset]
name = ["normal", "cauchy", "laplace"]
n = [100, 1000, 3000]
"""


def _interrupted_sweep(tmp_path, delay: float):
    config = tmp_path / "c.toml"
    config.write_text(CONFIG)
    results = tmp_path / f"r{delay}.jsonl"
    process = subprocess.Popen([sys.executable, "-m", "gpuprivacy", "sweep", str(config), "--results", str(results),
                                "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    # The handler is installed when the command starts, after the imports (an interrupt during `import jax`
    # is Python's own KeyboardInterrupt, before any XLA thread exists); the results file is opened just
    # after, so wait for it, then interrupt `delay` seconds into the work.
    deadline = time.monotonic() + 120
    while not results.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(delay)
    still_running = process.poll() is None
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    return still_running, process.returncode, err.decode(), results


@pytest.mark.parametrize("delay", [0.5, 4.0])
def test_ctrl_c_exits_130_with_the_resume_hint_and_no_traceback(tmp_path, delay):
    still_running, returncode, err, results = _interrupted_sweep(tmp_path, delay)
    assert still_running, "the sweep ended before the interrupt: the test would prove nothing"
    assert returncode == 130, (returncode, err[-500:])
    assert "interrupted (Ctrl-C); finished cells are saved in the results file; run the same command again to " \
           "resume." in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    if results.exists():  # whatever was written is whole rows that a rerun resumes from (else this raises)
        read_rows(results)
