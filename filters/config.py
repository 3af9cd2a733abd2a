"""The filter stage's configuration: one frozen dataclass, checked before any work starts.

Every ``distill filter`` flag is a field here (``--min-lang-ratio`` is ``min_lang_ratio``), and any
field can be set with ``--set key=value`` or from a recipe's ``filter:`` section.

>>> from reasonkit.config import from_dict
>>> c = from_dict(FilterConfig, {"traces": "t", "out": "o", "lang": "none", "decontam": "aime.jsonl"}, "filter")
>>> c.lang, c.decontam
(None, ('aime.jsonl',))
>>> from_dict(FilterConfig, {"traces": "t", "out": "o", "select": "all", "keep_per_prompt": 2}, "filter")
Traceback (most recent call last):
...
reasonkit.errors.UserError: filter.keep_per_prompt: 2 needs select shortest, random or reward (select all keeps every sample)
"""  # noqa: E501

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from reasonkit.config import Checks, setting
from reasonkit.engine import ENGINE_FIELDS, EngineSettings, check_engine

#: The language filter's lookahead helper starts with this call (filters/lookahead.py); named here,
#: where ``distill filter`` can reach it before importing the filters, to start the helper early.
LANGUAGE_WARM_UP = "reasonkit.filters.language:_warm_up"
#: Inputs of fewer batches judge language in the filter's own process: the helper's start (~1 s of
#: the second core: a process, lingua's models) pays off only when there is work to overlap it with.
LOOKAHEAD_MIN_BATCHES = 4

#: Fields that change how a run goes, not what it writes: left out of the config fingerprint, so a
#: run resumed with more workers (or a different batch size) continues the same output.
RUN_ONLY = ("traces", "out", "workers", "batch_rows", "allow_incomplete", "overwrite") + ENGINE_FIELDS


@dataclass(frozen=True, kw_only=True)
class FilterConfig(EngineSettings):
    traces: str = setting(cli=False)  # the command's argument
    out: str = setting(help="Output stage directory.", path=True)
    # verification
    verifier: Literal["math", "int", "exact", "code", "none"] = setting(
        "math",
        "math: integer fast path, then math-verify; int: integers only; exact: the answer's text "
        "(names, titles; case, spacing, outer $ and a final period aside); code: the response's last "
        "Python block run in the sandbox against the prompt's tests (column `tests`, JSON: APPS/TACO, "
        "CodeContests, LiveCodeBench shapes; --set tests_column=NAME); none: extract only.",
    )
    unverifiable: Literal["drop", "keep"] = setting(
        "drop",
        "Answers the verifier cannot judge (correct=None, e.g. a set or an interval against a "
        "number). Rows with no extractable answer or no gold are always dropped (no_answer, no_gold).",
    )
    verify_timeout: float = setting(5.0, "Seconds per answer (--verifier code: per test).")
    # the code verifier: the prompts column holding each problem's tests (JSON; filters/code/tests.py)
    tests_column: str = setting("tests", cli=False)
    # language consistency (lang None: off)
    lang: str | None = setting("en", "Target language of the chain of thought ('none': skip).")
    min_lang_ratio: float = setting(0.95, "Minimum share of target-language words.")
    lang_candidates: tuple[str, ...] = setting(("en", "zh", "ja", "ko", "ru", "fr", "de", "es"), cli=False)
    # tool-use trajectories: drop an answer given without any tool call (the turn limit and unrecovered
    # tool errors are always dropped: filters/trajectory.py)
    require_tool: bool = setting(
        False, "Tool-use trajectories: drop an answer given without any tool call (no_tool_call)."
    )
    # format
    drop_truncated: bool = setting(True, "Drop finish_reason=length.", flag="--drop-truncated/--keep-truncated")
    require_boxed: bool = setting(False, "Drop responses without a \\boxed{} answer.")
    # a think block: "optional" (a generic teacher writes none) or "required" (R1-style data only);
    # one that was opened and never closed is dropped either way (unclosed_think)
    think: Literal["optional", "required"] = setting(
        "optional",
        "required: drop traces that wrote no <think> block (R1-style data only); an opened, "
        "never-closed block is dropped either way.",
    )
    min_tokens: int | None = setting(None, "Minimum completion tokens.")
    max_tokens: int | None = setting(None, "Maximum completion tokens.")
    max_repetition: float | None = setting(0.5, "Maximum share of repeated word 8-grams.")
    repetition_ngram: int = setting(8, cli=False)
    # dedup
    dedup: Literal["exact", "minhash", "none"] = setting("exact", "")
    minhash_threshold: float = setting(0.8, "Jaccard threshold of near-duplicates.")
    minhash_perms: int = setting(128, cli=False)
    minhash_bands: int | None = setting(None, cli=False)
    shingle: int = setting(5, cli=False)
    # decontamination: files (Parquet/JSONL/CSV), each PATH or NAME=PATH
    decontam: tuple[str, ...] = setting(
        (), "Eval set (Parquet/JSONL/CSV with a problem column), as PATH or NAME=PATH; repeatable.", metavar="FILE"
    )
    decontam_column: str = setting("problem", cli=False)
    ngram: int = setting(8, "Word n-gram size of decontamination.")
    # selection (reward: best-of-N by a `distill score` output's reward; keep_per_prompt then defaults to 1)
    keep_per_prompt: int | None = setting(None, "Keep at most M samples per prompt.")
    select: Literal["shortest", "random", "reward", "all"] = setting(
        "shortest",
        "Which samples --keep-per-prompt keeps; reward: the highest `reward` of a `distill score` output "
        "(verified-correct samples first), one per prompt unless --keep-per-prompt says more.",
    )
    # select reward on a PRM's step_rewards: the weakest step or the product
    step_aggregate: Literal["min", "prod"] = setting(
        "min",
        "--select reward on a PRM's step_rewards: the weakest step (Math-Shepherd) or the product (Lightman et al.).",
    )
    seed: int = setting(0, cli=False)
    # difficulty (filters/difficulty.py): a `distill eval` directory's per-problem pass rates, and the band kept
    difficulty: str | None = setting(
        None,
        "An eval directory (distill eval, problems.parquet): each prompt's pass rate becomes the pass_rate "
        "column, and prompts outside --pass-rate are dropped (too_easy, too_hard; not in the eval: unrated).",
        path="dir",
    )
    pass_rate: str = setting("0..1", "With --difficulty: the pass rates kept, LO..HI inclusive (e.g. 0.1..0.9).")
    # running
    workers: int | None = setting(
        None, "Verification processes [default: all cores; with --engine ray, per replica: 1]."
    )
    batch_rows: int = setting(1024, cli=False)
    allow_incomplete: bool = setting(False, "Read a traces directory whose generation has not finished.")
    overwrite: bool = setting(False, "Replace an OUT written with another config.")

    def __post_init__(self) -> None:
        if isinstance(self.lang, str) and self.lang.strip().lower() in ("", "none", "off"):
            object.__setattr__(self, "lang", None)
        object.__setattr__(self, "decontam", tuple(self.decontam))
        object.__setattr__(self, "lang_candidates", tuple(self.lang_candidates))
        if self.select == "reward" and self.keep_per_prompt is None:
            object.__setattr__(self, "keep_per_prompt", 1)  # best-of-N keeps the best one unless told more
        _check(self)

    def fingerprinted(self) -> dict:
        """The fields that decide the output (the stage's config fingerprint)."""
        data = dataclasses.asdict(self)
        for key in RUN_ONLY:
            data.pop(key)
        return data


