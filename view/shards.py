"""A table of the page as its Parquet shards: small columns for every row, the text only of the rows shown.

A stage of a million traces is never read whole: the page's sample and its filters need only the few short
columns in :data:`INDEX_COLUMNS`, read once per table; the rows chosen are then read shard by shard (one shard
in memory at a time). ``distill view --serve`` answers each page of rows the same way.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.view import rows as R

#: The columns the sampling and the filters read (kept in memory per table: small next to the text).
INDEX_COLUMNS = ("id", "drop_reason", "correct", "source", "step", "completion_tokens")


@dataclass
class Shards:
    """One table of the page: the shards of its stage directories, in the order the page shows them."""

    paths: list[Path]
    _index: pa.Table | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, dirs: list[Path]) -> Shards:
        """The committed shards of ``dirs`` (a damaged directory is one line naming it: store.load_manifest)."""
        from reasonkit.store import load_manifest

        return cls([d / s["file"] for d in dirs for s in load_manifest(d)["shards"] if s["rows"]])

    def names(self) -> list[str]:
        """Every column name of the table (each shard's schema; a torn shard is one line naming it)."""
        names: dict[str, None] = {}
        for path in self.paths:
            names.update(dict.fromkeys(_schema(path).names))
        return list(names)

    def index(self) -> pa.Table:
        """The index columns of every row, with the shard and row each came from (read once)."""
        with self._lock:
            if self._index is None:
                self._index = self.columns(INDEX_COLUMNS, where=True)
            return self._index

    def columns(self, names, *, where: bool = False) -> pa.Table:
        """Those of ``names`` the table has, for every row (``where``: with ``_shard`` and ``_row``)."""
        parts = []
        for n, path in enumerate(self.paths):
            t = _read(path, names)
            if where:
                t = t.append_column("_shard", pa.array([n] * t.num_rows, pa.int32()))
                t = t.append_column("_row", pa.array(range(t.num_rows), pa.int64()))
            parts.append(t)
        return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})

    def take(self, chosen: pa.Table) -> pa.Table:
        """The whole rows of ``chosen`` (rows of :meth:`index`), in its order, reading one shard at a time."""
        tables = [R.read_shard_rows(self.paths[shard], rows) for shard, rows in _by_shard(chosen)]
        return pa.concat_tables(tables, promote_options="default") if tables else pa.table({})

    def page(self, filters: dict[str, str], offset: int, limit: int) -> dict:
        """One page of the rows that pass the page's filters, and how many pass (``distill view --serve``)."""
        index = self.index()
        mask = filter_mask(index, filters)
        if filters.get("q"):
            mask = pc.and_(mask, self._search(filters["q"]))
        hits = index.filter(mask)
        names, values = R.to_columns(R.slim(self.take(hits.slice(offset, limit))))
        return {"columns": names, "rows": values, "matching": hits.num_rows}

    def _search(self, q: str) -> pa.Array:
        """Whether each row's text holds ``q`` (case-insensitive): every shard's text read, one at a time."""
        found = [R.text_match(_read(path, None), q) for path in self.paths]
        return pa.chunked_array(found, pa.bool_()).combine_chunks() if found else pa.array([], pa.bool_())


def _schema(path: Path) -> pa.Schema:
    import pyarrow.parquet as pq

    from reasonkit.errors import UserError

    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as e:
        raise UserError(f"{path}: unreadable Parquet shard ({str(e).splitlines()[0]})") from None


def _read(path: Path, columns) -> pa.Table:
    from reasonkit.store import read_shard

    if columns is None:
        return read_shard(path)
    present = set(_schema(path).names)
    return read_shard(path, columns=[c for c in columns if c in present])


def _by_shard(chosen: pa.Table) -> list[tuple[int, list[int]]]:
    """The rows grouped by shard, in order (rows in table order come in runs of one shard)."""
    shards, rows = chosen.column("_shard").to_pylist(), chosen.column("_row").to_pylist()
    runs: list[tuple[int, list[int]]] = []
    for s, r in zip(shards, rows):
        if runs and runs[-1][0] == s:
            runs[-1][1].append(r)
        else:
            runs.append((s, [r]))
    return runs


def filter_mask(index: pa.Table, f: dict[str, str]) -> pa.Array:
    """The page's filters (view.js ``matches``) over the index columns."""
    names = set(index.column_names)
    mask = pa.array([True] * index.num_rows, pa.bool_())
    reason = f.get("reason")
    if reason and "drop_reason" in names:
        col = index.column("drop_reason")
        test = (
            pc.is_null(col)
            if reason == "(kept)"
            else pc.is_valid(col)
            if reason == "(dropped)"
            else pc.equal(col, reason)
        )
        mask = pc.and_(mask, pc.fill_null(test, False))
    elif reason and reason != "(kept)":
        mask = pa.array([False] * index.num_rows, pa.bool_())
    verdict = f.get("verdict")
    if verdict and "correct" in names:
        col = index.column("correct")
        test = {"correct": pc.equal(col, True), "wrong": pc.equal(col, False), "unknown": pc.is_null(col)}.get(verdict)
        if test is not None:
            mask = pc.and_(mask, pc.fill_null(test, False))
    for key in ("source", "step"):
        if f.get(key) and key in names:
            mask = pc.and_(mask, pc.fill_null(pc.equal(pc.cast(index.column(key), pa.string()), f[key]), False))
    if f.get("prompt") and "id" in names:
        ids, p = index.column("id"), f["prompt"]
        test = pc.equal(ids, p)
        if len(p) > 2:
            test = pc.or_(test, pc.match_substring(ids, p, ignore_case=True))
        mask = pc.and_(mask, pc.fill_null(test, False))
    if "completion_tokens" in names:
        tokens = index.column("completion_tokens")
        for key, op in (("minlen", pc.greater_equal), ("maxlen", pc.less_equal)):
            if f.get(key):
                mask = pc.and_(mask, pc.fill_null(op(tokens, int(float(f[key]))), False))
    return mask
