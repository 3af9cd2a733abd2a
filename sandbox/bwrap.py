"""The ``bwrap`` mode: bubblewrap (the sandbox Flatpak ships) makes the namespaces and the view.

Where a distribution blocks plain unprivileged user namespaces but lets bubblewrap make them (Ubuntu
24.04's AppArmor profile for ``bwrap``), ``unshare --user`` fails and bubblewrap still works; there a
process in the new namespace may hold no capability, so the view cannot be built by the init
(view.py) and bubblewrap builds the same one instead: the same read-only binds at their real paths,
the same symlinks, the four devices, its own ``/proc``, size-capped ``/tmp`` and ``/dev/shm``, ``/``
read-only. The init then only writes the program's files, confines and runs it (as PID 1,
``--as-pid-1``), so the verdicts are the same as in the other modes (tests/test_sandbox*.py run
the whole matrix in every mode the machine takes).

The init reads its spec and the program's files from one descriptor and writes the status to
another (both closed before the program starts), so no directory of the caller's is bound in.
"""

from __future__ import annotations

import os
import shutil

DEVICES = ("null", "zero", "random", "urandom")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def command(view: dict, tmpfs_mb: int, init: list[str]) -> list[str]:
    """The bwrap command line that builds ``view`` (runner.view_of) and runs ``init`` in it."""
    size = str(tmpfs_mb << 20)
    args = [bwrap_path() or "bwrap"]
    if os.geteuid() != 0:  # as root bwrap makes the namespaces itself, and keeps the init's capabilities
        args += ["--unshare-user"]  # (the init drops them all, and the uid, before the program runs)
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--as-pid-1",
             "--size", size, "--perms", "1777", "--tmpfs", "/tmp"]  # first: an interpreter under /tmp is bound onto it
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
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        args += ["--symlink", target, f"/dev/{name}"]
    args += ["--size", size, "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc", "--remount-ro", "/", "--chdir", "/"]
    return args + init
