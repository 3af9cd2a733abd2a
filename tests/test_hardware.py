"""reasonkit/hardware.py: the machine and the libraries a run's floats depended on (issue 36 item 3)."""

import json
import os
import subprocess
import sys

import pytest

from reasonkit import hardware


def machine_in_a_child(**env) -> dict:
    """machine(gpu=False) in a fresh interpreter: torch reads ATEN_CPU_CAPABILITY once, at import."""
    code = "import json; from reasonkit.hardware import machine; print(json.dumps(machine(gpu=False)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_the_instruction_set_torch_was_told_to_use_is_recorded_with_the_variable():
    import torch

    here = hardware.machine(gpu=False)
    assert here["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert here["threads"] == torch.get_num_threads() >= 1
    told = machine_in_a_child(ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE")
    assert told["cpu_capability"] == "DEFAULT"  # torch's plain kernels, whatever this CPU has
    assert told["float_env"] == {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}
    assert told["cpu"] == here["cpu"] and told["cpu_flags"] == here["cpu_flags"]  # the CPU did not change


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo (Linux)")
def test_the_cpu_is_named_with_the_flags_that_pick_its_kernels():
    text = open("/proc/cpuinfo").read()
    here = hardware.machine(gpu=False)
    if "model name" in text:
        name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
        assert here["cpu"] and here["cpu"].startswith(name)
    assert set(here["cpu_flags"]) <= set(hardware.CPU_FLAGS)
    assert ("avx2" in here["cpu_flags"]) == (" avx2" in text)
    assert here["gpu"] is None and here["gpu_driver"] is None


def test_a_gpu_is_named_with_its_driver_by_nvidia_smi_without_starting_cuda(tmp_path, monkeypatch):
    """A GPU run's report says which GPU and which driver; torch.cuda is not asked where nvidia-smi answers."""
    import torch

    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "NVIDIA H100 80GB HBM3, 570.124.06"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: pytest.fail("torch.cuda asked: CUDA started"))
    gpu = hardware.machine(gpu=True)
    assert (gpu["gpu"], gpu["gpu_driver"]) == ("NVIDIA H100 80GB HBM3", "570.124.06")
    assert (tmp_path / "args").read_text().split()[:2] == ["-i", "3"]  # the GPU this process sees first
    assert "cuda" in gpu  # the CUDA torch was built with (None for a CPU build)


def test_versions_name_the_libraries_installed_here():
    import torch
    import transformers
    import trl

    from reasonkit import __version__

    found = hardware.versions()
    assert found["reasonkit"] == __version__ and found["torch"] == torch.__version__
    assert found["transformers"] == transformers.__version__ and found["trl"] == trl.__version__
    try:
        import vllm
    except ImportError:
        assert "vllm" not in found
    else:
        assert found["vllm"] == vllm.__version__


def test_a_cpu_is_named_with_its_family_and_model_numbers(tmp_path, monkeypatch):
    """Two cloud VMs both called "AMD EPYC" (a Zen 3 and a Zen 4) gave different figures (issue 36): the
    record tells them apart. Before, "model" was matched by prefix and would have read "model name"'s line."""
    from pathlib import Path as RealPath

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n"
    )
    monkeypatch.setattr(hardware, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else RealPath(p))
    assert hardware.cpu_model() == "AMD EPYC (family 25 model 1)"
    assert hardware.machine(gpu=False)["cpu_flags"] == ["avx2", "fma"]
