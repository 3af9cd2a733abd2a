"""The Filter protocol and the loop that owns ``keep`` and ``drop_reason``.

As in datatrove's ``BaseFilter``, a filter only says, for each row still kept, either ``None``
(keep) or a short reason string (drop). The loop here applies that decision: a row already dropped
is never shown to a later filter, so each dropped row carries the reason of the *first* filter
that dropped it, and the funnel (rows dropped per reason, in filter order) adds up exactly.

>>> import pyarrow as pa
>>> class Short(RowFilter):
...     name, reasons = "short", ("too_short",)
...     def judge(self, batch, rows):
...         texts = batch.column("response").to_pylist()
...         return ["too_short" if len(texts[i]) < 3 else None for i in rows]
>>> out = Short()(pa.table({"response": ["ok", "fine"]}))
>>> out.column("keep").to_pylist(), out.column("drop_reason").to_pylist()
([False, True], ['too_short', None])
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, MutableMapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

# numpy and pyarrow load inside the functions: the language filter's helper process
# (filters/lookahead.py) imports the filter classes and needs neither (~0.1 s of its start).
if TYPE_CHECKING:
    import pyarrow as pa


@cache
def verdict_types() -> dict[str, pa.DataType]:
    """Columns a filter may add to a traces table (the ``verdicts`` table of schema.py)."""
    import pyarrow as pa

    return {
        "pred": pa.string(),
        "correct": pa.bool_(),
        "lang_ratio": pa.float32(),
        "keep": pa.bool_(),
        "drop_reason": pa.string(),
    }


@runtime_checkable
class Filter(Protocol):
    """Adds its columns to a batch and sets ``keep=False`` with a ``drop_reason`` on rows it drops."""

    name: str
    #: Every reason it can give, in the order the funnel lists them.
    reasons: tuple[str, ...]

    def __call__(self, batch: pa.Table) -> pa.Table: ...


def start_verdicts(batch: pa.Table) -> pa.Table:
    """Add the verdict columns a batch lacks: nulls, and ``keep`` all true."""
    import numpy as np
    import pyarrow as pa

    for name, type_ in verdict_types().items():
        if name not in batch.column_names:
            if name == "keep":
                col = pa.array(np.ones(batch.num_rows, dtype=bool))
            else:
                col = pa.nulls(batch.num_rows, type_)
            batch = batch.append_column(pa.field(name, type_), col)
    return batch


def alive_rows(batch: pa.Table) -> list[int]:
    """Indices of the rows still kept."""
    import numpy as np

    keep = batch.column("keep").to_numpy(zero_copy_only=False)
    return np.flatnonzero(keep).tolist()


def set_column(batch: pa.Table, name: str, values: Sequence, type_: pa.DataType | None = None) -> pa.Table:
    """Replace (or add) column ``name`` with ``values`` (one per row)."""
    import pyarrow as pa

    type_ = type_ or verdict_types().get(name) or batch.schema.field(name).type
    arr = pa.array(values, type=type_)
    if name in batch.column_names:
        i = batch.column_names.index(name)
        return batch.set_column(i, pa.field(name, type_), arr)
    return batch.append_column(pa.field(name, type_), arr)


def update_rows(batch: pa.Table, name: str, rows: Sequence[int], values: Sequence) -> pa.Table:
    """Set ``name`` at ``rows`` to ``values``, leaving other rows as they were."""
    if not rows:
        return batch
    column = batch.column(name).to_pylist() if name in batch.column_names else [None] * batch.num_rows
    for i, v in zip(rows, values):
        column[i] = v
    return set_column(batch, name, column)


def mark(batch: pa.Table, rows: Sequence[int], reasons: Sequence[str | None]) -> pa.Table:
    """Drop each of ``rows`` whose reason is not None, unless it was already dropped."""
    batch = start_verdicts(batch)
    keep = batch.column("keep").to_pylist()
    why = batch.column("drop_reason").to_pylist()
    changed = False
    for i, reason in zip(rows, reasons):
        if reason is not None and keep[i]:
            keep[i], why[i], changed = False, reason, True
    if not changed:
        return batch
    return set_column(set_column(batch, "keep", keep), "drop_reason", why)


class RowFilter:
    """Base class: subclasses implement :meth:`judge`; the loop is here.

    ``judge(batch, rows)`` sees only the rows still kept and returns one reason (or None) per row
    in ``rows``; it may instead return ``(reasons, {column: values})`` to also record columns
    (such as ``pred`` or ``lang_ratio``) for those rows.
    """

    name: str = "filter"
    reasons: tuple[str, ...] = ()

    def prepare(self, batch: pa.Table) -> pa.Table:
        """Columns computed for every row, kept or not (cheap ones only). Default: none."""
        return batch

    def judge(self, batch: pa.Table, rows: list[int]):  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, batch: pa.Table) -> pa.Table:
        batch = self.prepare(start_verdicts(batch))
        rows = alive_rows(batch)
        if not rows:
            return batch
        result = self.judge(batch, rows)
        reasons, columns = result if isinstance(result, tuple) else (result, {})
        if len(reasons) != len(rows):
            raise RuntimeError(f"filter {self.name!r} judged {len(reasons)} of {len(rows)} rows")
        for name, values in columns.items():
            batch = update_rows(batch, name, rows, values)
        return mark(batch, rows, reasons)


def apply(filters: Iterable[Filter], batch: pa.Table, timings: MutableMapping[str, float] | None = None) -> pa.Table:
    """Run ``filters`` in order over one batch; with ``timings``, add each filter's seconds to it."""
    batch = start_verdicts(batch)
    for f in filters:
        start = time.perf_counter()
        batch = f(batch)
        if timings is not None:
            timings[f.name] = timings.get(f.name, 0.0) + time.perf_counter() - start
    return batch


def count_reasons(batch: pa.Table) -> Counter:
    """Dropped rows per reason in ``batch``."""
    return Counter(r for r in batch.column("drop_reason").to_pylist() if r is not None)
