"""scripts/setup-gpu.sh on a machine it cannot serve (issue 35 items 4 and 5), driven by a stub nvidia-smi on PATH and
a stub python that installs nothing: the driver is read before anything is installed, a driver older than CUDA 13's
580 stops setup with what to do, and a flash-attn that does not build is reported and setup goes on. Before, the script
installed gigabytes of CUDA 13 wheels on any driver and ended in "torch sees no CUDA GPU", and a failed flash-attn
build failed the whole setup (set -e)."""

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-gpu.sh"
# Stands for both the system python and the venv's: records its arguments, creates a venv as a copy of itself,
# and fails a flash-attn install when FAKE_FLASH_FAILS=1 (no CUDA toolkit to build it with).
FAKE_PYTHON = """#!/bin/bash
echo "$*" >> "$FAKE_LOG"
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
case "$*" in *" flash-attn"*)
  if [ "${FAKE_FLASH_FAILS:-0}" = 1 ]; then echo "error: nvcc not found" >&2; exit 1; fi;;
esac
exit 0
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def setup(tmp_path, *args, driver: str | None = None, **env) -> subprocess.CompletedProcess:
    """Run the script with ``driver`` as nvidia-smi's answer (None: no nvidia-smi on PATH)."""
    bin_dir = tmp_path / "bin"
    if driver is not None:
        executable(bin_dir / "nvidia-smi", f"#!/bin/sh\nprintf '{driver}\\n{driver}\\n'\n")  # one line a GPU
    fake = executable(tmp_path / "fake" / "python3", FAKE_PYTHON)
    environ = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "VENV": str(tmp_path / "venv"),
        "PYTHON": str(fake),
        "FAKE_LOG": str(tmp_path / "calls.log"),
        **env,
    }
    return subprocess.run(["bash", str(SCRIPT), *args], env=environ, capture_output=True, text=True, timeout=60)


def calls(tmp_path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_driver_older_than_580_stops_setup_before_anything_is_installed(tmp_path):
    r = setup(tmp_path, driver="550.54.15")
    assert r.returncode != 0
    assert "NVIDIA driver 550.54.15 is older than 580" in r.stderr and "CUDA 13 builds" in r.stderr
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cu129" in r.stderr and "vllm-0.31.0+cu129" in r.stderr
    assert calls(tmp_path) == [] and not (tmp_path / "venv").exists(), "no venv, no pip"


@pytest.mark.parametrize(
    "driver, ok", [("550.54.15", False), ("575.57.08", False), ("580.65.06", True), ("590.48.01", True)]
)
def test_the_driver_check_alone(tmp_path, driver, ok):
    r = setup(tmp_path, "--check-driver", driver=driver)
    assert (r.returncode == 0) == ok, r.stderr
    assert (f"setup: NVIDIA driver {driver} (>= 580" in r.stdout) == ok
    assert calls(tmp_path) == []


def test_no_nvidia_smi_or_one_that_cannot_reach_the_driver_is_said_so(tmp_path):
    r = setup(tmp_path, "--check-driver")
    assert r.returncode != 0 and "nvidia-smi not found" in r.stderr and "SKIP_DRIVER_CHECK=1" in r.stderr
    assert setup(tmp_path, "--check-driver", SKIP_DRIVER_CHECK="1").returncode == 0
    executable(
        tmp_path / "bin" / "nvidia-smi",
        '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n',
    )
    r = setup(tmp_path, "--check-driver")
    assert r.returncode != 0 and "could not read the driver version: NVIDIA-SMI has failed" in r.stderr


def test_the_cuda_12_builds_run_on_an_older_driver_with_their_vllm_wheel(tmp_path):
    cu129 = "https://download.pytorch.org/whl/cu129"
    r = setup(tmp_path, "--check-driver", driver="550.54.15", TORCH_INDEX=cu129)
    assert r.returncode != 0 and "VLLM_WHEEL is not" in r.stderr
    r = setup(tmp_path, "--check-driver", driver="550.54.15", TORCH_INDEX=cu129, VLLM_WHEEL="vllm.whl")
    assert r.returncode == 0 and "(>= 525" in r.stdout
    r = setup(tmp_path, "--check-driver", driver="470.256.02", TORCH_INDEX=cu129, VLLM_WHEEL="v.whl")
    assert r.returncode != 0 and "older than 525" in r.stderr


def test_a_flash_attn_that_does_not_build_is_no_failed_setup(tmp_path):
    r = setup(tmp_path, driver="580.65.06", FAKE_FLASH_FAILS="1")
    assert r.returncode == 0, r.stderr
    assert "flash-attn did not install" in r.stderr and "attn_implementation auto train on SDPA" in r.stderr
    log = calls(tmp_path)
    assert any(" flash-attn" in c for c in log) and any(c.endswith("pip check") for c in log)
    imports = [c for c in log if c.startswith("-c import ")]
    assert imports and "flash_attn" not in imports[0], "the final check does not ask for what did not install"
    assert (tmp_path / "venv" / ".reasonkit-setup-gpu").read_text().splitlines()[1] == "flash_attn=0"
    again = setup(tmp_path, driver="580.65.06", FAKE_FLASH_FAILS="1")
    assert again.returncode == 0 and "flash-attn did not install" not in again.stderr, "a rerun is the stamp only"
    built = setup(tmp_path / "built", driver="580.65.06")
    checks = [c for c in calls(tmp_path / "built") if c.startswith("-c import ")]
    assert built.returncode == 0 and "flash_attn" in checks[0]
