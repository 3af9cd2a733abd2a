"""A verdict the program cannot buy (issue 38): the checks of hostile.py in every namespace mode this
machine takes (root, userns forced as root, bwrap), and as a real non-root user (uid 65534) in its
modes (auto = userns, and bwrap)."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from ..helpers.as_nobody import NOBODY, run_as_nobody
from ..helpers.sandbox import NAMESPACE_MODES
from .hostile import CALL_TEST, CHECKS, DEEP_RETURN, FAKE_FAILURE, TWO, VERDICT_CHECKS

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
@pytest.mark.parametrize("check", list(CHECKS))
def test_hostile_program_in_every_mode(check, mode):
    assert CHECKS[check](mode) == []


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to make the non-root caller")
@pytest.mark.parametrize(
    "mode",
    [
        "auto",
        pytest.param(
            "bwrap", marks=pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
        ),
        "none",
    ],
)
def test_hostile_programs_as_a_non_root_user(mode):
    # --sandbox none isolates nothing of the host (README): there only the verdict and seccomp must hold
    checks = VERDICT_CHECKS if mode == "none" else list(CHECKS)
    with_dir = os.environ.get("TMPDIR", "/tmp")
    done = run_as_nobody([sys.executable, str(HERE / "hostile.py"), mode, *checks], TMPDIR=with_dir)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == NOBODY
    assert report["failures"] == {check: [] for check in checks}


def test_the_code_reward_pays_nothing_for_a_claimed_failure_or_an_unbounded_value():
    # GRPO's --reward code: a wrong program is 0.0, never None ("unverifiable" is not the program's to
    # claim), and a value the checker cannot read ends one row's reward (0.0), not the batch.
    from reasonkit.filters.code.verify import code_scores

    right = "```python\ndef f(x):\n    return x\n```"
    rows = [f"```python\n{FAKE_FAILURE}```", f"```python\n{DEEP_RETURN}```", right]
    assert code_scores(rows, [TWO, CALL_TEST, CALL_TEST], timeout=0.5) == [0.0, 0.0, 1.0]
