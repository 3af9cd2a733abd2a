"""The ``bwrap`` mode: bubblewrap (the sandbox Flatpak ships) makes the namespaces and the view.

Where a distribution blocks plain unprivileged user namespaces but lets bubblewrap make them (Ubuntu
24.04's AppArmor profile for ``bwrap``), ``unshare --user`` fails and bubblewrap still works. Bubblewrap
builds the view the init (view.py) builds in the other modes: the same read-only binds at their real
paths, the same symlinks and masked files, the four devices, size-capped ``/tmp`` (``/dev/shm`` a link to it),
``/`` read-only, fresh IPC, UTS (host name ``sandbox``) and cgroup namespaces. The init runs as its
PID 1 (``--as-pid-1``) holding two capabilities of bubblewrap's user namespace (``--cap-add``: to make
the program's own PID namespace and mount its ``/proc``; the program's process drops both before it
execs), then starts the program as in the other modes, so the verdicts are the same
(tests/sandbox/test_runner.py and tests/sandbox/test_hostile.py run the whole matrix in every mode the machine takes).

The init reads its spec and the program's files from one descriptor and writes the status to
another; its own directory, bound for it to start, is unbound from the program's view.
"""

from __future__ import annotations

import os
import shutil

DEVICES = ("null", "zero", "random", "urandom")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


# long: bubblewrap's argument list, one group of flags a line, in the order bwrap applies them
def command(view: dict, tmpfs_mb: int, init: list[str], info_fd: int | None = None) -> list[str]:
    """The bwrap command line that builds ``view`` (host.view_of) and runs ``init`` in it; ``info_fd``:
    where bubblewrap writes its child's (the init's) pid, for the caller to move it into the run's cgroup."""
    size = str(tmpfs_mb << 20)
    args = [bwrap_path() or "bwrap"] + (["--info-fd", str(info_fd)] if info_fd is not None else [])
    if os.geteuid() != 0:  # as root bwrap makes the namespaces itself, and keeps the init's capabilities
        # (the program's process drops them all, and the uid, before it execs)
        args += ["--unshare-user", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    args += [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        "sandbox",
        "--unshare-cgroup",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--size",
        size,
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
    ]  # first: an interpreter under /tmp is bound onto it
    made = set()
    for path in view["binds"]:
        # bubblewrap makes missing parents 0700: a 0700 /root above the interpreter would then stop the
        # dropped uid; the other modes make them 0755 (view.py), and so does this
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if parent not in made and parent != "/tmp":
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
        args += ["--ro-bind", path, path]
    for path, target in view["symlinks"]:
        args += ["--symlink", target, path]
    args += ["--perms", "0755", "--dir", "/dev"]
    for name in DEVICES:
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        args += ["--symlink", target, f"/dev/{name}"]
    args += [
        "--symlink",
        "/tmp",
        "/dev/shm",
        "--proc",
        "/proc",
        "--remount-ro",
        "/",
        "--chdir",
        "/",
    ]  # one cap for both
    return args + init
