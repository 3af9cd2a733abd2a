"""The configs of the three judges stages: light frozen dataclasses (no pyarrow, torch or vLLM at
import), so a recipe can be validated without loading anything.

Each field is one CLI flag (``--max-pairs-per-prompt`` is ``max_pairs_per_prompt``); ``--set``
reaches the same fields. Paths are kept as strings so the config fingerprint (store.py) is
stable across machines: the output directory is not part of it, the input is fingerprinted by
its manifest.

>>> PairsConfig(verdicts="v", out="o").strategy
'correct-vs-incorrect'
>>> JudgeConfig(input="d", out="o", judge="m", mode="both")
Traceback (most recent call last):
...
ValueError: mode: expected pointwise or pairwise, found 'both'
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from reasonkit.gen.engine_args import EngineArgs, output_engine_args

STRATEGIES = ("correct-vs-incorrect", "short-vs-long")
PICKS_CHOSEN = ("shortest", "random")
PICKS_REJECTED = ("longest", "random")
MODES = ("pointwise", "pairwise")
BACKENDS = ("vllm", "openai", "hf")


def _one_of(name: str, value: object, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: expected {' or '.join(allowed)}, found {value!r}")


def _positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name}: expected a positive integer, found {value}")


@dataclass(frozen=True)
class PairsConfig:
    """``distill pairs``: DPO pairs from verifier outcomes (no model involved)."""

    verdicts: str
    out: str
    strategy: str = "correct-vs-incorrect"
    chosen: str = "shortest"  # correct-vs-incorrect: which correct sample is chosen
    rejected: str = "longest"  # correct-vs-incorrect: which incorrect sample is rejected
    max_pairs_per_prompt: int = 1
    seed: int = 0
    # A correct row that the filter dropped only for one of these reasons may still be chosen
    # (rejection sampling kept M others); a row dropped for anything else (language, format,
    # repetition) may only be rejected. Matched on the reason's first word, before any ':'.
    # (The reasons are distill filter's: filters/select.py, dedup.py, decontam.py.)
    chosen_drop_reasons: tuple[str, ...] = ("not_selected", "duplicate", "near_duplicate")
    # A prompt with any row dropped for one of these is left out entirely (a benchmark leak).
    exclude_drop_reasons: tuple[str, ...] = ("contaminated", "decontam")
    allow_incomplete: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        _one_of("strategy", self.strategy, STRATEGIES)
        _one_of("chosen", self.chosen, PICKS_CHOSEN)
        _one_of("rejected", self.rejected, PICKS_REJECTED)
        _positive("max_pairs_per_prompt", self.max_pairs_per_prompt)


@dataclass(frozen=True, kw_only=True)
class JudgeModel:
    """Which model judges, through which gen backend (shared by judge and critique)."""

    judge: str
    backend: str = "vllm"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 64
    dtype: str = "auto"
    max_model_len: int | None = None
    tensor_parallel: int = 1  # vllm: GPUs per engine (a 72B judge: 4)
    engine_args: EngineArgs = field(default_factory=dict, hash=False)  # vllm: gen/engine_args.py
    chat_template: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        _one_of("backend", self.backend, BACKENDS)
        _positive("concurrency", self.concurrency)
        _positive("max_tokens", self.max_tokens)
        _positive("tensor_parallel", self.tensor_parallel)


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(JudgeModel):
    """``distill judge``: LLM-as-judge preferences from a traces, verdicts or prefs directory."""

    input: str
    out: str
    mode: str = "pointwise"
    rubric: str | None = None  # a text file of criteria; None: judges/templates/rubric.txt
    min_margin: float = 1.0  # pointwise: chosen_score - rejected_score must reach this (and exceed 0)
    max_pairs_per_prompt: int = 1
    include_reasoning: bool = True  # show the judge the <think> block too, not only the response
    reference: bool = True  # show the judge the prompt's gold ``answer`` when it has one
    seed: int = 0
    shard_size: int = 256  # prompts per committed shard
    allow_incomplete: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _one_of("mode", self.mode, MODES)
        _positive("max_pairs_per_prompt", self.max_pairs_per_prompt)
        _positive("shard_size", self.shard_size)
        if self.min_margin < 0:
            raise ValueError(f"min_margin: expected a number >= 0, found {self.min_margin}")


@dataclass(frozen=True, kw_only=True)
class CritiqueConfig(JudgeModel):
    """``distill critique``: Constitutional AI's critique -> revision, per row of a traces/verdicts dir."""

    input: str
    out: str
    constitution: str | None = None  # None: judges/constitution.yaml
    rounds: int = 1
    include_reasoning: bool = True
    seed: int = 0
    shard_size: int = 256  # rows per committed shard
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 2048
    allow_incomplete: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive("rounds", self.rounds)
        _positive("shard_size", self.shard_size)


def fingerprinted(config: object) -> dict:
    """The settings that decide a stage's rows (what the manifest fingerprints): not where the
    output goes, not whether to overwrite, not how many requests are in flight. A judge is also
    named by its content (identity.py: weights hashed, a Hub id at its revision), so a judge
    retrained at the same path cannot extend a record the old one started."""
    skip = {"input", "verdicts", "out", "overwrite", "allow_incomplete", "concurrency", "base_url", "api_key_env",
            "shard_size", "tensor_parallel", "engine_args"}  # the input is fingerprinted by its manifest, not its path
    settings = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in skip}
    if output_engine_args(getattr(config, "engine_args", {})):  # only when set: older runs keep their hash
        settings["engine_args"] = output_engine_args(config.engine_args)
    if isinstance(config, JudgeModel):
        from reasonkit.identity import model_identity

        settings["judge_identity"] = model_identity(config.judge, api=config.backend == "openai")
    return settings
