"""The student model, the device it trains on, and the trainer arguments both methods share.

Device-aware defaults (each overridable with ``--set``):

- CUDA: bf16 weights and autocast, gradient checkpointing on. Several GPUs: ``launcher: accelerate``
  with ``num_processes`` and ``accelerate_config`` (ddp, fsdp, zero3), or ``accelerate launch -m
  reasonkit.distill.command ...`` by hand (distill/launch.py); the Trainer shards the batches.
- CPU: ``use_cpu``, fp32, no gradient checkpointing. bf16 matmuls are ~12x slower than fp32 on these
  CPUs, and checkpointing trades compute (the scarce thing here) for memory (the plentiful one).
  For tiny models on a shared machine ``--set threads=1`` is often several times faster than the
  default, because two OpenMP threads fighting a third process for two cores spin-wait.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from reasonkit.errors import UserError


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda"
    bf16: bool
    gradient_checkpointing: bool
    threads: int
    world_size: int

    def as_dict(self) -> dict:
        return asdict(self)


def resolve_device(cfg) -> Device:
    import torch

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    has_cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not has_cuda:
        raise UserError("device: cuda requested but torch sees no CUDA device")
    cuda = has_cuda if cfg.device == "auto" else cfg.device == "cuda"
    bf16 = cfg.bf16 if cfg.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())
    checkpointing = cfg.gradient_checkpointing if cfg.gradient_checkpointing is not None else cuda
    return Device(
        kind="cuda" if cuda else "cpu",
        bf16=bf16,
        gradient_checkpointing=checkpointing,
        threads=torch.get_num_threads(),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
    )


def load_model(cfg, device: Device):
    import torch
    from transformers import AutoModelForCausalLM

    from reasonkit.distill.data import model_ref
    from reasonkit.distill.levers import resolve_attention

    dtype = torch.bfloat16 if device.bf16 and device.kind == "cuda" else torch.float32
    attention = resolve_attention(
        cfg.attn_implementation, cuda=device.kind == "cuda"
    )  # auto: FlashAttention 2 or SDPA
    try:
        return AutoModelForCausalLM.from_pretrained(model_ref(cfg.student), dtype=dtype, attn_implementation=attention)
    except OSError as e:
        raise UserError(f"{cfg.student}: cannot load the student model ({str(e).splitlines()[0]})") from None


def lora_config(cfg):
    """peft's LoRA settings, or None for full fine-tuning."""
    if cfg.full:
        return None
    from peft import LoraConfig

    modules = (
        cfg.target_modules
        if cfg.target_modules == "all-linear"
        else [m.strip() for m in cfg.target_modules.split(",") if m.strip()]
    )
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=modules,
        bias="none",
        task_type="CAUSAL_LM",
    )


def trainer_args(cfg, device: Device, checkpoints: Path, max_length: int) -> dict:
    """Keyword arguments common to SFTConfig and DPOConfig."""
    from reasonkit.distill.trackers import training_arguments

    warmup = int(cfg.warmup) if cfg.warmup >= 1 else cfg.warmup
    return dict(
        output_dir=str(checkpoints),
        use_cpu=device.kind == "cpu",
        bf16=device.bf16,
        fp16=False,
        gradient_checkpointing=device.gradient_checkpointing,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler,
        warmup_steps=warmup,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_length=max_length,
        logging_steps=1,  # the report keeps the per-step loss
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        seed=cfg.seed,
        data_seed=cfg.seed,
        **training_arguments(cfg.trackers, cfg.out),  # report_to (--report-to), run_name
        disable_tqdm=True,  # the Monitor callback draws the progress bar
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False if device.world_size > 1 else None,
    )


def count_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts. Under DeepSpeed ZeRO-3 a process holds a partition of each
    weight (``p.numel()`` is 0 or a shard); DeepSpeed keeps the whole size in ``ds_numel``."""
    sizes = [(getattr(p, "ds_numel", None) or p.numel(), p.requires_grad) for p in model.parameters()]
    return sum(n for n, trains in sizes if trains), sum(n for n, _ in sizes)


def merge_adapter(adapter_dir: Path, out_dir: Path, bf16: bool, method: str = "sft") -> Path:
    """Fold a saved LoRA adapter into its base weights: a plain model directory for transformers and vLLM.

    Reloads the base from the adapter's ``base_model_name_or_path`` rather than merging the trained
    object in place, so the merged weights are exactly base + saved adapter, whatever wrappers the
    trainer put around the live model. Reward models (rm, prm) keep their head: distill/reward/heads.py.
    """
    from reasonkit.distill.reward import heads

    if heads.is_head(method):
        return heads.merge_head_adapter(method, adapter_dir, out_dir, bf16)
    import torch
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    dtype = torch.bfloat16 if bf16 else torch.float32
    model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir), dtype=dtype)
    merged = model.merge_and_unload()
    merged.save_pretrained(str(out_dir))
    AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(out_dir))
    return out_dir
