"""What the sandbox tests share: the namespace modes this machine takes (probed once, at import) and
the host processes still running a marked command."""

import os
from pathlib import Path

import pytest

from reasonkit import sandbox


def _usable(mode: str) -> bool:
    if mode == "root" and os.geteuid() != 0:
        return False
    try:
        return sandbox.run("print('ok')", mode=mode).stdout == "ok\n"
    except sandbox.SandboxError:
        return False


# Every namespace mode this machine can take: as root "root", "userns" (forced) and "bwrap" where
# bubblewrap is installed (.ci/run installs it), so the non-root user's modes are tested here too
# (tests/sandbox/test_nonroot.py runs them as a real non-root uid).
NAMESPACE_MODES = [m for m in ("root", "userns", "bwrap") if _usable(m)] or [
    pytest.param("none", marks=pytest.mark.skip(reason="no namespaces on this machine"))
]


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found
