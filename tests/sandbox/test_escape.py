"""The execution boundary, tried as an attacker would: files planted outside /tmp (a 0600 token, a
test's expected output, a committed shard) cannot be read, written beside, deleted or listed; no
mount can be undone or made; no capability is held; links lead nowhere. In every namespace mode this
machine can take (root, and userns forced as root: a cluster user's mode); as a real non-root user
in tests/sandbox/test_nonroot.py."""

import json
import tempfile
from pathlib import Path

import pytest

from reasonkit import sandbox

from ..helpers.sandbox import NAMESPACE_MODES
from .sandbox_escape import failures, plant, run_escape


@pytest.fixture
def planted():
    # Outside /tmp: the sandbox's private /tmp would hide a planted file there for the wrong reason.
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="reasonkit-planted-") as d:
        yield plant(Path(d))


@pytest.mark.parametrize("mode", NAMESPACE_MODES)
def test_the_program_reaches_nothing_of_the_host(mode, planted):
    result = run_escape(planted, mode=mode)
    assert result.ok, result.stderr[-500:]
    outcomes = json.loads(result.stdout)
    assert failures(outcomes, planted) == []
    assert outcomes["CapEff"] == "0000000000000000" and outcomes["umount_tmp"] == "Operation not permitted"
    # The view holds the interpreter's binds, /dev's four devices, /proc and the private tmpfs: no more.
    assert "/tmp" in outcomes["mounts"] and not any(m.startswith("/var/tmp") for m in outcomes["mounts"])


def test_the_checks_tell_a_broken_boundary(planted):
    # (Not by running the escape unconfined: as root it would chroot, unshare and ptrace PID 1 for real.)
    held = {
        name: "err:FileNotFoundError"
        for name in (
            "read_secret",
            "read_expected",
            "read_via_proc1_root",
            "write_beside",
            "delete_victim",
            "list_planted_dir",
            "list_home",
            "list_project",
            "symlink_secret",
            "hardlink_secret",
        )
    }
    held.update({cap: "0000000000000000" for cap in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")}, mounts=["/"])
    assert failures(held, planted) == []
    secret = Path(planted["secret"]).read_text()
    assert failures({**held, "read_secret": "ok:" + secret}, planted) == [
        f"read_secret: ok:{secret}",
        "a planted secret or expected output reached the program's output",
    ]
    assert failures({**held, "CapEff": "000001ffffffffff", "umount_tmp": "ok"}, planted) == [
        "umount_tmp succeeded",
        "CapEff 000001ffffffffff",
    ]
    assert failures({**held, "mounts": ["/", planted["home"]]}, planted) == [
        f"mount point {planted['home']} is in the view"
    ]


def test_a_files_entry_cannot_name_a_host_path():
    for name in ("../escape.py", "/etc/passwd", "a/../../b"):
        with pytest.raises(ValueError, match="outside the working directory"):
            sandbox.run("pass", files={name: "x"})
