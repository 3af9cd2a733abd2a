"""What every reward function of one run shares: plain data, so a reward pickles with it.

Its own module because both kinds of reward read it, the verifier rewards (reward/functions.py) and
the reward model (reward/model.py), and neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RewardSetup:
    """What every reward of one run shares (plain data: a reward pickles with it)."""

    verifier: str = "math"
    verify_timeout: float = 5.0
    lang: str = "en"
    lang_candidates: tuple[str, ...] | None = None  # None: the language filter's defaults
    max_completion_length: int | None = None
    overlong_cache: int | None = None
    prefilled: bool = False
    eos_token_ids: tuple[int, ...] = ()
    # a tool-use trajectory's final answer (GRPO with tools): read and checked as ``distill filter`` reads a
    # trajectory's (filters/trajectory.py: a plain short answer counts, golds that are words match as text)
    trajectory: bool = False
    tests_column: str = "tests"  # the code reward's tests (JSON, filters/code/tests.py)