def _check(c: FilterConfig) -> None:
    check = Checks()
    check(c.verify_timeout > 0, "verify_timeout", f"must be > 0 seconds, got {c.verify_timeout}")
    check(0.0 <= c.min_lang_ratio <= 1.0, "min_lang_ratio", f"must be within [0, 1], got {c.min_lang_ratio}")
    for name in ("min_tokens", "max_tokens"):
        value = getattr(c, name)
        check(value is None or value >= 0, name, f"must be >= 0, got {value}")
    check(
        c.min_tokens is None or c.max_tokens is None or c.min_tokens <= c.max_tokens,
        "min_tokens",
        f"{c.min_tokens} is above max_tokens {c.max_tokens}",
    )
    check(
        c.max_repetition is None or 0.0 <= c.max_repetition <= 1.0,
        "max_repetition",
        f"must be within [0, 1], got {c.max_repetition}",
    )
    check(0.0 < c.minhash_threshold < 1.0, "minhash_threshold", f"must be within (0, 1), got {c.minhash_threshold}")
    check(c.minhash_perms >= 1, "minhash_perms", f"must be >= 1, got {c.minhash_perms}")
    check(
        c.minhash_bands is None or 1 <= c.minhash_bands <= c.minhash_perms,
        "minhash_bands",
        f"must be within [1, minhash_perms={c.minhash_perms}], got {c.minhash_bands}",
    )
    for name in ("shingle", "ngram", "repetition_ngram", "batch_rows"):
        check(getattr(c, name) >= 1, name, f"must be >= 1, got {getattr(c, name)}")
    check(
        c.keep_per_prompt is None or c.keep_per_prompt >= 1,
        "keep_per_prompt",
        f"must be >= 1, got {c.keep_per_prompt}",
    )
    check(
        not (c.select == "all" and c.keep_per_prompt is not None),
        "keep_per_prompt",
        f"{c.keep_per_prompt} needs select shortest, random or reward (select all keeps every sample)",
    )
    check.run(lambda: check_engine(c.engine, c.replicas, c.ray_address))
    check(c.workers is None or c.workers >= 1, "workers", f"must be >= 1, got {c.workers}")
    check(bool(c.decontam_column), "decontam_column", "must name a column")
    check(bool(c.tests_column), "tests_column", "must name a column")
    check(_band_error(c.pass_rate) is None, "pass_rate", _band_error(c.pass_rate) or "")
    check.done()


def _band_error(text: str) -> str | None:
    """What is wrong with a ``--pass-rate LO..HI`` (filters/difficulty.py), None when nothing is."""
    from reasonkit.filters.difficulty import parse_band

    try:
        parse_band(text)
    except ValueError as e:
        return str(e)
    return None


def language_lookahead(config: FilterConfig, rows: int) -> bool:
    """Whether the language filter judges in a helper process (filters/lookahead.py) for an input
    of ``rows`` rows: the local engine only (a Ray replica has one CPU), and a large enough input.

    >>> from reasonkit.config import from_dict
    >>> c = from_dict(FilterConfig, {"traces": "t", "out": "o"}, "filter")
    >>> language_lookahead(c, 100), language_lookahead(c, 20_000)
    (False, True)
    """
    return config.lang is not None and config.engine == "local" and rows >= LOOKAHEAD_MIN_BATCHES * config.batch_rows
