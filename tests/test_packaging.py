"""The wheel: built from the repository root, installed in a fresh venv, exposes `distill`."""

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    (path,) = out.glob("reasonkit-*.whl")
    return path


def test_wheel_holds_the_package_tree_and_assets_but_not_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for module in (
        "cli.py",
        "schema.py",
        "store.py",
        "config.py",
        "gen/__init__.py",
        "gen/tools/__init__.py",
        "filters/__init__.py",
        "distill/__init__.py",
        "judges/__init__.py",
        "recipes/__init__.py",
        "recipes/teachers/tiny.py",
    ):
        assert f"reasonkit/{module}" in names, module
    assert not [n for n in names if n.startswith(("reasonkit/tests/", "reasonkit/bench/", "tests/", "bench/"))]
    if (REPO / "recipes/assets/teacher/config.json").exists():
        assert "reasonkit/recipes/assets/teacher/config.json" in names


def test_wheel_installs_in_a_fresh_venv_and_exposes_distill(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # --no-deps keeps this test offline-fast; `distill --help` needs only click besides the package.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel), "click"], check=True)
    out = subprocess.run([str(env_dir / "bin" / "distill"), "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "generate" in out.stdout and "quickstart" in out.stdout
    where = subprocess.run(
        [str(py), "-c", "import reasonkit, os; print(os.path.dirname(reasonkit.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(env_dir)), "the installed copy, not the checkout, is imported"
