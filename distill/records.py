"""A run's per-step records (report.json's ``history``), read for one steady figure.

Its own room so that the method reports (distill/rl/report.py, distill/onpolicy/report.py) and the training
report (distill/report.py)
both read it without importing each other.
"""

from __future__ import annotations

import math


def final_window(records: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the last tenth of the steps (at least 1, at most 10): a steadier final value."""
    values = [r[key] for r in records if key in r and not math.isnan(r[key])]
    if not values:
        return None
    k = max(1, min(10, len(values) // 10))
    return sum(values[-k:]) / k


def evenly_spaced(records: list[dict], most: int) -> list[dict]:
    """At most ``most`` of ``records``, evenly spaced, the first and the last kept: a report.md step table.

    >>> [r["step"] for r in evenly_spaced([{"step": s} for s in range(1, 11)], 4)]
    [1, 4, 7, 10]
    """
    if len(records) <= most:
        return records
    return [records[round(i * (len(records) - 1) / (most - 1))] for i in range(most)]
