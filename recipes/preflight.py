"""What every step of a recipe imports, checked before its first step starts (``distill run``).

A missing package found by the step that imports it is found hours in: r1-distill-qwen-1.5b.yaml's
SFT needs DeepSpeed (ZeRO-3) after a teacher generation that takes a day. So ``distill run`` asks,
for every step it is about to run, which modules it will import, finds them without importing them
(``importlib.util.find_spec``: ``distill --help`` and ``--plan`` stay light), and stops with one list
of what is missing and the pip lines that install it. The config keys were checked by
runner.validate; this is what a valid config still needs installed.

>>> [n.module for n in needs_of("train", {"launcher": "accelerate", "accelerate_config": "zero3"})]
['accelerate', 'deepspeed']
>>> [n.module for n in needs_of("eval", {"backend": "vllm", "engine": "ray"})]
['vllm', 'ray']
>>> [[n.module for n in needs_of("train", {"attn_implementation": a})] for a in ("flash_attention_2", "auto")]
[['flash_attn'], []]
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reasonkit.errors import UserError

#: Where a module comes from: a reasonkit extra, or a pip line when it cannot be one.
EXTRAS = {"vllm": "vllm", "deepspeed": "deepspeed", "ray": "ray"}
PIP = {
    # its build imports torch: pip cannot build it in an isolated environment (scripts/setup-gpu.sh)
    "flash_attn": "pip install flash-attn --no-build-isolation",
    "liger_kernel": "pip install liger-kernel",
    "kernels": "pip install kernels",
    "accelerate": "pip install accelerate",
}
_ENGINE_STAGES = ("generate", "eval", "judge", "critique", "score", "label-steps")


@dataclass(frozen=True)
class Need:
    module: str
    why: str  # the key that asks for it, as the recipe names it


def needs_of(stage: str, config: Any) -> list[Need]:
    """The modules a step of ``stage`` with this config (a dataclass or a dict) imports beyond the core ones."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    out: list[Need] = []
    if stage in _ENGINE_STAGES and get("backend", "vllm") == "vllm":
        out.append(Need("vllm", "backend vllm"))
    if get("engine") == "ray":
        out.append(Need("ray", "engine ray"))
    if stage == "train":
        if get("launcher") == "accelerate":
            out.append(Need("accelerate", "launcher accelerate"))
            if _is_deepspeed(get("accelerate_config")):
                out.append(Need("deepspeed", f"accelerate_config {get('accelerate_config')}"))
        if get("use_liger_kernel"):
            out.append(Need("liger_kernel", "use_liger_kernel"))
        attn = str(get("attn_implementation") or "")
        if attn == "flash_attention_2":  # auto needs none: SDPA where flash-attn is missing (levers.resolve_attention)
            out.append(Need("flash_attn", f"attn_implementation {attn}"))
        elif attn.startswith("kernels-community/"):
            out.append(Need("kernels", f"attn_implementation {attn}"))
    return out


def _is_deepspeed(accelerate_config: str | None) -> bool:
    """Whether an accelerate config (a shipped name or a YAML path) runs DeepSpeed."""
    if not accelerate_config:
        return False
    import yaml

    from reasonkit.distill.launch import config_file

    try:
        data = yaml.safe_load(config_file(accelerate_config).read_text()) or {}
    except (OSError, ValueError, UserError):
        return False  # an unreadable config is the launcher's to report, with its path
    return data.get("distributed_type") == "DEEPSPEED"


