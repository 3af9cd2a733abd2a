"""A stage's rows for the page: read through store.py, sampled with stated counts, turned into JSON-able columns.

A large table is sampled, never cut at its head: every drop reason keeps up to ``per_reason`` of its rows, taken
as whole prompts (the ten samples the verifier called ``wrong`` for one problem stay together), and the rest of
``rows`` is drawn at random, again by whole prompts (a GRPO group: one prompt at one step). What was drawn is said
in counts, per reason.

>>> import pyarrow as pa
>>> t = pa.table({"id": ["a", "a", "b", "c", "d"], "drop_reason": [None, "wrong", "wrong", None, None]})
>>> s, note = sample(t, rows=3, per_reason=1)
>>> s.column("id").to_pylist(), note["shown"], note["reasons"]["wrong"]
(['a', 'a', 'd'], 3, {'total': 2, 'shown': 1})
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.errors import UserError

#: Columns whose values the page never shows: the raw completion where the think split holds its two parts
#: (sent once, not twice), the problem text where the prompt messages hold it.
REDUNDANT = {"problem": "messages"}


def read_table(directory: Path) -> tuple[pa.Table, dict]:
    """All committed rows of a stage directory (an unfinished one too: the page says so) and its manifest; a damaged
    directory or shard is one line naming it (store.py's UserError)."""
    from reasonkit.store import load_manifest, read_shard

    manifest = load_manifest(directory)
    tables = [read_shard(directory / s["file"]) for s in manifest["shards"]]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return pa.table({}), manifest
    try:
        return pa.concat_tables(tables, promote_options="default"), manifest
    except pa.ArrowInvalid as e:
        raise UserError(f"{directory}: shards of different schemas ({str(e).splitlines()[0]})") from None


def group_keys(table: pa.Table) -> list:
    """The key that keeps a prompt's rows together: its id (and its step, for GRPO rollouts)."""
    if "id" not in table.column_names:
        return list(range(table.num_rows))
    ids = table.column("id").to_pylist()
    if "step" in table.column_names:
        return list(zip(table.column("step").to_pylist(), ids))
    return ids


def sample(table: pa.Table, *, rows: int, per_reason: int, seed: int = 0) -> tuple[pa.Table, dict]:
    """Up to ``rows`` rows of ``table`` (every drop reason represented) and the note saying what was drawn."""
    chosen, note = choose(table, rows=rows, per_reason=per_reason, seed=seed)
    return (table if chosen is None else table.take(pa.array(chosen, pa.int64()))), note


def choose(table: pa.Table, *, rows: int, per_reason: int, seed: int = 0) -> tuple[list[int] | None, dict]:
    """The positions :func:`sample` takes (None: every row), from the columns ``id``, ``drop_reason``, ``step``."""
    n = table.num_rows
    reasons = table.column("drop_reason").to_pylist() if "drop_reason" in table.column_names else [None] * n
    totals: dict[str, int] = {}
    for r in reasons:
        if r is not None:
            totals[r] = totals.get(r, 0) + 1
    if n <= rows:
        return None, _note(n, n, totals, {r: c for r, c in totals.items()})
    groups: dict[object, list[int]] = {}
    for i, key in enumerate(group_keys(table)):
        groups.setdefault((reasons[i], key), []).append(i)
    chosen: list[int] = []
    shown: dict[str, int] = {}
    for (reason, _), members in groups.items():  # in table order: the first prompts of each reason
        if reason is not None and shown.get(reason, 0) < per_reason:
            chosen += members
            shown[reason] = shown.get(reason, 0) + len(members)
    taken = set(chosen)
    kept = [m for (reason, _), m in groups.items() if reason is None]
    more = [(reason, m) for (reason, _), m in groups.items() if reason is not None and m[0] not in taken]
    random.Random(seed).shuffle(kept)
    random.Random(seed + 1).shuffle(more)
    budget = max(rows - len(chosen), 0)
    # the kept rows first; where they run out before --rows, more of the dropped ones
    for reason, members in [(None, m) for m in kept] + more:
        if budget <= 0:
            break
        chosen += members[:budget]
        if reason is not None:
            shown[reason] += len(members[:budget])
        budget -= len(members)
    chosen.sort()
    return chosen, _note(n, len(chosen), totals, shown)


def _note(total: int, shown: int, totals: dict[str, int], shown_by_reason: dict[str, int]) -> dict:
    return {
        "total": total,
        "shown": shown,
        "reasons": {r: {"total": c, "shown": shown_by_reason.get(r, 0)} for r, c in sorted(totals.items())},
    }


def slim(table: pa.Table) -> pa.Table:
    """The columns the page shows: the raw completion only where no think split holds it, no duplicated problem."""
    names = table.column_names
    for column, holder in REDUNDANT.items():
        if column in names and holder in names:
            table = table.drop_columns([column])
    if {"completion", "reasoning", "response"} <= set(table.column_names):
        split = pc.is_valid(table.column("reasoning"))
        raw = pc.if_else(split, pa.scalar(None, table.schema.field("completion").type), table.column("completion"))
        table = table.set_column(table.column_names.index("completion"), "completion", raw)
    return table


def to_columns(table: pa.Table) -> tuple[list[str], list[list]]:
    """``(column names, rows as lists)``: what the page's JSON holds (no NaN: JSON has none)."""
    names = table.column_names
    columns = [_clean(table.column(name).to_pylist()) for name in names]
    return names, [list(row) for row in zip(*columns)]


def _clean(values: Sequence) -> list:
    if values and any(isinstance(v, float) for v in values[:50]):
        return [None if isinstance(v, float) and not math.isfinite(v) else v for v in values]
    return list(values)


def clean_row(row: dict) -> dict:
    """One record with its non-finite floats as null (JSON has no NaN)."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


def read_shard_rows(path: Path, rows: list[int]) -> pa.Table:
    """Rows ``rows`` (positions) of one shard."""
    from reasonkit.store import read_shard

    return read_shard(path).take(pa.array(rows, pa.int64()))


def text_match(table: pa.Table, q: str) -> pa.Array:
    """Whether each row's text (any string column, any message's content) holds ``q``, ignoring case."""
    found = pa.array([False] * table.num_rows, pa.bool_())
    for field_, column in zip(table.schema, table.columns):
        if pa.types.is_string(field_.type) or pa.types.is_large_string(field_.type):
            hit = pc.match_substring(column, q, ignore_case=True)
        elif (
            pa.types.is_list(field_.type)
            and pa.types.is_struct(field_.type.value_type)
            and field_.type.value_type.get_field_index("content") >= 0
        ):
            column = column.combine_chunks()
            inner = pc.match_substring(pc.struct_field(pc.list_flatten(column), "content"), q, ignore_case=True)
            parents = pc.list_parent_indices(column)
            rows_hit = pc.filter(parents, pc.fill_null(inner, False))
            hit = pc.is_in(pa.array(range(table.num_rows), pa.int64()), value_set=pc.cast(rows_hit, pa.int64()))
        else:
            continue
        found = pc.or_(found, pc.fill_null(hit, False))
    return found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
