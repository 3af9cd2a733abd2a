"""Which weights an evaluation runs, and a hash of them for the protocol.

A LoRA student is evaluated without merging where the backend serves adapters itself (vLLM's
LoRA requests); otherwise the adapter is merged once into ``OUT/merged`` and that is served.
"""

from __future__ import annotations

from pathlib import Path


def directory_hash(path: str | None) -> str | None:
    """The content identity (identity.py) of a model or adapter directory: ``sha256:...`` over its
    weight, config and tokenizer files. A Hub id (not a local directory) gives None here."""
    from reasonkit.identity import directory_identity

    if path is None or not Path(path).is_dir():
        return None
    return directory_identity(path)


def resolve_model(config, out: Path) -> tuple[str, str | None]:
    """``(model to serve, how the adapter is applied)`` for an EvalConfig."""
    if config.adapter is None:
        return config.model, None
    # Ray replicas build their engines from a model path, so there the adapter is merged once.
    if config.backend == "vllm" and config.engine == "local" and _vllm_serves_lora():
        return config.model, "vllm-lora"
    return merge_adapter(config.model, config.adapter, out / "merged"), "merged"


def lora_backend(config, replicas: int):
    """vLLM serving ``config.adapter`` on its base, unmerged: one engine, or ``replicas`` of them
    (gen/parallel.py), each on ``tensor_parallel`` GPUs of its own."""
    options = dict(
        lora=config.adapter,
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        tensor_parallel=config.tensor_parallel,
        gpu_memory_utilization=config.gpu_memory_utilization,
        seed=config.seed,
        **config.engine_args,
    )
    if replicas > 1:
        from reasonkit.gen.parallel import DataParallel

        return DataParallel(config.model, replicas, backend="vllm", **options)
    from reasonkit.gen.vllm_backend import VllmBackend

    return VllmBackend(config.model, **options)


def _vllm_serves_lora() -> bool:
    from reasonkit.gen import vllm_backend

    return bool(getattr(vllm_backend, "SUPPORTS_LORA", False))


def merge_adapter(base: str, adapter: str, target: Path) -> str:
    """Merge a peft adapter into its base and save it (with the adapter's tokenizer) at ``target``.

    The merge is computed in float32 (a bf16 ``W + BA`` rounds twice) and saved in the base's own
    dtype, so the merged model is served exactly as the base would be: a bf16 base stays bf16, half
    the bytes and the numerics its evaluation is compared with. Reused when ``target`` already
    holds a merge of the same adapter in that dtype, so a rerun does not redo it.
    """
    stamp = target / ".adapter_hash"
    dtype = base_dtype(base)
    want = f"{directory_hash(adapter) or ''} {dtype}"
    if stamp.is_file() and stamp.read_text() == want:
        return str(target)
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, adapter).merge_and_unload().to(getattr(torch, dtype))
    merged.config.dtype = dtype  # what config.json says, so vLLM's dtype "auto" picks it too
    tok_dir = adapter if (Path(adapter) / "tokenizer_config.json").is_file() else base
    tmp = target.with_name(f".{target.name}.tmp")
    merged.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(tok_dir).save_pretrained(tmp)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.replace(target)
    stamp.write_text(want)
    return str(target)


def base_dtype(base: str) -> str:
    """The dtype a model's config.json names (``dtype``, or the older ``torch_dtype``); float32 when
    it names none, as transformers then loads it."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(base)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
    return str(dtype).replace("torch.", "")
