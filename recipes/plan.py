"""``distill run RECIPE --plan``: what a run would do, before any model is loaded.

For each step: what the runner would do with it (run, resume, rerun because its config changed,
skip), where it runs (the local engine, or Ray replicas), how many GPUs it holds
(tensor x pipeline parallel x replicas for a vLLM engine, the launcher's processes for training) and
an estimate of the memory each of those GPUs needs. Nothing is imported from torch, vLLM or
transformers: a model's size comes from its ``config.json`` when it is on this machine (a local
directory, or the Hugging Face cache), else from :data:`PUBLISHED` (the figures the model cards
state), else the plan says it does not know.

The estimates are the arithmetic a user would do on paper, not a profile, and a step whose estimate
passes the GPU's memory is refused (exit 2, naming the term that does not fit: :func:`refusals`):

- a vLLM engine's weights are ``params x bytes per weight`` split over ``TP x PP`` GPUs; vLLM then
  fills ``gpu_memory_utilization`` of each GPU, and what the weights leave is KV cache: per token
  2 (K, V) x layers x KV heads x head dim x 2 bytes (MLA: the latent and RoPE widths), split over the
  stages and the tensor-parallel ranks; vLLM refuses to start when one ``max_model_len`` sequence
  does not fit;
- a training process holds what distill/lint/memory.py lists, term by term (weights, gradients and optimizer
  state by sharding, a reference copy, a reward model, activations, TRL's fused LM head, colocated vLLM, SDPA's
  attention mask, ZeRO-3's buckets, the CUDA context and NCCL).

The GPU is a train step's ``gpu_memory_gb``, else ``--gpu-gb``, else this machine's first GPU (nvidia-smi), else
an H100 80GB at the 79.6 GiB torch.cuda reports for it (:data:`DEFAULT_GPU`); the table's footer says which.

"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasonkit.recipes.recipe import Recipe, references, step_dir

#: Published sizes of the models the shipped recipes name, for a plan made before downloading:
#: (parameters, bytes per weight as released, vocabulary, hidden size, layers).
PUBLISHED: dict[str, tuple[float, float, int, int, int]] = {
    "deepseek-ai/DeepSeek-R1": (685e9, 1.0, 129_280, 7168, 61),  # FP8 safetensors incl. the MTP layer; 37B active
    "deepseek-ai/DeepSeek-R1-0528": (685e9, 1.0, 129_280, 7168, 61),
    "Qwen/Qwen2.5-Math-1.5B": (1.54e9, 2.0, 151_936, 1536, 28),
    "Qwen/Qwen2.5-Math-1.5B-Instruct": (1.54e9, 2.0, 151_936, 1536, 28),
    "Qwen/Qwen2.5-Math-7B": (7.62e9, 2.0, 152_064, 3584, 28),
    "Qwen/Qwen2.5-7B": (7.62e9, 2.0, 152_064, 3584, 28),
    "Qwen/Qwen2.5-1.5B-Instruct": (1.54e9, 2.0, 151_936, 1536, 28),
    "Qwen/Qwen2.5-7B-Instruct": (7.62e9, 2.0, 152_064, 3584, 28),
    "Qwen/Qwen2.5-32B-Instruct": (32.8e9, 2.0, 152_064, 5120, 64),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": (1.78e9, 2.0, 151_936, 1536, 28),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (7.62e9, 2.0, 152_064, 3584, 28),
    # Qwen3 (model cards: 8.2B and 1.7B parameters; the shapes below are their config.json files), one tokenizer
    # and one embedding size (151,936) across sizes: recipes/onpolicy-qwen3.yaml's teacher and student
    "Qwen/Qwen3-8B": (8.19e9, 2.0, 151_936, 4096, 36),
    "Qwen/Qwen3-1.7B": (1.72e9, 2.0, 151_936, 2048, 28),
}
_QWEN_1_5B = {
    "vocab_size": 151_936,
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "intermediate_size": 8960,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "tie_word_embeddings": True,
    "model_type": "qwen2",
    "max_position_embeddings": 32768,
}
_QWEN_7B = {
    "vocab_size": 152_064,
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "model_type": "qwen2",
    "max_position_embeddings": 32768,
}
#: huggingface.co/Qwen/Qwen3-8B and /Qwen3-1.7B, config.json: head_dim 128 in both (not hidden / heads in 1.7B)
_QWEN3 = {"vocab_size": 151_936, "head_dim": 128, "model_type": "qwen3", "max_position_embeddings": 40_960}
_QWEN3_8B = {**_QWEN3, "hidden_size": 4096, "num_hidden_layers": 36, "intermediate_size": 12_288}
_QWEN3_8B |= {"num_attention_heads": 32, "num_key_value_heads": 8, "tie_word_embeddings": False}
_QWEN3_1_7B = {**_QWEN3, "hidden_size": 2048, "num_hidden_layers": 28, "intermediate_size": 6144}
_QWEN3_1_7B |= {"num_attention_heads": 16, "num_key_value_heads": 8, "tie_word_embeddings": True}
_MATH = {"max_position_embeddings": 4096}  # Qwen2.5-Math's context
#: DeepSeek-R1's attention (MLA): the KV cache holds a 512-wide latent and a 64-wide RoPE key a token a layer.
_R1 = {
    "vocab_size": 129_280,
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "max_position_embeddings": 163_840,
    "model_type": "deepseek_v3",
}
#: The config.json shapes of the dense students the shipped recipes name (their model cards' files),
#: for the training estimate (distill/lint/memory.py) before anything is downloaded.
PUBLISHED_SHAPES: dict[str, dict] = {
    "Qwen/Qwen2.5-Math-1.5B": {**_QWEN_1_5B, **_MATH},
    "Qwen/Qwen2.5-Math-1.5B-Instruct": {**_QWEN_1_5B, **_MATH},
    "Qwen/Qwen2.5-1.5B-Instruct": _QWEN_1_5B,
    "Qwen/Qwen2.5-7B-Instruct": _QWEN_7B,
    "Qwen/Qwen2.5-Math-7B": {**_QWEN_7B, **_MATH},
    "Qwen/Qwen2.5-7B": {**_QWEN_7B, "max_position_embeddings": 131_072},
    "deepseek-ai/DeepSeek-R1": _R1,
    "deepseek-ai/DeepSeek-R1-0528": _R1,
    "Qwen/Qwen3-8B": _QWEN3_8B,
    "Qwen/Qwen3-1.7B": _QWEN3_1_7B,
}
#: The GPU a plan fits when neither ``--gpu-gb`` nor a train step's ``gpu_memory_gb`` says and none is visible here:
#: the 80 GB H100 the shipped GPU recipes are written for, at the memory torch.cuda reports for it (81,559 MiB =
#: 79.6 GiB: ``total_memory``, of which vLLM takes its gpu_memory_utilization), not the 80 of its name.
DEFAULT_GPU = ("H100 80GB", 81_559 * 2**20)
_DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "float8": 1}
GB = 1e9
#: A GRPO prompt's tokens when max_prompt_length is not given (the lint measures the real ones; a plan reads no data).
GRPO_PROMPT = 1024


def _gb(n: float) -> str:
    return f"{n / GB:.1f} GB" if n >= 0.1 * GB else f"{n / 1e6:.1f} MB"


@dataclass(frozen=True)
class ModelSize:
    params: float
    bytes_per_weight: float
    vocab: int
    hidden: int
    layers: int
    source: str  # where the figures come from: a config.json path, or "published"
    shape: dict | None = None  # the config.json fields distill/lint/memory.py estimates training from


@dataclass
class StepPlan:
    name: str
    stage: str
    action: str
    where: str = "local"
    gpus: int = 0
    layout: str = ""  # how the GPUs are used, in words
    memory: str = ""  # the estimate per GPU, in words
    notes: list[str] = field(default_factory=list)
    gpu: float = DEFAULT_GPU[1]  # the GPU this step must fit, in bytes
    gpu_name: str = DEFAULT_GPU[0]  # which GPU that is, in words (render() says it)
    refusal: str | None = None  # the term that does not fit the GPU, in words (refusals() raises with it)


def model_size(name: str | None) -> ModelSize | None:
    """A model's size from its config.json (local directory or HF cache), else the published table."""
    if not name:
        return None
    config = config_json(name)
    if config is not None:
        path, c = config
        c = c.get("text_config", c)
        hidden, layers = int(c.get("hidden_size", 0)), int(c.get("num_hidden_layers", 0))
        vocab, inter = int(c.get("vocab_size", 0)), int(c.get("intermediate_size", 4 * hidden))
        heads = int(c.get("num_attention_heads", 1)) or 1
        kv = int(c.get("num_key_value_heads", heads))
        head_dim = int(c.get("head_dim") or hidden // heads)
        attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2
        experts = int(c.get("n_routed_experts") or c.get("num_local_experts") or 1)
        mlp = 3 * hidden * int(c.get("moe_intermediate_size", inter)) * experts if experts > 1 else 3 * hidden * inter
        embeddings = vocab * hidden * (1 if c.get("tie_word_embeddings") else 2)
        dtype = str(c.get("torch_dtype") or c.get("dtype") or "float32")
        quant = (c.get("quantization_config") or {}).get("quant_method", "")
        bytes_per = 1.0 if "fp8" in str(quant).lower() else _DTYPE_BYTES.get(dtype, 4)
        return ModelSize(layers * (attention + mlp) + embeddings, bytes_per, vocab, hidden, layers, str(path), c)
    if name in PUBLISHED:
        return ModelSize(*PUBLISHED[name], source="published", shape=PUBLISHED_SHAPES.get(name))
    return None


def config_json(name: str) -> tuple[Path, dict] | None:
    candidates = [Path(os.path.expanduser(name)) / "config.json"]
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        from huggingface_hub.constants import HF_HUB_CACHE

        snapshots = Path(HF_HUB_CACHE) / f"models--{name.replace('/', '--')}" / "snapshots"
        if snapshots.is_dir():
            candidates += sorted(snapshots.glob("*/config.json"))
    for path in candidates:
        if path.is_file():
            try:
                return path, json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
    return None


def plan(recipe: Recipe, planned: list, state: dict, *, gpu_gb: float | None = None) -> list[StepPlan]:
    """One :class:`StepPlan` per step of a validated recipe (``planned``: runner.validate's list).

    A model an earlier step writes (``${sft}/merged``) is sized as the model that step trained or
    prepared: training changes weights, not shapes (prepare-student's ``max_positions`` changes the
    context). ``gpu_gb``: the GPU every step must fit (a train step's ``gpu_memory_gb`` wins for it)."""
    from reasonkit.recipes.schedule import schedule_note

    out, written = [], {}
    here = visible_gpu() if gpu_gb is None else None

    def size_of(field_name: str, p) -> tuple[ModelSize | None, str]:
        value, raw = getattr(p.config, field_name, None), str(p.step.config.get(field_name, ""))
        refs = references(raw)
        if refs:
            return written.get(refs[0]), f"the model step {refs[0]} writes"
        return model_size(value), str(value)

    for p in planned:
        step = StepPlan(p.step.name, p.step.stage, _action(state, p, recipe))
        step.gpu_name, step.gpu = assumed_gpu(getattr(p.config, "gpu_memory_gb", None), gpu_gb, here)
        _resources(step, p.config, lambda f, p=p: size_of(f, p))
        if p.step.stage == "student":  # a fresh student: its shape is its config
            written[p.step.name] = _fresh_student(p.config)
        elif p.step.stage == "train" or "student" in p.step.stage:
            source = next((f for f in ("student", "model") if hasattr(p.config, f)), None)
            written[p.step.name] = _with_positions(
                size_of(source, p)[0] if source else None, getattr(p.config, "max_positions", None)
            )
        if p.step.stage == "train":
            step.notes += schedule_note(train_layout(p.config)[3], recipe, p.step)
        out.append(step)
    return out


def assumed_gpu(own: float | None, given: float | None, here: tuple[str, float] | None) -> tuple[str, float]:
    """(the GPU in words, its bytes) a step must fit: its ``gpu_memory_gb``, else ``--gpu-gb``, else this machine's
    first GPU, else :data:`DEFAULT_GPU`.

    >>> assumed_gpu(None, None, None), assumed_gpu(None, 141, None)[0], assumed_gpu(40, 141, None)[0]
    (('H100 80GB', 85520809984), '141 GB (--gpu-gb)', '40 GB (gpu_memory_gb)')
    """
    if own:
        return f"{own:g} GB (gpu_memory_gb)", own * GB
    if given:
        return f"{given:g} GB (--gpu-gb)", given * GB
    return here or DEFAULT_GPU


def visible_gpu() -> tuple[str, float] | None:
    """This machine's first GPU as nvidia-smi names it, and its memory in bytes (the MiB torch.cuda's total_memory
    counts), without torch; None where none is visible."""
    from reasonkit.hardware import first_gpu

    found = first_gpu("name", "memory.total")
    try:
        return (f"{found[0]} (this machine's GPU 0)", float(found[1]) * 2**20) if found else None
    except ValueError:
        return None


def _with_positions(size: ModelSize | None, positions: int | None) -> ModelSize | None:
    if size is None or not positions or size.shape is None:
        return size
    from dataclasses import replace

    return replace(size, shape={**size.shape, "max_position_embeddings": positions})


def refusals(plans: list[StepPlan]) -> list[str]:
    """The steps whose estimate does not fit their GPU, one line each (``distill run --plan`` exits 2 on any)."""
    return [f"step {s.name} ({s.stage}): {s.refusal}" for s in plans if s.refusal]


def _fresh_student(config: Any) -> ModelSize | None:
    """The size of the random-init Llama the ``student`` stage builds (recipes/teachers/student.py)."""
    tokenizer = model_size(getattr(config, "tokenizer", None))
    if tokenizer is None:
        return None
    h, layers, inter = config.hidden_size, config.num_layers, config.intermediate_size
    params = layers * (4 * h * h + 3 * h * inter) + tokenizer.vocab * h  # tied embeddings
    shape = {
        "vocab_size": tokenizer.vocab,
        "hidden_size": h,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "num_attention_heads": config.num_heads,
        "tie_word_embeddings": True,
        "model_type": "llama",
    }
    return ModelSize(params, 4.0, tokenizer.vocab, h, layers, "the student stage's config", shape)


def _action(state: dict, p, recipe: Recipe) -> str:
    record = state.get(p.step.name) or {}
    if not record:
        return "run"
    if record.get("fingerprint") != p.fingerprint:
        return "rerun (config changed)"
    if record.get("done") and Path(step_dir(recipe, p.step.name)).exists():
        return "skip (finished)"
    return "resume"


def _resources(step: StepPlan, config: Any, size_of) -> None:
    get = lambda key, default=None: getattr(config, key, default)  # noqa: E731
    ray = get("engine") == "ray"
    replicas = get("replicas", 1) if ray else get("data_parallel", 1)
    step.where = f"ray x{replicas}" if ray else "local"
    if step.stage in ("generate", "eval", "judge", "critique"):
        backend = get("backend", "vllm")
        model_field = next((f for f in ("teacher", "model", "judge") if get(f)), None)
        if backend == "openai":
            step.layout, step.memory = "a served model (OpenAI-compatible)", "on the server"
            return
        args = get("engine_args") or {}
        tp, pp = int(get("tensor_parallel", 1) or 1), int(args.get("pipeline_parallel_size", 1) or 1)
        per_engine = tp * pp if backend == "vllm" else 1
        if isinstance(replicas, str):  # "auto": every visible GPU
            step.gpus, step.layout = 0, f"every visible GPU, {per_engine} per engine"
        else:
            step.gpus = per_engine * int(replicas or 1)
            step.layout = (
                f"TP {tp} x PP {pp} x {replicas} engine(s)"
                if backend == "vllm"
                else f"transformers, {replicas} replica(s)"
            )
        size, name = size_of(model_field) if model_field else (None, "no model")
        length = get("max_model_len") or args.get("max_model_len")
        step.memory, step.refusal = _engine_memory(
            size,
            name,
            get("dtype"),
            (tp, pp) if backend == "vllm" else (1, 1),
            get("gpu_memory_utilization", 0.9),
            step.gpu,
            length,
            args.get("kv_cache_dtype"),
        )
    elif step.stage == "train":
        step.gpus, step.layout, step.refusal, config = train_layout(config)
        if step.refusal:
            return
        reward = size_of("reward_model")[0] if get("reward_model") else None
        teacher = size_of("teacher")[0] if get("method") == "distill" and get("teacher") else None
        step.memory, step.refusal = _train_memory(
            config, step.gpu, *size_of("student"), reward=reward, teacher=teacher
        )


def train_layout(config: Any) -> tuple[int, str, str | None, Any]:
    """(GPUs, where it trains in words, why it cannot, the config as each process trains it) for a train step:
    distill/launch.py's own decision on the GPUs this machine shows, or on a node of launch.NODE_GPUS when it shows
    none (a plan made off the node). The config carries the per-device batch and process count of that decision,
    so the memory a GPU needs and the schedule are those of the processes that will run."""
    from reasonkit.distill.launch import NODE_GPUS, for_layout, layout, visible_here
    from reasonkit.errors import UserError

    cpu = getattr(config, "device", "auto") == "cpu"
    visible = 0 if cpu else visible_here()
    try:
        node = layout(config, visible if visible or cpu else NODE_GPUS)
        # off the node, what this machine would do too, unless the step names GPUs only the node has
        placed = node if visible or cpu else None if getattr(config, "gpus", None) is not None else layout(config, 0)
    except UserError as e:
        return 0, "unknown", str(e), config
    laid = for_layout(config, node) if node.launch else config
    if node is placed:
        return (placed.processes if visible else 0), placed.describe(config), None, laid
    here = f"here {placed.describe(config)}; " if placed is not None and not placed.launch else ""
    nodes = "nodes" if getattr(config, "num_machines", 1) > 1 else "a node"
    return node.processes, f"{here}on {nodes} of {NODE_GPUS} GPUs: {node.describe(config)}", None, laid


def _unknown(name: str) -> str:
    if name.startswith("the model step"):
        return f"unknown ({name}: its source has no config.json here)"
    return f"unknown ({name}: no config.json here; `huggingface-cli download {name} config.json`)"


def _params(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def kv_per_token(shape: dict | None, tp: int = 1, pp: int = 1, kv_bytes: int = 2) -> float | None:
    """KV cache bytes one token takes on one GPU of a TP x PP engine, from config.json's fields; None unknown.

    GQA: 2 (K, V) x layers x KV heads x head dim x bytes, the layers split over the PP stages and the KV
    heads over the TP ranks (a rank keeps at least one head). MLA (DeepSeek-V3/R1): the latent and the RoPE
    key, (kv_lora_rank + qk_rope_head_dim) x layers x bytes, on every TP rank.

    >>> kv_per_token(PUBLISHED_SHAPES["Qwen/Qwen2.5-7B-Instruct"])  # 2 x 28 x 4 x 128 x 2
    57344.0
    """
    if not shape or not shape.get("num_hidden_layers"):
        return None
    layers = -(-int(shape["num_hidden_layers"]) // pp)  # the largest stage
    if shape.get("kv_lora_rank"):
        return float((shape["kv_lora_rank"] + shape.get("qk_rope_head_dim", 0)) * layers * kv_bytes)
    heads = shape.get("num_attention_heads")
    if not heads or not shape.get("hidden_size"):
        return None
    head_dim = shape.get("head_dim") or shape["hidden_size"] // heads
    kv_heads = max(1, -(-int(shape.get("num_key_value_heads") or heads) // tp))
    return float(2 * layers * kv_heads * head_dim * kv_bytes)


def _engine_memory(
    size: ModelSize | None,
    name: str,
    dtype: str | None,
    layout: tuple[int, int],
    utilization: float,
    gpu: float,
    max_model_len: int | None,
    kv_dtype: str | None,
) -> tuple[str, str | None]:
    """The engine's weights and KV cache per GPU in words, and why it does not fit (None when it does)."""
    if size is None:
        return _unknown(name), None
    tp, pp = layout
    gpus = tp * pp
    per_weight = size.bytes_per_weight
    if dtype not in (None, "auto") and per_weight > 1:  # quantized (FP8) weights stay quantized
        per_weight = _DTYPE_BYTES.get(str(dtype), per_weight)
    weights = size.params * per_weight / gpus
    budget = utilization * gpu
    text = (
        f"weights {_gb(weights)}/GPU ({_params(size.params)} params x {per_weight:g} B / {gpus}); "
        f"vLLM takes {utilization:.0%} of each {_gb(gpu)} GPU ({_gb(budget)}), the rest of it KV cache"
    )
    if weights >= budget:
        return text, (
            f"weights {_gb(weights)}/GPU do not fit the {_gb(budget)} vLLM may take of a {_gb(gpu)} GPU "
            f"(gpu_memory_utilization {utilization:g}); expected at most {_gb(budget)}: more GPUs per engine "
            f"(tensor_parallel, engine_args.pipeline_parallel_size) or a larger GPU (--gpu-gb)"
        )
    kv = kv_per_token(size.shape, tp, pp, 1 if str(kv_dtype or "").startswith("fp8") else 2)
    if kv is None:
        return text, None
    tokens = (budget - weights) / kv
    text += f": {kv / 1e3:.1f} KB a token, ~{tokens / 1e3:,.0f}K tokens"
    length = max_model_len or (size.shape or {}).get("max_position_embeddings")
    if length and tokens < length:
        return text, (
            f"KV cache: {_gb(budget - weights)}/GPU holds {tokens:,.0f} tokens at {kv / 1e3:.1f} KB a token, fewer "
            "than "
            f"one {length:,}-token sequence (max_model_len); expected at least {_gb(length * kv)}: more GPUs per "
            f"engine, a higher gpu_memory_utilization or a lower max_model_len"
        )
    return text, None


def _train_memory(
    config: Any,
    gpu: float,
    size: ModelSize | None,
    name: str,
    *,
    reward: ModelSize | None = None,
    teacher: ModelSize | None = None,
) -> tuple[str, str | None]:
    """The train lint's own estimate (distill/lint/memory.py) for a GPU run of this step, per process, and why it
    does not fit the GPU (None when it does)."""
    from reasonkit.distill.lint.memory import levers, train_estimate

    if size is None:
        return _unknown(name), None
    needed = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads")
    if not size.shape or not all(isinstance(size.shape.get(k), int) for k in needed):
        return f"unknown ({name}: its config.json lacks a dense decoder's shape)", None
    if config.method in ("grpo", "distill"):  # a micro-step: batch_size completions and their prompts (no max_length)
        sequence = int(config.max_prompt_length or GRPO_PROMPT) + int(config.max_completion_length)
    else:
        sequence = int(config.max_length or 4096)
    # as on a GPU: bf16 and checkpointing unless the config turns them off
    on_gpu = replace_device(config)
    # a GRPO rm reward: the reward model whole in every process, in the policy's dtype (reward/model.py)
    frozen = reward.params * (2 if on_gpu.bf16 else 4) if reward is not None and config.method == "grpo" else 0.0
    # on-policy distillation: a teacher copy in every process, none with teacher_url (lint/memory.py teacher_bytes)
    from reasonkit.distill.lint.memory import teacher_bytes

    held = teacher_bytes(on_gpu, params=teacher.params) if teacher is not None else 0.0
    e, tokens = train_estimate(on_gpu, size.shape, sequence=sequence, gpu=gpu, frozen=frozen, teacher=held)
    from reasonkit.distill.levers import resolve_attention

    attention = resolve_attention(on_gpu.attn_implementation, cuda=True)
    text = (
        f"{e.describe()} at {tokens:,} tokens a micro-step, as on a GPU ({'bf16' if on_gpu.bf16 else 'fp32'}, "
        f"checkpointing {'on' if on_gpu.gradient_checkpointing else 'off'}, {attention} attention)"
    )
    if e.vllm:
        text += f"; vLLM colocated: {config.vllm_gpu_memory_utilization:.0%} of the GPU"
    if config.method == "distill" and config.teacher_url:
        text += f"; the teacher on its server ({config.teacher_url}), none here"
    if e.total <= gpu:
        return text, None
    return text, (
        f"the estimate {_gb(e.total)} per GPU passes the {_gb(gpu)} GPU; the largest term: {e.largest()} "
        f"({e.describe()}); {'; '.join(levers(on_gpu))}"
    )


def replace_device(config: Any) -> Any:
    """The config as it runs on a GPU: bf16 and gradient checkpointing where it leaves them to the device."""
    import dataclasses

    changes = {k: True for k in ("bf16", "gradient_checkpointing") if getattr(config, k, None) is None}
    return dataclasses.replace(config, **changes) if changes else config


def render(plans: list[StepPlan], missing: list[str] = ()) -> str:
    """The plan as a table, then the total GPUs the largest step holds at once, each step's schedule notes and
    what the steps import that is not installed here (``distill run`` stops on that before its first step)."""
    rows = [("step", "stage", "action", "where", "GPUs", "layout", "memory per GPU (estimate)")]
    rows += [(s.name, s.stage, s.action, s.where, str(s.gpus), s.layout, s.memory) for s in plans]
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:6], widths)) + "  " + r[6] for r in rows]
    peak = max((s.gpus for s in plans), default=0)
    lines.append(f"steps run one at a time: the largest holds {peak} GPU(s)")
    for name, size in dict.fromkeys((s.gpu_name, s.gpu) for s in plans if s.gpus or s.memory):
        lines.append(
            f"memory per GPU fitted to: {name}, {size / 2**30:.1f} GiB = {_gb(size)}"
            + (" (no GPU visible here; --gpu-gb for another)" if name == DEFAULT_GPU[0] else "")
        )
    lines += [f"{s.name}: {note}" for s in plans for note in s.notes]
    if missing:
        lines.append("not installed here (distill run stops before its first step): " + "; ".join(missing))
    return "\n".join(lines)
