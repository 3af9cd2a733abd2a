"""Selection (R1's rejection sampling): keep at most M surviving samples per prompt.

Runs last, on the rows every other filter kept (so with a verifier, only correct samples compete).
``shortest`` keeps the fewest completion tokens (ties: lower sample index); ``random`` ranks by a
stable hash of ``(seed, id, sample)``, so the choice is the same on every run and machine;
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

HOW = ("shortest", "random", "all")


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
    else:
        primary = np.array([stable_hash64(f"{seed}:{ids[i]}:{samples[i]}") for i in rows.tolist()], dtype=np.uint64)
    order = np.lexsort((sample, primary, group))  # by prompt, then the criterion, then sample
    g = group[order]
    starts = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]]))
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.concatenate([starts, [len(order)]])))
    for i in rows[order[rank >= keep_per_prompt]].tolist():
        reasons[i] = "not_selected"
    return reasons


class SelectFilter(RowFilter):
    """:func:`select` over one table (the stage runs it over the whole dataset)."""

    name = "select"
    reasons = ("not_selected",)

    def __init__(self, keep_per_prompt: int | None, how: str = "shortest", seed: int = 0):
        if how not in HOW:
            raise ValueError(f"unknown selection {how!r}; expected one of {HOW}")
        self.m, self.how, self.seed = keep_per_prompt, how, seed

    def judge(self, batch: pa.Table, rows: list[int]):
        cols = [batch.column(c).to_pylist() for c in ("id", "sample", "completion_tokens")]
        picked = [[c[i] for i in rows] for c in cols]
        return select(*picked, [True] * len(rows), self.m, self.how, self.seed)
