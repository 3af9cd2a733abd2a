"""Form (issue 39 item 5): the tree passes `ruff check` and `ruff format --check` at pyproject's settings (line
length 119), in the fast lane as in .ci/run, with the ruff that constraints-cpu.txt pins."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str) -> subprocess.CompletedProcess:
    assert RUFF.exists(), f"{RUFF} missing: ruff is in the test extra (pip install -e '.[test]')"
    return subprocess.run([str(RUFF), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_pinned_ruff_runs():
    pin = next(line for line in (REPO / "constraints-cpu.txt").read_text().splitlines() if line.startswith("ruff=="))
    assert ruff("--version").stdout.split() == ["ruff", pin.split("==")[1]]


def test_ruff_check_passes():
    done = ruff("check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is():
    done = ruff("format", "--check", ".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
