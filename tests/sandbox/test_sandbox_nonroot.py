"""The sandbox as a real non-root user (uid 65534) runs it: mode ``userns``, the mode of nearly every
cluster user. The escape of tests/sandbox_escape.py must fail there too, and a fork bomb must stop at
the process limit (the kernel exempts only the host's root from RLIMIT_NPROC).

The test runs as root (CI's user) and makes the non-root caller with ``setpriv``. This machine's
interpreter lives under /root (0700), which uid 65534 may not enter: the test gives it a mount namespace
where /root is an empty tmpfs with only the interpreter's tree bound back, as a user's own install
would be reachable to them."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"),
    reason="needs root (to make the non-root caller) and util-linux's setpriv and unshare")


def hidden_root_only_ancestor(path: str) -> str | None:
    current = "/"
    for part in Path(path).parts[1:-1]:
        current = os.path.join(current, part)
        if os.stat(current).st_mode & 0o001 == 0:
            return current
    return None


def run_as_nobody(args: list[str], **env: str) -> subprocess.CompletedProcess:
    """``args`` as uid/gid 65534, in a mount namespace where the interpreter is reachable."""
    base = os.path.realpath(sys.base_prefix)
    hidden = hidden_root_only_ancestor(base)
    uncover = ""
    if hidden:  # keep the interpreter reachable: cover the 0700 ancestor, bind the install back
        uncover = (f'stage=$(mktemp -d /var/tmp/rk-stage-XXXXXX); mount --bind "{base}" "$stage"; '
                   f'mount -t tmpfs -o mode=0755 tmpfs "{hidden}"; mkdir -p "{base}"; mount --move "$stage" "{base}"; ')
    command = (f"{uncover}exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups --inh-caps=-all "
               + " ".join(shlex.quote(a) for a in args))
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "TMPDIR": "/tmp", "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("mode", ["auto", pytest.param("bwrap", marks=pytest.mark.skipif(
    not shutil.which("bwrap"), reason="bubblewrap is not installed"))])
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
