"""The sandbox as a real non-root user (uid 65534) runs it: mode ``userns``, the mode of nearly every
cluster user. The escape of tests/sandbox/sandbox_escape.py must fail there too, and a fork bomb must stop
at the process limit (the kernel exempts only the host's root from RLIMIT_NPROC).

The test runs as root (CI's user) and makes the non-root caller with ``setpriv`` (tests/helpers/as_nobody.py: the
interpreter, venv and checkout stay reachable to that user, as a user's own install is, from any clone)."""

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import reasonkit

from ..helpers.as_nobody import NOBODY, reach_plan, run_as_nobody

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"),
    reason="needs root (to make the non-root caller) and util-linux's setpriv and unshare",
)


@pytest.mark.parametrize(
    "mode",
    [
        "auto",
        pytest.param(
            "bwrap", marks=pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
        ),
    ],
)
def test_as_a_non_root_user_nothing_of_the_host_is_reachable(mode):
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="reasonkit-nonroot-") as d:
        os.chown(d, NOBODY, NOBODY)
        done = run_as_nobody([sys.executable, str(HERE / "sandbox_escape.py"), d], REASONKIT_SANDBOX=mode)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == NOBODY
    assert "userns" in report["isolation"] and "minroot" in report["isolation"]
    assert ("bwrap" in report["isolation"]) == (mode == "bwrap")
    assert report["failures"] == []
    assert report["fork_bomb"] == "processes"


PROBE = """import json, os, sys
import reasonkit
top, clone = sys.argv[1], sys.argv[2]
print(json.dumps({"uid": os.getuid(), "package": reasonkit.__file__, "top": sorted(os.listdir(top)),
                  "clone": sorted(os.listdir(clone)), "secret": sorted(os.listdir(os.path.join(clone, "secret")))}))
"""


def test_a_clone_under_a_directory_only_root_may_enter_stays_reachable_to_the_user():
    # A clone under `mktemp -d` (0700) with a 0700 folder inside it: the trees the command names are
    # bound back at their own paths (the script's folder, the clone); nothing else of the hidden ones.
    top = Path(tempfile.mkdtemp(prefix="reasonkit-0700-"))
    clone, secret = top / "rk", top / "rk" / "secret"
    staged = set(Path("/var/tmp").glob("rk-reach-*"))
    try:
        for folder in (top / "other-clone", clone / "venv", secret / "tests"):
            folder.mkdir(parents=True)
        for path, mode in ((clone, 0o755), (clone / "venv", 0o755), (secret, 0o700), (secret / "tests", 0o755)):
            path.chmod(mode)
        (clone / "README.md").write_text("x")
        (secret / "key.txt").write_text("x")
        script = secret / "tests" / "probe.py"
        script.write_text(PROBE)
        script.chmod(0o644)
        covers, binds = reach_plan([str(clone), str(clone / "venv"), str(secret / "tests"), "/usr"])
        assert (covers, binds) == ([str(top), str(secret)], [str(clone), str(secret / "tests")])
        done = run_as_nobody([sys.executable, str(script), str(top), str(clone)])
        assert done.returncode == 0, done.stderr[-2000:]
        seen = json.loads(done.stdout)
    finally:
        shutil.rmtree(top)
    assert seen == {
        "uid": NOBODY,
        "package": reasonkit.__file__,  # the code under test, not another install's
        "top": ["rk"],
        "clone": ["README.md", "secret", "venv"],
        "secret": ["tests"],
    }
    assert set(Path("/var/tmp").glob("rk-reach-*")) <= staged  # its staging folders are gone
