"""Peak training memory per GPU, estimated from config.json and the settings: no weights loaded.

The terms follow what the libraries allocate, for a decoder of vocabulary V, hidden h, L layers, MLP
width i, key/value width kv, and T = rows x sequence tokens per device per micro-step (a DPO or reward
model pair is two rows, chosen and rejected, in one forward):

- weights, gradients, optimizer, by how the process holds them (``sharding``):
  - one whole copy (a single process, or DDP): the weights in their load dtype (bf16 on a GPU), gradients
    in it too, and torch's AdamW two moments ``zeros_like`` the parameters: 2 + 2 + 4 = 8 bytes/param;
  - DeepSpeed ZeRO-3 (bf16): bf16 weights and gradients, and fp32 master weights plus two fp32 moments:
    2 + 2 + 12 = 16 bytes/param, divided by the processes;
  - FSDP2 under accelerate's mixed precision: the sharded parameters are upcast to fp32 (accelerate's
    "FSDP upcast of low precision parameters to fp32"), so fp32 weights, gradients and moments: 4 + 4 + 8
    = 16 bytes/param, divided by the processes;
- LoRA: the base weights frozen as above, the adapters in fp32 (peft upcasts them) with fp32 gradients and
  moments: 4 + 4 + 8 bytes per adapter parameter;
- reference: TRL's frozen copy of the policy (GRPO with beta > 0, DPO without precomputed reference
  log-probs) when the weights are full; with LoRA the reference is the base with the adapter off (no copy).
  Sharded like the policy under ZeRO-3/FSDP (TRL prepares it with the same plugin);
- a reward model a GRPO reward loads in every process (whole, in the policy's dtype: reward/model.py):
  ``frozen``;
- activations: with gradient checkpointing each layer keeps its input (L x T x h) and one layer is
  recomputed at a time (T x (6h + 2kv + 4i)); without it every layer keeps T x (6h + 2kv + 4i); in the
  activation dtype. Attention is FlashAttention/SDPA (no T x T scores);
- logits: TRL 1.16's SFT, DPO and GRPO trainers never build them whole: a fused LM head scores tiles of
  4,096 tokens x 32,768 vocabulary entries in the activation dtype (trl/kernels/chunked_logprob.py) and its
  backward accumulates in fp32 the hidden states' gradient (T x h x 4) and, when the head trains, the
  head's (V x h x 4); a reward model's score head has no vocabulary logits; ``whole`` (T x V x 4 bytes,
  fp32) is what a plain causal-LM loss would build;
- vLLM colocated with GRPO (TRL's vllm_mode colocate): ``vllm_gpu_memory_utilization`` of the GPU's
  total memory (vLLM's own arithmetic: the fraction of torch.cuda's ``total_memory``);
- attention: FlashAttention needs no mask; SDPA builds one on a padded batch (:func:`sdpa_mask_bytes`);
- what the process holds besides tensors (:data:`CUDA_CONTEXT`, :data:`NCCL`) and ZeRO-3's communication
  buckets (:func:`zero3_buffers`).

Allocator fragmentation and temporaries come on top, so a plan near the limit will not fit.

>>> shape = {"vocab_size": 151936, "hidden_size": 1536, "num_hidden_layers": 28, "intermediate_size": 8960,
...          "num_attention_heads": 12, "num_key_value_heads": 2, "tie_word_embeddings": True, "model_type": "qwen2"}
>>> e = estimate(shape, tokens=32768, bf16=True, full=True, checkpointing=True, logits="whole")
>>> round(e.logits / 1e9, 1), e.parameters
(19.9, 1543714304)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GB = 1e9
_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


#: TRL's fused LM head tile: tokens x vocabulary entries scored at once (trl/kernels/chunked_logprob.py
#: TOKEN_CHUNK_SIZE, trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE).
TILE_TOKENS, TILE_VOCAB = 4096, 32768
#: (weights, gradients, optimizer) bytes per trained parameter by sharding (module docstring).
FULL_BYTES = {"none": None, "zero3": (2, 2, 12), "fsdp": (4, 4, 8)}
TERMS = (
    "weights",
    "gradients",
    "optimizer",
    "reference",
    "reward_model",
    "teacher",
    "activations",
    "logits",
    "vllm",
    "attention_mask",
    "zero3_buffers",
    "cuda_context",
    "nccl",
)
#: What a training process holds on its GPU besides tensors: the CUDA context (driver state, the kernels of the
#: libraries it loads, cuBLAS workspaces). pytorch/pytorch#34323 measured 781 MB at CUDA's first use; torch loads
#: kernels lazily since CUDA 11.7 (CUDA_MODULE_LOADING=LAZY, its default), ~0.5 GB on an H100 with TRL's stack.
CUDA_CONTEXT = 0.5 * GB
#: NCCL, when several processes train together: send/receive buffers per peer and channel (NCCL_BUFFSIZE 4 MiB
#: for the Simple protocol, plus LL and LL128's) over up to 32 channels on NVLink, NVLink SHARP buffers on an
#: NVSwitch node, for each process group torch and DeepSpeed create: ~1 GB a process, 1.5 GB with the context.
NCCL = 1.0 * GB
#: DeepSpeed 0.19.8's ZeRO-3 defaults (deepspeed/runtime/zero/config.py), in elements: the gradient reduce bucket
#: and the prefetch bucket. accelerate builds the DeepSpeed config from recipes/accelerate/zero3.yaml's few keys
#: (utils/dataclasses.py: stage, offload, 16-bit save) and writes no bucket size, so the "auto" values that
#: transformers' HfDeepSpeedConfig and accelerate fill from the hidden size (reduce hidden^2, prefetch
#: 0.9 x hidden^2, persistence 10 x hidden: 12.8M, 11.6M and 35,840 for Qwen2.5-7B, 26 MB of buckets) never
#: apply: they fill only keys a JSON config sets to "auto". So the defaults hold (:func:`zero3_buffers`).
ZERO3_REDUCE_BUCKET, ZERO3_PREFETCH_BUCKET = 500_000_000, 50_000_000


@dataclass(frozen=True)
class Estimate:
    parameters: int
    trainable: int
    weights: float  # bytes
    gradients: float
    optimizer: float
    activations: float
    logits: float
    reference: float = 0.0
    reward_model: float = 0.0
    teacher: float = 0.0
    vllm: float = 0.0
    attention_mask: float = 0.0
    zero3_buffers: float = 0.0
    cuda_context: float = 0.0
    nccl: float = 0.0

    @property
    def total(self) -> float:
        return sum(getattr(self, t) for t in TERMS)

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total}

    def describe(self) -> str:
        shown = [
            t for t in TERMS if getattr(self, t) or t in ("weights", "gradients", "optimizer", "activations", "logits")
        ]
        return (
            f"{self.total / GB:.1f} GB ("
            + ", ".join(f"{t.replace('_', ' ')} {getattr(self, t) / GB:.1f}" for t in shown)
            + ")"
        )

    def largest(self) -> str:
        """The term that weighs most, in words: where a plan that does not fit should cut first."""
        term = max(TERMS, key=lambda t: getattr(self, t))
        return f"{term.replace('_', ' ')} {getattr(self, term) / GB:.1f} GB"


def _dims(shape: dict) -> tuple[int, int, int, int, int, int, int]:
    h, heads = shape["hidden_size"], shape["num_attention_heads"]
    head_dim = shape.get("head_dim") or h // heads
    kv = (shape.get("num_key_value_heads") or heads) * head_dim
    return (
        shape["vocab_size"],
        h,
        shape["num_hidden_layers"],
        shape["intermediate_size"],
        heads * head_dim,
        kv,
        head_dim,
    )


def parameter_count(shape: dict) -> int:
    """Llama/Qwen2-style decoders: embeddings (+ an untied head), attention, gated MLP, two norms a layer."""
    vocab, h, layers, inter, q, kv, _ = _dims(shape)
    bias = (
        q + 2 * kv if shape.get("attention_bias") or shape.get("model_type") == "qwen2" else 0
    )  # Qwen2: q, k, v biases
    per_layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h
    head = 0 if shape.get("tie_word_embeddings", True) else vocab * h
    return vocab * h + head + layers * per_layer + h


def lora_count(shape: dict, rank: int, targets: str = "all-linear") -> int:
    """Adapter parameters: rank x (in + out) for each targeted projection of every layer."""
    _, h, layers, inter, q, kv, _ = _dims(shape)
    sizes = {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }
    names = _LINEAR if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip() in sizes]
    return layers * sum(rank * sum(sizes[n]) for n in names)


def estimate(
    shape: dict,
    *,
    tokens: int,
    bf16: bool,
    full: bool,
    checkpointing: bool,
    lora_r: int = 16,
    targets: str = "all-linear",
    logits: str = "fused",
    sharding: str = "none",
    shards: int = 1,
    reference: bool = False,
    frozen: float = 0.0,
    teacher: float = 0.0,
    vllm: float = 0.0,
    overheads: dict | None = None,
) -> Estimate:
    """Bytes per device for one micro-step of ``tokens`` tokens (see the module docstring).

    ``logits``: "fused" (TRL's tiled LM head), "whole" (T x V fp32) or "none" (a score head);
    ``sharding``: "none", "zero3" or "fsdp" over ``shards`` processes; ``reference``: a frozen copy of
    the policy; ``frozen``: bytes of a reward model every process holds; ``teacher``: bytes of on-policy
    distillation's local teacher, whole in every process; ``vllm``: bytes vLLM takes;
    ``overheads``: the terms :func:`train_estimate` adds for a run's setup (attention_mask, zero3_buffers,
    cuda_context, nccl), bytes each.
    """
    vocab, h, layers, inter, _, kv, _ = _dims(shape)
    width = 2 if bf16 else 4
    params = parameter_count(shape)
    split = shards if sharding != "none" else 1
    trainable, (weights, grads, optimizer) = _training_state(
        shape, params, bf16=bf16, full=full, lora_r=lora_r, targets=targets, sharding=sharding
    )
    ref = params * width if reference and full else 0.0
    layer = tokens * (6 * h + 2 * kv + 4 * inter) * width
    activations = (layers * tokens * h * width + layer) if checkpointing else layers * layer
    return Estimate(
        params,
        trainable,
        weights / split,
        grads / split,
        optimizer / split,
        activations,
        _head_bytes(logits, tokens=tokens, vocab=vocab, hidden=h, width=width, full=full),
        reference=ref / split,
        reward_model=frozen,
        teacher=teacher,
        vllm=vllm,
        **(overheads or {}),
    )


def _training_state(
    shape: dict, params: int, *, bf16: bool, full: bool, lora_r: int, targets: str, sharding: str
) -> tuple[int, tuple[float, float, float]]:
    """(trainable parameters, (weights, gradients, optimizer state) bytes) before sharding splits them."""
    width = 2 if bf16 else 4
    per_param = FULL_BYTES[sharding] if bf16 else None
    if full:
        w, g, o = per_param or (width, width, 2 * width)
        return params, (params * w, params * g, params * o)
    trainable = lora_count(shape, lora_r, targets)
    base = 4 if sharding == "fsdp" and bf16 else width  # FSDP upcasts every sharded parameter, frozen ones too
    return trainable, (params * base + trainable * 4, trainable * 4, trainable * 8)


def _head_bytes(logits: str, *, tokens: int, vocab: int, hidden: int, width: int, full: bool) -> float:
    """The LM head's working memory: T x V fp32 logits ("whole"), TRL's tiles ("fused") or none (a score head)."""
    if logits == "whole":
        return tokens * vocab * 4
    if logits == "fused":
        return (
            min(tokens, TILE_TOKENS) * min(vocab, TILE_VOCAB) * width
            + tokens * hidden * 4
            + (vocab * hidden * 4 if full else 0)
        )
    return 0


def sdpa_mask_bytes(rows: int, sequence: int, *, width: int, layers: int, checkpointing: bool) -> float:
    """The attention mask of a padded micro-step under SDPA: transformers' ``masking_utils.sdpa_mask`` leaves a
    causal mask to SDPA's ``is_causal`` when nothing is padded, else materialises a boolean rows x 1 x T x T mask
    (1 byte an element) for the whole forward; torch's ``scaled_dot_product_attention`` turns a boolean mask into an
    additive one in the activation dtype (``convert_boolean_attn_mask``) for its memory-efficient kernel, whose
    backward keeps it: one layer's at a time with checkpointing, every layer's without.

    >>> round(sdpa_mask_bytes(4, 9216, width=2, layers=28, checkpointing=True) / 1e9, 2)  # r1-zero-qwen-7b's GRPO
    1.02
    """
    return rows * sequence * sequence * (1 + width * (1 if checkpointing else layers))


def zero3_buffers(shape: dict, width: int) -> float:
    """ZeRO-3's communication buffers in a process, at DeepSpeed's defaults (:data:`ZERO3_REDUCE_BUCKET`): the
    reduce bucket (stage3.py allocates it whole, in the gradients' dtype), the prefetch bucket, and the module
    being computed gathered whole, the largest being the embedding or LM head (V x h) or one decoder layer;
    parameters under stage3_param_persistence_threshold (1e5: norms, biases) stay whole and weigh nothing here.

    >>> from reasonkit.recipes.plan import PUBLISHED_SHAPES
    >>> # Qwen2.5-7B in bf16: (5e8 + 5e7 + 152,064 x 3,584 = 545.0M) x 2 bytes = 1.0 + 0.1 + 1.09 GB
    >>> round(zero3_buffers(PUBLISHED_SHAPES["Qwen/Qwen2.5-7B"], 2) / 1e9, 2)
    2.19
    """
    vocab, h, layers, *_ = _dims(shape)
    layer = (parameter_count(shape) - vocab * h * (1 if shape.get("tie_word_embeddings", True) else 2)) / layers
    return (ZERO3_REDUCE_BUCKET + ZERO3_PREFETCH_BUCKET + max(vocab * h, layer)) * width


def processes_of(cfg) -> int:
    """Training processes, every machine's: ``num_processes`` under accelerate (a plan's layout sets it), else 1."""
    return (cfg.num_processes or 1) if getattr(cfg, "launcher", "none") == "accelerate" else 1


def overheads(cfg, shape: dict, *, rows: int, sequence: int, cuda: bool = True) -> dict:
    """The terms a run's setup adds on a GPU (bytes): the SDPA mask where the attention it resolves to is SDPA
    (``auto``: FlashAttention 2 where flash-attn imports here, levers.resolve_attention) and the batch is padded
    (padding_free: flattened, no mask), ZeRO-3's buffers, the CUDA context, and NCCL when processes talk."""
    from reasonkit.distill.levers import resolve_attention

    width = 2 if cfg.bf16 is not False else 4
    checkpointing = cfg.gradient_checkpointing is not False
    attention = resolve_attention(cfg.attn_implementation, cuda=cuda)
    padded = not getattr(cfg, "padding_free", False)
    mask = 0.0
    if attention == "sdpa" and padded:
        mask = sdpa_mask_bytes(
            rows, sequence, width=width, layers=shape["num_hidden_layers"], checkpointing=checkpointing
        )
    return {
        "attention_mask": mask,
        "zero3_buffers": zero3_buffers(shape, width) if _sharded_kind(cfg) == "zero3" else 0.0,
        "cuda_context": CUDA_CONTEXT if cuda else 0.0,
        "nccl": NCCL if cuda and processes_of(cfg) > 1 else 0.0,
    }


