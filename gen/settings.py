"""The settings every stage that holds a model shares, each declared once (issue 39).

``GenerateConfig``, ``EvalConfig`` and the judges' ``JudgeModel`` inherit these groups, so their YAML
keys stay flat (``temperature:``, not ``sampling.temperature:``) and a new sampling option is one field
here: each stage's flag (options.py), YAML key and ``--set`` come from it, and eval and the judges hand
the whole group to the generate stage (:func:`values_of`), so eval samples exactly as generate does.

A stage whose default differs (a judge samples greedily) says so with ``config.with_default``,
keeping the help written here.

>>> values_of(SamplingSettings(temperature=0.0), SamplingSettings)
{'temperature': 0.0, 'top_p': 0.95, 'max_tokens': 32768, 'seed': 0}
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from reasonkit.config import setting
from reasonkit.gen.engine_args import EngineArgs
from reasonkit.gen.render import R1_INSTRUCTION

BACKENDS = ("vllm", "openai", "hf")
DTYPES = ("auto", "float32", "bfloat16", "float16")


@dataclass(frozen=True, kw_only=True)
class SamplingSettings:
    """How each sample is drawn: R1's recommended settings are the defaults."""

    temperature: float = setting(0.6, "Sampling temperature (0: greedy).")
    top_p: float = setting(0.95, "Nucleus sampling: the probability mass sampled from.")
    max_tokens: int = setting(32768, "Completion token budget per sample.")
    seed: int = setting(0, "Run seed; each prompt's seed derives from (seed, id).")

    def request_sampling(self, seed: int) -> Sampling:
        """One request's sampling (gen/backend.py's Request), with that request's own (derived) seed."""
        return Sampling(**values_of(self, SamplingSettings, seed=seed))


@dataclass(frozen=True, kw_only=True)
class Sampling(SamplingSettings):
    """Sampling parameters of one request: the stage's sampling group, with the request's own ``seed``
    (gen/backend.py's :func:`derive_seed`). A field added to the group is here too, so every backend
    can read it from every request."""

    seed: int | None = None


@dataclass(frozen=True, kw_only=True)
class PromptSettings:
    """How a problem becomes the chat the model reads (gen/render.py)."""

    system: str | None = setting(None, "System prompt (replaces the prompt's own).")
    instruction: str | None = setting(
        R1_INSTRUCTION, "Appended to problem-text prompts after a blank line ('' for none)."
    )
    prefill_think: bool = setting(
        False, "Start the assistant turn with '<think>\\n' (R1's advice).", flag="--prefill-think/--no-prefill-think"
    )


@dataclass(frozen=True, kw_only=True)
class BackendSettings:
    """Which engine runs the model, and how (the backends of gen/)."""

    backend: Literal["vllm", "openai", "hf"] = setting("vllm", "")
    chat_template: str | None = setting(None, "Jinja file overriding the tokenizer's chat template.", path=True)
    # openai
    base_url: str | None = setting(None, "openai: server URL, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = setting("OPENAI_API_KEY", "openai: environment variable holding the API key.")
    concurrency: int = setting(64, "openai: prompts in flight.")
    request_timeout: float = setting(3600.0, "openai: seconds per request.", cli=False)
    max_retries: int = setting(10, "openai: retries of a failed request.", cli=False)
    # vllm
    tensor_parallel: int = setting(1, "vllm: GPUs per engine.")
    data_parallel: int = setting(1, "vllm or hf, local engine: engine replicas on this node, each on its own GPUs.")
    gpu_memory_utilization: float = setting(0.9, "vllm: share of GPU memory the engine may take.")
    max_model_len: int | None = setting(None, "Context length (prompt and completion) the engine holds.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = setting("auto", "")
    # any other vllm.EngineArgs field (pipeline_parallel_size, kv_cache_dtype, ...): gen/engine_args.py
    engine_args: EngineArgs = setting(factory=dict, hash=False, cli=False)
    # hf
    batch_size: int = setting(8, "hf: prompts per generate call.")


@dataclass(frozen=True, kw_only=True)
class ToolSettings:
    """Tools between turns (gen/tools/): each row becomes a multi-turn trajectory."""

    tools: str | None = setting(
        None, "Comma-separated tools (search,python): rows become multi-turn trajectories (`trajectories` table)."
    )
    corpus: str | None = setting(None, "search tool: passages, JSONL or Parquet with id and contents.", path=True)
    max_turns: int = setting(8, "tools: assistant turns per trajectory.")
    search_k: int = setting(3, "search tool: passages per observation.")
    tool_timeout: float = setting(10.0, "tools: seconds per python call.")
    tool_workers: int = setting(8, "tools: calls running at once.")


def values_of(config: Any, group: type, **replace: Any) -> dict[str, Any]:
    """``config``'s values of ``group``'s fields, to build another stage's config from (eval -> generate)."""
    values = {f.name: getattr(config, f.name) for f in fields(group)}
    values.update(replace)
    return values
