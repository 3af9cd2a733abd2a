"""Selection (R1's rejection sampling): keep at most M surviving samples per prompt.

Runs last, on the rows every other filter kept (so with a verifier, only correct samples compete).
``shortest`` keeps the fewest completion tokens (ties: lower sample index); ``random`` ranks by a
stable hash of ``(seed, id, sample)``, so the choice is the same on every run and machine;
``reward`` keeps the highest reward (a ``distill score`` output's ``reward``, or a PRM's
``step_rewards`` aggregated by min or product), the verifier still first: verified-correct samples
before the ones it could not check, then by reward (best-of-N by a reward model);
``all`` keeps every survivor. The others are dropped with reason ``not_selected``.

>>> select(["p", "p", "p", "q"], [0, 1, 2, 0], [30, 10, 20, 50], [True, True, True, True], 2, "shortest")
['not_selected', None, None, None]
>>> select(["p", "p"], [0, 1], [10, 30], [False, True], 1, "shortest")  # a dropped row does not compete
[None, None]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from reasonkit.filters.base import RowFilter
from reasonkit.filters.text import stable_hash64

HOW = ("shortest", "random", "reward", "all")
#: How a PRM's per-step rewards make one score: the weakest step (Math-Shepherd) or their product
#: (Lightman et al., "Let's Verify Step by Step": the probability that every step is right).
STEP_AGGREGATES = ("min", "prod")


def select(
    ids: Sequence[str],
    samples: Sequence[int],
    tokens: Sequence[int],
    alive: Sequence[bool],
    keep_per_prompt: int | None,
    how: str = "shortest",
    seed: int = 0,
) -> list[str | None]:
    """For every row: None (kept or not competing) or ``not_selected``."""
    if how not in HOW:
        raise ValueError(f"unknown selection {how!r}; expected one of {HOW}")
    reasons: list[str | None] = [None] * len(ids)
    if how == "all" or keep_per_prompt is None:
        return reasons
    rows = np.flatnonzero(np.asarray(alive, dtype=bool))
    if len(rows) == 0:
        return reasons
    _, group = np.unique(np.asarray(ids, dtype=object)[rows].astype(str), return_inverse=True)
    sample = np.asarray(samples, dtype=np.int64)[rows]
    if how == "shortest":
        primary = np.asarray(tokens, dtype=np.int64)[rows]
    elif how == "reward":
        raise ValueError("select(how='reward') needs the rewards: use select_by_reward")
    else:
        primary = np.array([stable_hash64(f"{seed}:{ids[i]}:{samples[i]}") for i in rows.tolist()], dtype=np.uint64)
    order = np.lexsort((sample, primary, group))  # by prompt, then the criterion, then sample
    g = group[order]
    starts = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.concatenate([starts, [len(order)]])))
    for i in rows[order[rank >= keep_per_prompt]].tolist():
        reasons[i] = "not_selected"
    return reasons


def step_score(steps: Sequence[float] | None, how: str = "min") -> float | None:
    """One score from a PRM's step rewards (None when there are no steps).

    >>> step_score([0.9, 0.5, 0.8]), round(step_score([0.9, 0.5, 0.8], "prod"), 3), step_score([])
    (0.5, 0.36, None)
    """
    if how not in STEP_AGGREGATES:
        raise ValueError(f"unknown step aggregate {how!r}; expected one of {STEP_AGGREGATES}")
    if not steps:
        return None
    return float(min(steps)) if how == "min" else float(np.prod(np.asarray(steps, dtype=np.float64)))


def reward_scores(
    rewards: Sequence[float | None], step_rewards: Sequence | None = None, how: str = "min"
) -> list[float | None]:
    """The score each row competes with: its aggregated ``step_rewards`` where it has them, else its ``reward``.

    >>> reward_scores([0.2, 1.5], [[0.9, 0.2], None], "prod")
    [0.18000000000000002, 1.5]
    """
    if step_rewards is None:
        return [None if r is None else float(r) for r in rewards]
    return [
        step_score(s, how) if s is not None else (None if r is None else float(r))
        for r, s in zip(rewards, step_rewards)
    ]


def _rank(ids, samples, scores, correct, rows: np.ndarray, verified_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` ordered by prompt, then (verified-correct first), highest score, lower sample; and each one's rank."""
    _, group = np.unique(np.asarray(ids, dtype=object)[rows].astype(str), return_inverse=True)
    sample = np.asarray(samples, dtype=np.int64)[rows]
    value = np.array([-np.inf if scores[i] is None or np.isnan(scores[i]) else scores[i] for i in rows.tolist()])
    first = np.array([0 if (verified_first and correct[i] is True) else 1 for i in rows.tolist()])
    order = np.lexsort((sample, -value, first, group))
    g = group[order]
    starts = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.concatenate([starts, [len(order)]])))
    return order, rank