def sharding_of(cfg) -> tuple[str, int]:
    """("zero3" | "fsdp" | "none", processes sharing the states) for a train config (see :func:`_shards`)."""
    kind = _sharded_kind(cfg)
    return (kind, _shards(cfg)) if kind else ("none", 1)


def train_estimate(
    cfg, shape: dict, *, sequence: int, gpu: float | None = None, frozen: float = 0.0, teacher: float = 0.0
) -> tuple[Estimate, int]:
    """The estimate for a train config and its tokens per micro-step: what the lint and ``--plan`` both print.

    ``sequence``: tokens a row; ``gpu``: the GPU's bytes (for colocated vLLM's share); ``frozen``: a reward
    model's bytes; ``teacher``: a local distillation teacher's bytes (:func:`teacher_bytes`). A DPO or
    reward-model pair is two rows in one forward (TRL concatenates chosen and rejected).
    """
    method = cfg.method
    rows = cfg.batch_size * (2 if method in ("dpo", "rm") else 1)
    tokens = rows * sequence
    sharding, shards = sharding_of(cfg)
    reference = cfg.full and (
        (method == "grpo" and cfg.kl_beta > 0) or (method == "dpo" and not (cfg.precompute_ref and sharding != "fsdp"))
    )
    colocated = 0.0
    if method in ("grpo", "distill") and cfg.use_vllm is not False and cfg.vllm_mode == "colocate" and gpu:
        colocated = cfg.vllm_gpu_memory_utilization * gpu
    e = estimate(
        shape,
        tokens=tokens,
        bf16=cfg.bf16 is not False,
        full=cfg.full,
        checkpointing=cfg.gradient_checkpointing is not False,
        lora_r=cfg.lora_r,
        targets=cfg.target_modules,
        logits="none" if method in ("rm", "prm") else "fused",
        sharding=sharding,
        shards=shards,
        reference=reference,
        frozen=frozen,
        teacher=teacher,
        vllm=colocated,
        overheads=overheads(cfg, shape, rows=rows, sequence=sequence, cuda=cfg.device != "cpu"),
    )
    return e, tokens


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
    from reasonkit.distill.lint.base import Finding

    budget, where = gpu_budget(cfg)
    shape = model_shape(cfg.student) if budget is not None else None
    if shape is None:
        return None
    sequence = max_length if cfg.packing else min(max_length, max(1, longest))
    e, tokens = train_estimate(cfg, shape, sequence=sequence, gpu=budget, teacher=teacher_bytes(cfg))
    if e.total <= budget:
        return None
    return Finding(
        "memory",
        f"estimated peak memory per GPU {e.describe()} exceeds the GPU's {budget / GB:.1f} GB ({where}) "
        f"at {tokens} tokens per micro-step ({tokens // sequence} rows x {sequence}); the largest term: "
        f"{e.largest()}; {'; '.join(levers(cfg))}",
    )


