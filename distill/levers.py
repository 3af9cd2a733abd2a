"""TRL's memory levers for long traces, from TrainConfig to SFTConfig/DPOConfig, and what counts as
FlashAttention.

R1 traces run to 16k-32k tokens. At 32,768 tokens the logits of a 151,936-token vocabulary are 19.9 GB
in fp32 before anything else (distill/lint/memory.py), so long-trace recipes (open-r1's OpenR1-Distill-7B:
Liger kernels, ``max_grad_norm`` 0.2, ``cosine_with_min_lr`` with ``min_lr_rate`` 0.1, non-reentrant
gradient checkpointing) need these passed through as TRL names them.

>>> is_flash_attention("kernels-community/flash-attn3"), is_flash_attention("flash_attention_2"), is_flash_attention("sdpa")
(True, True, False)
>>> resolve_attention("sdpa", cuda=True), resolve_attention("auto", cuda=False)
('sdpa', 'sdpa')
"""  # noqa: E501

from __future__ import annotations

#: kernels-community repos that transformers runs as FlashAttention (modeling_flash_attention_utils'
#: FLASH_ATTN_KERNEL_VERSIONS): flash-attn2/3/4, vllm-flash-attn3, aiter-flash-attn, metal-flash-sdpa.
_KERNEL_HUB = "kernels-community/"


#: ``attn_implementation: auto``: FlashAttention 2 where it can run (a CUDA device and flash-attn importable), else
#: SDPA. flash-attn is a source build that fails on nodes without a matching CUDA toolkit (scripts/setup-gpu.sh
#: goes on without it), so a recipe that can do without it asks for ``auto`` rather than ``flash_attention_2``.
AUTO = "auto"


def resolve_attention(attn_implementation: str, *, cuda: bool) -> str:
    """The attention a run uses: ``auto`` resolved (see :data:`AUTO`), any other name as given.

    Looks for flash-attn without importing it (``find_spec``), so ``--plan`` and validation stay light.
    """
    if attn_implementation != AUTO:
        return attn_implementation
    import importlib.util

    return "flash_attention_2" if cuda and importlib.util.find_spec("flash_attn") is not None else "sdpa"


def is_flash_attention(attn_implementation: str | None) -> bool:
    """FlashAttention by name: ``flash_attention_2/3/4`` or a ``kernels-community/*flash*`` hub kernel
    (optionally ``@revision`` or ``:revision``). These take varlen (packed, padding-free) batches."""
    name = str(attn_implementation or "")
    if name.startswith("flash_attention"):
        return True
    if name.startswith(_KERNEL_HUB):
        repo = name[len(_KERNEL_HUB) :].split("@")[0].split(":")[0]
        return "flash" in repo
    return False


def trl_levers(cfg) -> dict:
    """Keyword arguments for SFTConfig (method sft) or DPOConfig: only the levers the user set, so
    TRL's own defaults stay in force otherwise."""
    levers = {}  # max_grad_norm travels with the other shared arguments (student.trainer_args)
    if cfg.use_liger_kernel:
        import importlib.util

        from reasonkit.errors import UserError

        if importlib.util.find_spec("liger_kernel") is None:  # the Trainer would fail only after the model loaded
            raise UserError(
                "use_liger_kernel: the liger-kernel package is not installed (pip install liger-kernel, CUDA only)"
            )
        levers["use_liger_kernel"] = True
    if cfg.lr_scheduler_kwargs:
        levers["lr_scheduler_kwargs"] = dict(cfg.lr_scheduler_kwargs)
    if cfg.gradient_checkpointing_kwargs:
        levers["gradient_checkpointing_kwargs"] = dict(cfg.gradient_checkpointing_kwargs)
    if cfg.dataset_num_proc:
        levers["dataset_num_proc"] = cfg.dataset_num_proc
    if cfg.method == "sft" and cfg.padding_free:
        levers["padding_free"] = True
    return levers


def sampling_levers(cfg, *, vllm: bool, longest_prompt: int | None) -> dict:
    """How the policy samples, in the names GRPOConfig and DistillationConfig share: vLLM's mode, memory share and
    context (prompt + completion; the server's address only where the config gives it), or transformers'
    ``generate`` with its KV cache: transformers 5 fills what TRL leaves None from the model's
    generation_config, so a student saved with use_cache false would sample without one (14x slower on the
    teacher). ``longest_prompt``: the lint's measure, when ``max_prompt_length`` is not given."""
    if not vllm:
        return {"generation_kwargs": {"use_cache": True}}
    import dataclasses

    prompt = cfg.max_prompt_length or longest_prompt
    # the server's address (config.VLLM_SERVER_FIELDS, read by prefix: config.py imports this module)
    server = [f.name for f in dataclasses.fields(cfg) if f.name.startswith("vllm_server_")]
    return {
        "vllm_mode": cfg.vllm_mode,
        "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "vllm_max_model_length": prompt + cfg.max_completion_length if prompt else None,
        **{k: getattr(cfg, k) for k in server if getattr(cfg, k) is not None},
    }
