"""Peak training memory per GPU, estimated from config.json and the settings: no weights loaded.

The terms, for a decoder of vocabulary V, hidden h, L layers, MLP width i, key/value width kv, and
T = batch_size x sequence tokens per device per micro-step (packing: batch_size x max_length):

- weights: parameters x 2 bytes (bf16) or 4 (fp32);
- full fine-tuning: gradients in the weights' dtype, AdamW's two moments in it too (the Trainer's
  torch AdamW keeps them in the parameters' dtype): 8 bytes/param in bf16, 16 in fp32;
- LoRA: the base weights as above, plus the adapters in fp32 (peft upcasts them) with their
  gradients and moments: 16 bytes per adapter parameter;
- activations: with gradient checkpointing each layer keeps its input (L x T x h) and one layer is
  recomputed at a time (T x (6h + 2kv + 4i)); without it every layer keeps T x (6h + 2kv + 4i);
  in the activation dtype. Attention is FlashAttention/SDPA (no T x T scores);
- logits: T x V x 4 bytes, the fp32 logits the loss is computed on (alone 19.9 GB at T = 32,768 with
  Qwen's 151,936 tokens); zero with use_liger_kernel (fused linear cross-entropy, chunked).

Every process holds all of it under DDP; under FSDP or ZeRO-3 the weights, gradients and optimizer
states are divided by the process count. CUDA context, allocator fragmentation and temporaries come on
top, so a plan near the limit will not fit.

>>> shape = {"vocab_size": 151936, "hidden_size": 1536, "num_hidden_layers": 28, "intermediate_size": 8960,
...          "num_attention_heads": 12, "num_key_value_heads": 2, "tie_word_embeddings": True, "model_type": "qwen2"}
>>> e = estimate(shape, tokens=32768, bf16=True, full=True, checkpointing=True)
>>> round(e.logits / 1e9, 1), e.parameters
(19.9, 1543714304)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GB = 1e9
_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Estimate:
    parameters: int
    trainable: int
    weights: float  # bytes
    gradients: float
    optimizer: float
    activations: float
    logits: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total}

    def describe(self) -> str:
        parts = ("weights", "gradients", "optimizer", "activations", "logits")
        return f"{self.total / GB:.1f} GB (" + ", ".join(f"{p} {getattr(self, p) / GB:.1f}" for p in parts) + ")"


def _dims(shape: dict) -> tuple[int, int, int, int, int, int, int]:
    h, heads = shape["hidden_size"], shape["num_attention_heads"]
    head_dim = shape.get("head_dim") or h // heads
    kv = (shape.get("num_key_value_heads") or heads) * head_dim
    return shape["vocab_size"], h, shape["num_hidden_layers"], shape["intermediate_size"], heads * head_dim, kv, head_dim


def parameter_count(shape: dict) -> int:
    """Llama/Qwen2-style decoders: embeddings (+ an untied head), attention, gated MLP, two norms a layer."""
    vocab, h, layers, inter, q, kv, _ = _dims(shape)
    bias = q + 2 * kv if shape.get("attention_bias") or shape.get("model_type") == "qwen2" else 0  # Qwen2: q, k, v biases
    per_layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h
    head = 0 if shape.get("tie_word_embeddings", True) else vocab * h
    return vocab * h + head + layers * per_layer + h


def lora_count(shape: dict, rank: int, targets: str = "all-linear") -> int:
    """Adapter parameters: rank x (in + out) for each targeted projection of every layer."""
    _, h, layers, inter, q, kv, _ = _dims(shape)
    sizes = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
             "gate_proj": (h, inter), "up_proj": (h, inter), "down_proj": (inter, h)}
    names = _LINEAR if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip() in sizes]
    return layers * sum(rank * sum(sizes[n]) for n in names)


def estimate(shape: dict, *, tokens: int, bf16: bool, full: bool, checkpointing: bool, lora_r: int = 16,
             targets: str = "all-linear", liger: bool = False, shards: int = 1) -> Estimate:
    """Bytes per device for one micro-step of ``tokens`` tokens (see the module docstring)."""
    vocab, h, layers, inter, _, kv, _ = _dims(shape)
    width = 2 if bf16 else 4
    params = parameter_count(shape)
    if full:
        trainable, grads, optimizer = params, params * width, params * 2 * width
    else:
        trainable = lora_count(shape, lora_r, targets)
        grads, optimizer = trainable * 4, trainable * 8
    weights = params * width + (0 if full else trainable * 4)
    layer = tokens * (6 * h + 2 * kv + 4 * inter) * width
    activations = (layers * tokens * h * width + layer) if checkpointing else layers * layer
    logits = 0 if liger else tokens * vocab * 4
    return Estimate(params, trainable, weights / shards, grads / shards, optimizer / shards, activations, logits)


def model_shape(student: str) -> dict | None:
    """The text model's config as a dict (config.json, no weights); None when it lacks the fields."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(student)
    except OSError:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    shape = text.to_dict()
    needed = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads")
    return shape if all(isinstance(shape.get(k), int) for k in needed) else None


