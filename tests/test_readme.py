"""The README's promises: its quick-start runs, and CI runs exactly its test command."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _block(marker):
    match = re.search(rf"<!-- {marker}:start -->\s*```\s*\n(.*?)\n```\s*<!-- {marker}:end -->", README, re.S)
    assert match, f"README has no {marker} block"
    return match.group(1).strip()


def test_readme_has_the_two_set_up_commands():
    assert "gpuprivacy reproduce" in _block("main-command") and "--quick" in _block("main-command")
    assert "pytest" in _block("test-command") and "pip install" in _block("test-command")


def test_ci_script_runs_the_readme_test_block():
    script = (ROOT / ".ci" / "run").read_text()
    assert "test-command:start" in script and 'bash -euo pipefail -c "$command"' in script


def test_readme_quick_start_runs(tmp_path):
    code = re.search(r"## Quick start\s*```python\n(.*?)```", README, re.S).group(1)
    path = tmp_path / "quickstart.py"
    path.write_text(code)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PureDP(epsilon=1.0)" in proc.stdout and "violated=False" in proc.stdout