def teacher_bytes(cfg, params: int | None = None) -> float:
    """On-policy distillation's local teacher, whole in every process in the student's dtype (TRL's
    DistillationTrainer; ZeRO-3 would shard it, which this upper bound ignores); 0 with ``teacher_url`` (on its
    server) and for the other methods. ``params``: the teacher's size when known, else read from its config."""
    if cfg.method != "distill" or not cfg.teacher or cfg.teacher_url:
        return 0.0
    if params is None:
        shape = model_shape(cfg.teacher)
        params = parameter_count(shape) if shape else 0
    return params * (2 if cfg.bf16 is not False else 4)


def levers(cfg) -> list[str]:
    """What lowers the estimate, in the config's own keys."""
    out = ["lower batch_size (raise grad_accum to keep the global batch)"]
    if cfg.gradient_checkpointing is False:
        out.append("gradient_checkpointing=true")
    if cfg.full and sharding_of(cfg)[0] == "none":
        out.append(
            "LoRA instead of full=true, or launcher accelerate with accelerate_config fsdp/zero3 (shards the states)"
        )
    if cfg.method in ("grpo", "distill") and cfg.use_vllm is not False and cfg.vllm_mode == "colocate":
        out.append("a lower vllm_gpu_memory_utilization")
    if teacher_bytes(cfg, params=1):
        out.append("the teacher behind a vLLM server (teacher_url) instead of a copy in every process")
    return out


def _sharded_kind(cfg) -> str | None:
    """ "zero3" or "fsdp" when the accelerate config (a shipped name or a YAML file) shards the states, else None."""
    config = getattr(cfg, "accelerate_config", None)
    if getattr(cfg, "launcher", "none") != "accelerate" or not config:
        return None
    from reasonkit.distill.launch import config_file
    from reasonkit.errors import UserError

    try:
        import yaml

        data = yaml.safe_load(config_file(config).read_text()) or {}
    except (OSError, ValueError, UserError):
        return None
    if data.get("distributed_type") == "FSDP":
        return "fsdp"
    if (data.get("deepspeed_config") or {}).get("zero_stage") == 3:
        return "zero3"
    return None


def _shards(cfg) -> int:
    """How many processes share the weights, gradients and optimizer states: the process count (every
    machine's) under an FSDP or ZeRO-3 accelerate config, else 1 (DDP keeps a whole copy each)."""
    if _sharded_kind(cfg) is None:
        return 1
    if cfg.num_processes:
        return cfg.num_processes
    import torch

    return max(1, torch.cuda.device_count())
