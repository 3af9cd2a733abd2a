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
reasonkit.errors.UserError: --keep-per-prompt 2 needs --select shortest, random or reward (--select all keeps every sample)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from reasonkit.engine import ENGINE_FIELDS, check_engine
from reasonkit.errors import UserError

#: The language filter's lookahead helper starts with this call (filters/lookahead.py); named here,
#: where ``distill filter`` can reach it before importing the filters, to start the helper early.
LANGUAGE_WARM_UP = "reasonkit.filters.language:_warm_up"
#: Inputs of fewer batches judge language in the filter's own process: the helper's start (~1 s of
#: the second core: a process, lingua's models) pays off only when there is work to overlap it with.
LOOKAHEAD_MIN_BATCHES = 4

#: Fields that change how a run goes, not what it writes: left out of the config fingerprint, so a
#: run resumed with more workers (or a different batch size) continues the same output.
RUN_ONLY = ("traces", "out", "workers", "batch_rows", "allow_incomplete", "overwrite") + ENGINE_FIELDS


@dataclass(frozen=True)
class FilterConfig:
    traces: str
    out: str
    # verification
    verifier: Literal["math", "int", "exact", "code", "none"] = "math"
    unverifiable: Literal["drop", "keep"] = "drop"
    verify_timeout: float = 5.0  # per answer; with the code verifier, per test
    # the code verifier: the prompts column holding each problem's tests (JSON; filters/code/tests.py)
    tests_column: str = "tests"
    # language consistency (lang None: off)
    lang: str | None = "en"
    min_lang_ratio: float = 0.95
    lang_candidates: tuple[str, ...] = ("en", "zh", "ja", "ko", "ru", "fr", "de", "es")
    # tool-use trajectories: drop an answer given without any tool call (the turn limit and unrecovered
    # tool errors are always dropped: filters/trajectory.py)
    require_tool: bool = False
    # format
    drop_truncated: bool = True
    require_boxed: bool = False
    # a think block: "optional" (a generic teacher writes none) or "required" (R1-style data only);
    # one that was opened and never closed is dropped either way (unclosed_think)
    think: Literal["optional", "required"] = "optional"
    min_tokens: int | None = None
    max_tokens: int | None = None
    max_repetition: float | None = 0.5
    repetition_ngram: int = 8
    # dedup
    dedup: Literal["exact", "minhash", "none"] = "exact"
    minhash_threshold: float = 0.8
    minhash_perms: int = 128
    minhash_bands: int | None = None
    shingle: int = 5
    # decontamination: files (Parquet/JSONL/CSV), each PATH or NAME=PATH
    decontam: tuple[str, ...] = ()
    decontam_column: str = "problem"
    ngram: int = 8
    # selection (reward: best-of-N by a `distill score` output's reward; keep_per_prompt then defaults to 1)
    keep_per_prompt: int | None = None
    select: Literal["shortest", "random", "reward", "all"] = "shortest"
    step_aggregate: Literal["min", "prod"] = "min"  # select reward on a PRM's step_rewards: the weakest step or the product
    seed: int = 0
    # running
    workers: int | None = None
    batch_rows: int = 1024
    allow_incomplete: bool = False
    overwrite: bool = False
    # where pass 1 runs (reasonkit/engine.py): ray spreads the input shards over `replicas` workers
    engine: Literal["local", "ray"] = "local"
    replicas: int = 1
    ray_address: str | None = None

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
        if self.select != "reward":  # it changes nothing else: outputs written before it existed still resume
            data.pop("step_aggregate")
        if not self.require_tool:  # likewise: outputs written before trajectories existed still resume
            data.pop("require_tool")
        if self.verifier != "code":  # likewise, before the code verifier
            data.pop("tests_column")
        return data


def _check(c: FilterConfig) -> None:
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise UserError(message)

    need(c.verify_timeout > 0, f"--verify-timeout must be > 0 seconds, got {c.verify_timeout}")
    need(0.0 <= c.min_lang_ratio <= 1.0, f"--min-lang-ratio must be within [0, 1], got {c.min_lang_ratio}")
    for name in ("min_tokens", "max_tokens"):
        value = getattr(c, name)
        need(value is None or value >= 0, f"--{name.replace('_', '-')} must be >= 0, got {value}")
    need(c.min_tokens is None or c.max_tokens is None or c.min_tokens <= c.max_tokens,
         f"--min-tokens {c.min_tokens} is above --max-tokens {c.max_tokens}")
    need(c.max_repetition is None or 0.0 <= c.max_repetition <= 1.0,
         f"--max-repetition must be within [0, 1], got {c.max_repetition}")
    need(0.0 < c.minhash_threshold < 1.0, f"--minhash-threshold must be within (0, 1), got {c.minhash_threshold}")
    need(c.minhash_perms >= 1, f"minhash_perms must be >= 1, got {c.minhash_perms}")
    need(c.minhash_bands is None or 1 <= c.minhash_bands <= c.minhash_perms,
         f"minhash_bands must be within [1, minhash_perms={c.minhash_perms}], got {c.minhash_bands}")
    for name in ("shingle", "ngram", "repetition_ngram", "batch_rows"):
        need(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}")
    need(c.keep_per_prompt is None or c.keep_per_prompt >= 1, f"--keep-per-prompt must be >= 1, got {c.keep_per_prompt}")
    need(not (c.select == "all" and c.keep_per_prompt is not None),
         f"--keep-per-prompt {c.keep_per_prompt} needs --select shortest, random or reward (--select all keeps every sample)")
    check_engine(c.engine, c.replicas, c.ray_address)
    need(c.workers is None or c.workers >= 1, f"--workers must be >= 1, got {c.workers}")
    need(bool(c.decontam_column), "decontam_column must name a column")
    need(bool(c.tests_column), "tests_column must name a column")


def language_lookahead(config: FilterConfig, rows: int) -> bool:
    """Whether the language filter judges in a helper process (filters/lookahead.py) for an input
    of ``rows`` rows: the local engine only (a Ray replica has one CPU), and a large enough input.

    >>> from reasonkit.config import from_dict
    >>> c = from_dict(FilterConfig, {"traces": "t", "out": "o"}, "filter")
    >>> language_lookahead(c, 100), language_lookahead(c, 20_000)
    (False, True)
    """
    return config.lang is not None and config.engine == "local" and rows >= LOOKAHEAD_MIN_BATCHES * config.batch_rows
