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
reasonkit.errors.FieldErrors: mode: expected pointwise or pairwise, found 'both'
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from reasonkit.config import Checks, setting, with_default
from reasonkit.gen.engine_args import output_engine_args
from reasonkit.gen.settings import BACKENDS, BackendSettings, SamplingSettings

STRATEGIES = ("correct-vs-incorrect", "short-vs-long")
PICKS_CHOSEN = ("shortest", "random")
PICKS_REJECTED = ("longest", "random")
MODES = ("pointwise", "pairwise")
#: the model's settings ``distill judge`` and ``critique`` do not offer as flags (YAML and ``--set`` still reach them)
NOT_FLAGS = ("tensor_parallel", "data_parallel", "gpu_memory_utilization", "batch_size")


def _one_of(check: Checks, name: str, value: object, allowed: tuple) -> None:
    check(value in allowed, name, f"expected {' or '.join(allowed)}, found {value!r}")


def _positive(check: Checks, name: str, value: int) -> None:
    check(value >= 1, name, f"expected a positive integer, found {value}")


@dataclass(frozen=True, kw_only=True)
class StageRun:
    """Where a judges stage writes, and what it may read or replace (pairs, judge, critique)."""

    out: str = setting(help="Output stage directory; rerunning resumes it.", path="dir")
    overwrite: bool = setting(False, "Replace an --out written with other settings.")
    allow_incomplete: bool = setting(False, "Read an input stage that has not finished.")


@dataclass(frozen=True, kw_only=True)
class PairsConfig(StageRun):
    """``distill pairs``: DPO pairs from verifier outcomes (no model involved)."""

    verdicts: str = setting(cli=False)  # the command's argument
    strategy: str = setting("correct-vs-incorrect", "", choices=STRATEGIES)
    chosen: str = setting("shortest", "correct-vs-incorrect: which correct sample.", choices=PICKS_CHOSEN)
    rejected: str = setting("longest", "correct-vs-incorrect: which incorrect sample.", choices=PICKS_REJECTED)
    max_pairs_per_prompt: int = setting(1, "")
    seed: int = setting(0, "Seed; every random choice derives from (seed, id).")
    # A correct row that the filter dropped only for one of these reasons may still be chosen
    # (rejection sampling kept M others); a row dropped for anything else (language, format,
    # repetition) may only be rejected. Matched on the reason's first word, before any ':'.
    # (The reasons are distill filter's: filters/select.py, dedup.py, decontam.py.)
    chosen_drop_reasons: tuple[str, ...] = ("not_selected", "duplicate", "near_duplicate")
    # A prompt with any row dropped for one of these is left out entirely (a benchmark leak).
    exclude_drop_reasons: tuple[str, ...] = ("contaminated", "decontam")

    def __post_init__(self) -> None:
        check = Checks()
        _one_of(check, "strategy", self.strategy, STRATEGIES)
        _one_of(check, "chosen", self.chosen, PICKS_CHOSEN)
        _one_of(check, "rejected", self.rejected, PICKS_REJECTED)
        _positive(check, "max_pairs_per_prompt", self.max_pairs_per_prompt)
        check.done()


@dataclass(frozen=True, kw_only=True)
class JudgeModel(SamplingSettings, BackendSettings):
    """Which model judges, through which gen backend (shared by judge and critique): the generate stage's
    sampling and backend groups (gen/settings.py), handed to it whole (judges/backends.py)."""

    judge: str = setting(help="Judge model: a directory, a Hub id, or the served name (openai).")
    # a judge answers greedily, with a short reply
    temperature: float = with_default(SamplingSettings, "temperature", 0.0)
    top_p: float = with_default(SamplingSettings, "top_p", 1.0)
    max_tokens: int = with_default(SamplingSettings, "max_tokens", 1024)

    def __post_init__(self) -> None:
        check = Checks()
        self._check(check)
        check.done()

    def _check(self, check: Checks) -> None:
        """The model's settings; a judge or critique config adds its own (every problem is said at once)."""
        _one_of(check, "backend", self.backend, BACKENDS)
        _positive(check, "concurrency", self.concurrency)
        _positive(check, "max_tokens", self.max_tokens)
        _positive(check, "tensor_parallel", self.tensor_parallel)