def missing(planned: list, *, cuda: Callable[[], bool]) -> list[str]:
    """One line per step and module missing here (``step: module (key)``), for the steps in ``planned``.

    ``cuda``: whether this machine trains on a GPU (asked only for a GRPO step that leaves use_vllm to
    auto): there GRPO generates with vLLM, and only a vLLM TRL drives will do (distill/rl/vllm_support.py).
    """
    from reasonkit.distill.rl.vllm_support import NAMES, TRL_VLLM, supported_vllm, vllm_version

    lines = []
    for p in planned:
        name, config = p.step.name, p.config
        for need in needs_of(p.step.stage, config):
            if not installed(need.module):
                lines.append(f"{name}: {need.module} ({need.why})")
        if p.step.stage == "train" and getattr(config, "method", None) in ("grpo", "distill"):  # they sample
            auto = config.use_vllm is None
            if (config.use_vllm or (auto and config.device != "cpu" and cuda())) and not supported_vllm():
                found = f"vllm {vllm_version()} is installed" if vllm_version() else "none is installed"
                lines.append(
                    f"{name}: vllm ({'use_vllm auto on a GPU' if auto else 'use_vllm true'}: TRL's "
                    f"{NAMES[config.method][1]} generates with vLLM {TRL_VLLM[0]} to {TRL_VLLM[1]}, {found})"
                )
    return lines


def pip_lines(lines: list[str]) -> list[str]:
    """The install commands for the missing modules named in ``lines``."""
    text = " ".join(lines)
    extras = sorted({extra for module, extra in EXTRAS.items() if f": {module} (" in text})
    out = [f"pip install -c constraints-gpu.txt 'reasonkit[{','.join(extras)}]'"] if extras else []
    out += [line for module, line in PIP.items() if f": {module} (" in text]
    return out


def check(recipe, planned: list, *, cuda: Callable[[], bool] | None = None) -> None:
    """Raise one UserError naming every step's missing module and the pip lines, or a reward its policy cannot
    meet; nothing when all is well."""
    from reasonkit.recipes.crosscheck import problems
    from reasonkit.recipes.reward_check import unmet_format_rewards

    unmet = problems(planned) + unmet_format_rewards(planned)
    if unmet:
        raise UserError(f"{recipe.path}: {'; '.join(unmet)}")
    lines = missing(planned, cuda=cuda or gpu_here)
    if lines:
        raise UserError(
            f"{recipe.path}: {len(lines)} thing(s) the steps need are not installed, found before the first "
            f"step: {'; '.join(lines)}; install: {' && '.join(pip_lines(lines))} (or bash scripts/setup-gpu.sh "
            "on a GPU machine)"
        )


def check_fit(recipe, planned: list, names: set[str], state: dict, gpu_gb: float | None) -> None:
    """On a GPU machine: the steps about to run (``names``) whose --plan estimate passes this GPU's memory
    (``gpu_gb``: torch's figure; None off GPU, where nothing is refused) are one UserError."""
    if gpu_gb is None:
        return
    from reasonkit.recipes.plan import plan, refusals

    refused = refusals([s for s in plan(recipe, planned, state, gpu_gb=gpu_gb) if s.name in names])
    if refused:
        raise UserError(
            f"{recipe.path}: {len(refused)} step(s) would not fit this {gpu_gb:.0f} GB GPU: {'; '.join(refused)}"
        )


def gpu_memory_gb() -> float | None:
    """The first CUDA GPU's memory in GB, None without one.

    Asked of nvidia-smi, not torch: ``torch.cuda.get_device_properties`` initialises CUDA in ``distill run``'s own
    process, which then holds a context on GPU 0 for the whole recipe while every model step runs in a child
    (recipes/isolate.py) that wants that GPU empty. torch answers only where nvidia-smi is missing."""
    from reasonkit.recipes.plan import visible_gpu

    found = visible_gpu()
    if found is not None:
        return found[1] / 1e9
    if not gpu_here():
        return None
    import torch

    return torch.cuda.get_device_properties(0).total_memory / 1e9


def installed(module: str) -> bool:
    """Whether ``module`` would import here, found without importing it."""
    return importlib.util.find_spec(module) is not None


def gpu_here() -> bool:
    """Whether torch sees a CUDA GPU (imported only when a GRPO step leaves use_vllm to auto)."""
    import torch

    return torch.cuda.is_available()