def gpu_budget(cfg) -> tuple[float | None, str]:
    """The GPU memory to fit, in bytes, and where it came from: ``gpu_memory_gb``, else torch.cuda's
    first device when CUDA is present and the run is not forced onto the CPU; (None, "") otherwise."""
    if cfg.gpu_memory_gb is not None:
        return cfg.gpu_memory_gb * GB, f"gpu_memory_gb {cfg.gpu_memory_gb:g}"
    if cfg.device == "cpu":
        return None, ""
    import torch

    if not torch.cuda.is_available():
        return None, ""
    props = torch.cuda.get_device_properties(0)
    return float(props.total_memory), f"{props.name}, {props.total_memory / GB:.1f} GB"


def memory_finding(cfg, *, max_length: int, longest: int):
    """The lint's ``memory`` finding when the estimate exceeds the GPU, else None (also None off GPU)."""
    from reasonkit.distill.lint import Finding

    budget, where = gpu_budget(cfg)
    shape = model_shape(cfg.student) if budget is not None else None
    if shape is None:
        return None
    sequence = max_length if cfg.packing else min(max_length, max(1, longest))
    tokens = cfg.batch_size * sequence
    shards = _shards(cfg)
    e = estimate(shape, tokens=tokens, bf16=cfg.bf16 is not False, full=cfg.full,
                 checkpointing=cfg.gradient_checkpointing is not False, lora_r=cfg.lora_r, targets=cfg.target_modules,
                 liger=cfg.use_liger_kernel, shards=shards)
    if e.total <= budget:
        return None
    levers = ["lower batch_size (raise grad_accum to keep the global batch)"]
    if not cfg.use_liger_kernel and e.logits:
        levers.append(f"use_liger_kernel=true (the logits, {tokens} tokens x {shape['vocab_size']} vocab x 4 bytes, are never whole)")
    if cfg.gradient_checkpointing is False:
        levers.append("gradient_checkpointing=true")
    if cfg.full:
        levers.append("LoRA instead of full=true, or launcher accelerate with accelerate_config fsdp/zero3 (shards the states)")
    return Finding("memory", f"estimated peak memory per GPU {e.describe()} exceeds the GPU's {budget / GB:.1f} GB ({where}) "
                             f"at {tokens} tokens per micro-step ({cfg.batch_size} x {sequence}); {'; '.join(levers)}")


def _shards(cfg) -> int:
    """How many processes share the weights, gradients and optimizer states: the process count under an
    FSDP or ZeRO-3 accelerate config (shipped name or YAML file), else 1 (DDP keeps a whole copy each)."""
    config = getattr(cfg, "accelerate_config", None)
    if getattr(cfg, "launcher", "none") != "accelerate" or not config:
        return 1
    sharded = config in ("fsdp", "zero3")
    if not sharded and config not in ("ddp",):
        try:
            import yaml

            data = yaml.safe_load(open(config)) or {}
        except (OSError, ValueError):
            data = {}
        deepspeed = data.get("deepspeed_config") or {}
        sharded = data.get("distributed_type") == "FSDP" or deepspeed.get("zero_stage") == 3
    if not sharded:
        return 1
    if cfg.num_processes:
        return cfg.num_processes
    import torch

    return max(1, torch.cuda.device_count())
