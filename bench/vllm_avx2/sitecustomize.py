"""Loaded at every Python start of a spread run whose setting caps the CPU at AVX2 (bench/quickstart_spread.py
puts this folder on PYTHONPATH): makes vLLM's CPU engine load its AVX2 kernels on a CPU that has AVX-512.

vLLM has no switch for this: ``CpuPlatform.import_kernels`` loads ``_C`` (AVX-512 with bf16), ``_C_AVX512`` or
``_C_AVX2`` by asking ``torch.cpu._is_avx512_supported()`` and ``_is_avx512_bf16_supported()``, which read the
CPU's flags, not ``ATEN_CPU_CAPABILITY``. Answering no to both, here and in every process vLLM starts (they
inherit PYTHONPATH), gives the kernels an AVX2-only machine (an AMD Zen 3) runs. Bench-only: never installed.
"""

import os

if os.environ.get("REASONKIT_BENCH_VLLM_AVX2") == "1":
    import torch.cpu

    torch.cpu._is_avx512_supported = lambda: False
    torch.cpu._is_avx512_bf16_supported = lambda: False