@dataclass(frozen=True, kw_only=True)
class JudgeConfig(JudgeModel, StageRun):
    """``distill judge``: LLM-as-judge preferences from a traces, verdicts or prefs directory."""

    input: str = setting(cli=False)  # the command's argument
    mode: str = setting("pointwise", "", choices=MODES)
    rubric: str | None = setting(
        None, "Text file of grading criteria. [default: judges/templates/rubric.txt]", path=True
    )
    # pointwise: chosen_score - rejected_score must reach this (and exceed 0)
    min_margin: float = setting(1.0, "pointwise: least score gap of a pair.")
    max_pairs_per_prompt: int = setting(1, "")
    # show the judge the <think> block too, not only the response
    include_reasoning: bool = setting(
        True,
        "Show the model the response after </think> only, not the reasoning.",
        flag="--response-only",
        flag_value=False,
    )
    # show the judge the prompt's gold ``answer`` when it has one
    reference: bool = setting(True, "Do not show the judge the gold answer.", flag="--no-reference", flag_value=False)
    shard_size: int = setting(256, "Prompts (judge) or rows (critique) per committed shard.")

    def _check(self, check: Checks) -> None:
        super()._check(check)
        _one_of(check, "mode", self.mode, MODES)
        _positive(check, "max_pairs_per_prompt", self.max_pairs_per_prompt)
        _positive(check, "shard_size", self.shard_size)
        check(self.min_margin >= 0, "min_margin", f"expected a number >= 0, found {self.min_margin}")


@dataclass(frozen=True, kw_only=True)
class CritiqueConfig(JudgeModel, StageRun):
    """``distill critique``: Constitutional AI's critique -> revision, per row of a traces/verdicts dir."""

    input: str = setting(cli=False)  # the command's argument
    constitution: str | None = setting(None, "Constitution YAML. [default: judges/constitution.yaml]", path=True)
    rounds: int = setting(1, "Critique-revision rounds per row.")
    include_reasoning: bool = with_default(JudgeConfig, "include_reasoning", True)
    shard_size: int = with_default(JudgeConfig, "shard_size", 256)
    # a critic and a reviser write, as a policy samples
    temperature: float = with_default(SamplingSettings, "temperature", 0.6)
    top_p: float = with_default(SamplingSettings, "top_p", 0.95)
    max_tokens: int = with_default(SamplingSettings, "max_tokens", 2048)

    def _check(self, check: Checks) -> None:
        super()._check(check)
        _positive(check, "rounds", self.rounds)
        _positive(check, "shard_size", self.shard_size)


def fingerprinted(config: object) -> dict:
    """The settings that decide a stage's rows (what the manifest fingerprints): not where the
    output goes, not whether to overwrite, not how many requests are in flight. A judge is also
    named by its content (identity.py: weights hashed, a Hub id at its revision), so a judge
    retrained at the same path cannot extend a record the old one started."""
    skip = {
        "input",
        "verdicts",
        "out",
        "overwrite",
        "allow_incomplete",
        "concurrency",
        "base_url",
        "api_key_env",
        "shard_size",
        "tensor_parallel",
        "engine_args",
        "data_parallel",
        "gpu_memory_utilization",
        "batch_size",
        "request_timeout",
        "max_retries",
    }  # the input is fingerprinted by its manifest, not its path
    settings = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in skip}
    if output_engine_args(getattr(config, "engine_args", {})):  # only when set: older runs keep their hash
        settings["engine_args"] = output_engine_args(config.engine_args)
    if isinstance(config, JudgeModel):
        from reasonkit.identity import model_identity

        settings["judge_identity"] = model_identity(config.judge, api=config.backend == "openai")
    return settings