def select_by_reward(
    ids: Sequence[str],
    samples: Sequence[int],
    scores: Sequence[float | None],
    correct: Sequence[bool | None],
    alive: Sequence[bool],
    keep_per_prompt: int,
) -> list[str | None]:
    """Best-of-N by reward among the ``alive`` rows of each prompt, verified-correct rows first.

    A row with no score ranks below every scored one; ties go to the lower sample.

    >>> select_by_reward(["p"] * 3, [0, 1, 2], [0.9, 0.2, 0.5], [None, True, True], [True] * 3, 1)  # correct first
    ['not_selected', 'not_selected', None]
    >>> select_by_reward(["p"] * 3, [0, 1, 2], [0.9, 0.2, 0.5], [None, None, None], [True] * 3, 1)
    [None, 'not_selected', 'not_selected']
    """
    reasons: list[str | None] = [None] * len(ids)
    rows = np.flatnonzero(np.asarray(alive, dtype=bool))
    if len(rows) == 0:
        return reasons
    order, rank = _rank(ids, samples, scores, correct, rows, verified_first=True)
    for i in rows[order[rank >= keep_per_prompt]].tolist():
        reasons[i] = "not_selected"
    return reasons


def reward_pick(
    ids: Sequence[str], samples: Sequence[int], scores: Sequence[float | None], correct: Sequence[bool | None]
) -> dict:
    """How often the reward model's own pick (each prompt's highest score among every scored sample, whatever
    the verifier or the other filters said) was verified correct.

    >>> reward_pick(["p", "p", "q", "q", "r"], [0, 1, 0, 1, 0], [0.9, 0.1, 0.2, 0.8, None], [True, False, True, False, None])
    {'prompts': 2, 'verified_correct': 1, 'wrong': 1, 'unverified': 0, 'correct_share': 0.5}
    """  # noqa: E501
    rows = np.array([i for i, s in enumerate(scores) if s is not None and not np.isnan(s)], dtype=np.int64)
    counts = {"prompts": 0, "verified_correct": 0, "wrong": 0, "unverified": 0}
    if len(rows):
        order, rank = _rank(ids, samples, scores, correct, rows, verified_first=False)
        for i in rows[order[rank == 0]].tolist():
            counts["prompts"] += 1
            counts[{True: "verified_correct", False: "wrong"}.get(correct[i], "unverified")] += 1
    known = counts["verified_correct"] + counts["wrong"]
    return {**counts, "correct_share": round(counts["verified_correct"] / known, 4) if known else None}


class SelectFilter(RowFilter):
    """:func:`select` over one table (the stage runs it over the whole dataset)."""

    name = "select"
    reasons = ("not_selected",)

    def __init__(self, keep_per_prompt: int | None, how: str = "shortest", seed: int = 0, step_aggregate: str = "min"):
        if how not in HOW:
            raise ValueError(f"unknown selection {how!r}; expected one of {HOW}")
        self.m, self.how, self.seed, self.step_aggregate = keep_per_prompt, how, seed, step_aggregate

    def judge(self, batch: pa.Table, rows: list[int]):
        if self.how == "reward" and self.m is not None:
            steps = batch.column("step_rewards").to_pylist() if "step_rewards" in batch.column_names else None
            scores = reward_scores(batch.column("reward").to_pylist(), steps, self.step_aggregate)
            ids, samples, correct = (batch.column(c).to_pylist() for c in ("id", "sample", "correct"))
            picked = [[c[i] for i in rows] for c in (ids, samples, scores, correct)]
            return select_by_reward(*picked, [True] * len(rows), self.m)
        cols = [batch.column(c).to_pylist() for c in ("id", "sample", "completion_tokens")]
        picked = [[c[i] for i in rows] for c in cols]
        return select(*picked, [True] * len(rows), self.m, self.how, self.seed)
