"""Choosing a run's isolation: the modes, what each enforces, what the user asked for and what this machine allows.

:mod:`reasonkit.sandbox.runner` runs a program in the mode chosen here; nothing here starts a model's program.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

import reasonkit.sandbox.cgroup as cgroups
from reasonkit.sandbox.host import SandboxError, python, view_of

MODES = ("root", "userns", "bwrap", "none")
# Namespaces per mode. "root": unshare as root, the program under a uid of its own; "userns": an
# unprivileged user namespace (the caller's uid, mapped to root inside, every capability dropped);
# "bwrap": bubblewrap makes the namespaces and the same view (bwrap.py), where plain unprivileged user
# namespaces are blocked but bubblewrap may make them; "none": no namespace at all (--sandbox none only).
UNSHARE = {
    "root": ["--mount", "--net", "--ipc", "--uts"],
    "userns": ["--user", "--map-root-user", "--mount", "--net", "--ipc", "--uts"],
}
# The one setting a user gives (--sandbox, or a recipe's `sandbox:` key): every process of a run
# (threads, Ray workers, accelerate's ranks) reads it at call time from this variable.
ENV_MODE = "REASONKIT_SANDBOX"
HOW_TO_FIX = (
    "enable unprivileged user namespaces (sysctl user.max_user_namespaces=15000; on Ubuntu 24.04 "
    "kernel.apparmor_restrict_unprivileged_userns=0) or install bubblewrap (apt-get install bubblewrap), "
    "or pass --sandbox none to run model programs with all of your rights (not isolated)"
)


@functools.cache
def available_mode() -> str:
    """The strongest isolation this machine allows, probed once: "root" (as root) or "userns" through
    ``unshare``, else "bwrap" where bubblewrap can make the namespaces, else "none".

    Our own init (``unshare`` + pivot_root) comes first: no dependency, and it starts as fast as
    bubblewrap here (bench/code.py --start-runs); bubblewrap is the way in where a distribution
    allows namespaces to it alone."""
    from reasonkit.sandbox.bwrap import bwrap_path

    unshare = shutil.which("unshare")
    candidates = (["root"] if os.geteuid() == 0 else []) + ["userns"]
    for mode in candidates if unshare else []:
        probe = subprocess.run([unshare, *UNSHARE[mode], "true"], capture_output=True, timeout=10, check=False)
        if probe.returncode == 0:
            return mode
    if bwrap_path() and bwrap_works():
        return "bwrap"
    return "none"


@functools.cache
def bwrap_works() -> bool:
    from reasonkit.sandbox.bwrap import bwrap_path, command

    if not bwrap_path():
        return False
    interpreter = python()
    probe = subprocess.run(
        command(view_of(interpreter), 1, [interpreter, "-I", "-S", "-c", "pass"]),
        capture_output=True,
        timeout=10,
        check=False,
    )
    return probe.returncode == 0


def isolation_of(mode: str, cgroup: bool | None = None) -> tuple[str, ...]:
    """What a run in ``mode`` enforces, as the rows' ``isolation`` column lists it. ``minroot``: the
    program's own minimal read-only root; ``uid-drop``: a host uid of its own, never 0 (as root, also in
    ``userns`` through its map); ``nocaps``: empty capability sets (bounding set included); ``seccomp``:
    the mount/namespace/ptrace/io_uring calls refused; ``cgroup``: memory, processes and CPU time capped
    for the run as a whole (cgroup.py), or ``no-cgroup``: per process only (this machine gives this
    user no cgroup; ``cgroup``, default: whether it does); ``no-namespaces``: run with ``--sandbox none``."""
    common = ("nocaps", "seccomp", "cgroup" if (cgroups.available() if cgroup is None else cgroup) else "no-cgroup")
    spaces = ("netns", "pidns", "mountns", "ipcns", "utsns", "cgroupns", "minroot")
    uid = ("uid-drop",) if os.geteuid() == 0 else ()
    names = {
        "root": spaces + ("uid-drop",),
        "userns": spaces + ("userns",) + uid,
        "bwrap": spaces + ("bwrap",) + (uid or ("userns",)),
    }
    if mode in names:
        return names[mode] + common
    return ("no-namespaces",) + (("uid-drop",) if os.geteuid() == 0 else ()) + common


def requested_mode() -> str:
    """What the user asked for (``--sandbox``, via REASONKIT_SANDBOX): "auto" unless set."""
    value = os.environ.get(ENV_MODE, "auto") or "auto"
    if value not in ("auto", *MODES):
        raise SandboxError(f"{ENV_MODE}={value!r}: expected auto, {', '.join(MODES)}")
    return value


def resolve_mode(mode: str | None = None) -> str:
    """The mode a run uses: ``mode`` if given, else the user's choice, else the strongest available.
    Never "none" unless asked for by name: a machine without namespaces is an error, not a silent
    downgrade to running the program with all of the caller's rights."""
    mode = mode or requested_mode()
    if mode == "auto":
        mode = available_mode()
        if mode == "none":
            raise SandboxError(
                f"no isolation is possible here (no user, mount, PID or network namespaces): {HOW_TO_FIX}"
            )
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r}: expected auto, {', '.join(MODES)}")
    return mode
