"""The sandbox starts wherever the interpreter is: a venv under /tmp (where a clone is often tried
first; the private /tmp used to hide it, and every code row became ``sandbox_error``), reached
through a symlinked directory, in every namespace mode. The package is copied there too, so nothing
of this checkout is needed."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..helpers.sandbox import NAMESPACE_MODES

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from reasonkit import sandbox
out = {}
for mode in sys.argv[1:]:
    r = sandbox.run("import sys, os; print(sys.version_info[0], os.getcwd())", mode=mode)
    out[mode] = [r.stdout, r.stderr[-300:], list(r.isolation)]
print(json.dumps({"prefix": sys.prefix, "runs": out}))
"""


@pytest.fixture(scope="module")
def tmp_install():
    """/tmp/.../real/{venv,pkg/reasonkit} and a symlink /tmp/.../link -> real."""
    top = Path(tempfile.mkdtemp(prefix="reasonkit-tmp-install-", dir="/tmp"))
    real = top / "real"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(real / "venv")],
        check=True,
        executable=os.path.realpath(sys.executable) if sys.prefix != sys.base_prefix else None,
    )
    pkg = real / "pkg" / "reasonkit"
    pkg.mkdir(parents=True)
    shutil.copy(REPO / "__init__.py", pkg / "__init__.py")
    shutil.copytree(REPO / "sandbox", pkg / "sandbox", ignore=shutil.ignore_patterns("__pycache__"))
    (top / "link").symlink_to(real)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_a_venv_under_tmp_reached_through_a_symlink(tmp_install):
    python = tmp_install / "link" / "venv" / "bin" / "python"
    modes = [m for m in NAMESPACE_MODES if isinstance(m, str)]
    if not modes:
        pytest.skip("no namespace mode on this machine")
    done = subprocess.run(
        [str(python), "-c", PROBE, *modes],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_install / "link" / "pkg")},
    )
    assert done.returncode == 0, done.stderr[-1000:]
    report = json.loads(done.stdout)
    assert report["prefix"].startswith(str(tmp_install))
    for mode in modes:
        stdout, stderr, isolation = report["runs"][mode]
        assert stdout == "3 /tmp/sandbox\n", (mode, stderr)
        assert "minroot" in isolation
