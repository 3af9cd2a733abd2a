"""A command run as a real non-root user (uid/gid 65534) from wherever this checkout lies.

The tests run as root (CI's user) and make the non-root caller with ``setpriv``. What that caller needs
(the interpreter's install, the venv, the package under test, a script the command names) often sits
under a directory only root may enter: this machine's interpreter under /root (0700), a clone under
``mktemp -d`` (0700), a 0700 home. A user's own install is reachable to that user, so the command gets a
mount namespace where each such directory is an empty 0755 tmpfs with only the needed trees bound back
at their own paths: the same files, the same paths (the editable install's mapping, the venv's
pyvenv.cfg), nothing else of the hidden directory.

A checkout whose files only their owner may read (cloned under ``umask 077``) cannot be run by another
user at all: ``skip_unless_others_can_read`` says so instead of failing."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

NOBODY = 65534


def _depth(path: str) -> int:
    return len(Path(path).parts)


def _is_under(path: str, top: str) -> bool:
    return path != top and Path(path).is_relative_to(top)


def root_only_ancestors(path: str) -> list[str]:
    """The directories above ``path`` that others may not enter (no o+x), outermost first."""
    hidden, current = [], "/"
    for part in Path(path).parts[1:-1]:
        current = os.path.join(current, part)
        if os.stat(current).st_mode & 0o001 == 0:
            hidden.append(current)
    return hidden


def needed_paths(args: list[str]) -> list[str]:
    """Directories the command reads: the interpreter's install, the venv, every import path (the
    package under test among them: the editable install maps it outside sys.path) and the folder of
    each existing absolute path in ``args``; as written and as resolved (a symlinked venv)."""
    import reasonkit

    named = [sys.base_prefix, sys.prefix, str(Path(reasonkit.__file__).parent), *sys.path, *args]
    found = set()
    for path in named:
        if os.path.isabs(path) and os.path.exists(path):
            for form in (os.path.abspath(path), os.path.realpath(path)):
                found.add(form if os.path.isdir(form) else os.path.dirname(form))
    # A directory others may not enter is of no use bound back as it is (sys.path's cwd, say).
    return sorted(p for p in found if os.stat(p).st_mode & 0o001)


def reach_plan(paths: list[str]) -> tuple[list[str], list[str]]:
    """(directories to cover with an empty tmpfs, needed trees to bind back at their own place).

    A tree inside another bound tree is bound on its own only where a root-only directory lies between
    them (that one is covered in turn, inside the outer tree's view)."""
    hidden = {path: root_only_ancestors(path) for path in paths}
    binds = []
    for path in sorted((p for p in paths if hidden[p]), key=_depth):
        outer = [b for b in binds if _is_under(path, b) or path == b]
        if not any(all(not _is_under(h, b) for h in hidden[path]) for b in outer):
            binds.append(path)
    covers = sorted({h for path in binds for h in hidden[path]}, key=_depth)
    return covers, binds


def reach_script(paths: list[str]) -> str:
    """Shell lines that make ``paths`` reachable inside a private mount namespace (run as root)."""
    covers, binds = reach_plan(paths)
    lines = [
        f'set -e; s{i}=$(mktemp -d /var/tmp/rk-reach-XXXXXX); mount --rbind {shlex.quote(b)} "$s{i}"'
        for i, b in enumerate(binds)
    ]  # every tree held before any cover hides it
    steps = [(_depth(c), 0, f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(c)}") for c in covers]
    steps += [
        (_depth(b), 1, f'mkdir -p {shlex.quote(b)}; mount --move "$s{i}" {shlex.quote(b)}; rmdir "$s{i}"')
        for i, b in enumerate(binds)
    ]
    return "; ".join(lines + [line for _, _, line in sorted(steps)])


def skip_unless_others_can_read(args: list[str]) -> None:
    """Skip (saying why) where a file the command must read is its owner's only, as in a checkout made
    under ``umask 077``: no other user can run that install, whatever its directories allow."""
    import reasonkit

    files = [
        reasonkit.__file__,
        os.path.join(sys.prefix, "pyvenv.cfg"),
        os.path.realpath(sys.executable),
        *(a for a in args if os.path.isabs(a) and os.path.isfile(a)),
    ]
    unreadable = [f for f in files if os.path.exists(f) and not os.stat(f).st_mode & 0o004]
    if unreadable:
        pytest.skip(
            f"{unreadable[0]} is readable by its owner only (a checkout made under umask 077?): "
            f"uid {NOBODY} cannot run this install"
        )


def run_as_nobody(args: list[str], **env: str) -> subprocess.CompletedProcess:
    """``args`` as uid/gid 65534, in a mount namespace where everything it needs is reachable."""
    skip_unless_others_can_read(args)
    reach = reach_script(needed_paths(args))
    command = (
        (f"{reach}; " if reach else "")
        + f"exec setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups --inh-caps=-all "
        + " ".join(shlex.quote(a) for a in args)
    )
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", "TMPDIR": "/tmp", "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
