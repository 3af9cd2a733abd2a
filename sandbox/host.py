"""What of the host a sandboxed program sees: the paths its view binds read-only (the interpreter, site-packages, the
system's libraries), its whole environment, and :class:`SandboxError` when the sandbox itself cannot start."""

from __future__ import annotations

import functools
import os
import sys

# What the program may read besides the interpreter: the system's shared libraries, at their real
# paths, and the symlinks that lead to them (/lib -> usr/lib on a merged-/usr system).
SYSTEM_PATHS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache")


class SandboxError(RuntimeError):
    """The sandbox itself failed to start (not the program)."""


def clean_env(home: str) -> dict[str, str]:
    """The program's whole environment: nothing of the caller's. One thread per math library and two
    malloc arenas, so threads do not eat the address-space limit."""
    path = os.pathsep.join(dict.fromkeys([os.path.dirname(python()), "/usr/local/bin", "/usr/bin", "/bin"]))
    env = {
        "PATH": path,
        "LANG": "C.UTF-8",
        "HOME": home,
        "MALLOC_ARENA_MAX": "2",
        "PYTHONPATH": os.pathsep.join(site_packages()),
    }
    env.update(dict.fromkeys(["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"], "1"))
    return env


@functools.cache
def site_packages() -> tuple[str, ...]:
    """This environment's site-packages (real paths: the view binds real paths only), for a program
    run with ``-S``: the packages stay importable without ``site``'s startup (its .pth hooks, e.g. an
    editable install's finder, cost ~20 ms a run)."""
    import site

    return tuple(dict.fromkeys(os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)))


def outermost(paths) -> list[str]:
    paths = set(paths)
    return sorted(p for p in paths if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in paths))


def python() -> str:
    """This interpreter at its real path (the view has no symlinks to it): a venv's is its base interpreter's."""
    return os.path.realpath(sys.executable)


@functools.cache
def masks() -> tuple[str, ...]:
    """Files of site-packages that name host paths the program does not need, to be masked with an empty
    file: an install's ``direct_url.json`` (an editable one holds the project's checkout path), an
    editable finder, ``.pth`` and ``.egg-link`` files (none of which ``python -S`` reads)."""
    import glob

    found = []
    for site in site_packages():
        candidates = glob.glob(os.path.join(site, "*.dist-info", "direct_url.json")) + [
            os.path.join(site, n)
            for n in os.listdir(site)
            if n.startswith("__editable__") or n.endswith((".pth", ".egg-link"))
        ]
        for path in candidates:
            try:
                with open(path, "rb") as f:
                    if b"/" in f.read(1 << 16):
                        found.append(path)
            except OSError:
                pass
    return tuple(sorted(found))


def view_of(argv0: str) -> dict:
    """The program's filesystem (sandbox/view.py builds it): read-only binds of the interpreter's base
    prefix and its real directory, site-packages, the system library directories and the command's own
    directory; the symlinks on the way to them; the files to mask (``masks``). Real paths only, so a
    symlinked venv or clone needs nothing of the host beyond its target; a venv's own prefix is not
    bound (``python -S`` with site-packages on PYTHONPATH needs only those), nor is the project."""
    binds = {
        os.path.realpath(sys.base_prefix),
        os.path.dirname(python()),
        *site_packages(),
        os.path.dirname(os.path.realpath(argv0)),
    }
    if python().startswith(os.path.realpath(sys.prefix) + os.sep):  # a venv made with --copies: its pyvenv.cfg
        binds.add(os.path.realpath(sys.prefix))
    symlinks = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            symlinks.append((path, os.readlink(path)))
            path = os.path.realpath(path)
        if os.path.exists(path):
            binds.add(path)
    binds = outermost(binds)
    if "/" in binds:
        raise SandboxError(
            f"the interpreter's directories include / ({sys.prefix}): the view would hold the whole host"
        )
    return {
        "binds": binds,
        "symlinks": [s for s in symlinks if not any(s[0].startswith(b + "/") for b in binds)],
        "masks": list(masks()),
    }
