"""``distill view PATH --serve``: the same page on 127.0.0.1, its rows read from the Parquet shards a page at a time.

For tables too large to put in one file. The page asks ``api/rows?table=KEY&offset=..&limit=..`` with the same
filters it applies itself to embedded rows (reason, verdict, source, step, prompt, length, search); the server
reads the few small columns the filters need once per table and keeps them, and reads the text of a page's
rows from their shards when asked. It answers only on the loopback address and only to a Host naming it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.view import rows as R

HOST = "127.0.0.1"
#: The columns the filters read (kept in memory per table: small next to the text).
FILTER_COLUMNS = ("id", "drop_reason", "correct", "source", "step", "completion_tokens")
MAX_LIMIT = 500


@dataclass
class Shards:
    """One table of the page: the shards of its stage directories, in the order the page shows them."""

    paths: list[Path]
    _index: pa.Table | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, dirs: list[Path]) -> Shards:
        from reasonkit.store import load_manifest

        return cls([d / s["file"] for d in dirs for s in load_manifest(d)["shards"]])

    def index(self) -> pa.Table:
        """The filter columns of every row, with the shard and row each came from (read once)."""
        with self._lock:
            if self._index is None:
                parts = []
                for n, path in enumerate(self.paths):
                    t = _read(path, FILTER_COLUMNS)
                    t = t.append_column("_shard", pa.array([n] * t.num_rows, pa.int32()))
                    parts.append(t.append_column("_row", pa.array(range(t.num_rows), pa.int64())))
                self._index = pa.concat_tables(parts, promote_options="default") if parts else pa.table({})
            return self._index

    def page(self, filters: dict[str, str], offset: int, limit: int) -> dict:
        index = self.index()
        mask = _mask(index, filters)
        if filters.get("q"):
            mask = pc.and_(mask, self._search(filters["q"].lower()))
        hits = index.filter(mask)
        chosen = hits.slice(offset, limit)
        tables = []
        for shard, rows in _by_shard(chosen):
            tables.append(R.read_shard_rows(self.paths[shard], rows))
        table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
        names, values = R.to_columns(R.slim(table))
        return {"columns": names, "rows": values, "matching": hits.num_rows}

    def _search(self, q: str) -> pa.Array:
        """Whether each row's text holds ``q`` (case-insensitive): every shard's text read, one at a time."""
        found = [R.text_match(_read(path, None), q) for path in self.paths]
        return pa.chunked_array(found, pa.bool_()).combine_chunks() if found else pa.array([], pa.bool_())


def _read(path: Path, columns) -> pa.Table:
    import pyarrow.parquet as pq

    from reasonkit.store import read_shard

    if columns is None:
        return read_shard(path)
    present = set(pq.read_schema(path).names)
    return read_shard(path, columns=[c for c in columns if c in present])


def _by_shard(chosen: pa.Table):
    """The page's rows grouped by shard, in page order (the rows are in table order, so shards come in runs)."""
    shards, rows = chosen.column("_shard").to_pylist(), chosen.column("_row").to_pylist()
    runs: list[tuple[int, list[int]]] = []
    for s, r in zip(shards, rows):
        if runs and runs[-1][0] == s:
            runs[-1][1].append(r)
        else:
            runs.append((s, [r]))
    return runs


def _mask(index: pa.Table, f: dict[str, str]) -> pa.Array:
    """The page's filters (view.js ``matches``) over the filter columns."""
    names = set(index.column_names)
    mask = pa.array([True] * index.num_rows, pa.bool_())
    reason = f.get("reason")
    if reason and "drop_reason" in names:
        col = index.column("drop_reason")
        test = pc.is_null(col) if reason == "(kept)" else pc.is_valid(col) if reason == "(dropped)" else pc.equal(col, reason)
        mask = pc.and_(mask, pc.fill_null(test, False))
    elif reason and reason != "(kept)":
        mask = pa.array([False] * index.num_rows, pa.bool_())
    verdict = f.get("verdict")
    if verdict and "correct" in names:
        col = index.column("correct")
        test = {"correct": pc.equal(col, True), "wrong": pc.equal(col, False), "unknown": pc.is_null(col)}.get(verdict)
        if test is not None:
            mask = pc.and_(mask, pc.fill_null(test, False))
    for key, column in (("source", "source"), ("step", "step")):
        if f.get(key) and column in names:
            col = index.column(column)
            mask = pc.and_(mask, pc.fill_null(pc.equal(pc.cast(col, pa.string()), f[key]), False))
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


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, page: str, sources: dict[str, list[Path]]):
        self.page = page.encode("utf-8")
        self.tables = {key: Shards.of(dirs) for key, dirs in sources.items()}
        super().__init__((HOST, port), Handler)


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        if host not in (HOST, "localhost"):  # a page elsewhere pointing a name at 127.0.0.1 gets nothing
            return self._send(403, b"forbidden", "text/plain")
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            return self._send(200, self.server.page, "text/html; charset=utf-8")
        if url.path == "/api/rows":
            return self._rows({k: v[0] for k, v in parse_qs(url.query).items()})
        return self._send(404, b"not found", "text/plain")

    def _rows(self, q: dict[str, str]) -> None:
        table = self.server.tables.get(q.get("table", ""))
        if table is None:
            return self._json(404, {"error": f"no table {q.get('table')!r} on this page"})
        try:
            offset = max(0, int(q.get("offset", 0)))
            limit = min(MAX_LIMIT, max(1, int(q.get("limit", 50))))
            got = table.page(q, offset, limit)
        except (ValueError, pa.ArrowException) as e:
            return self._json(400, {"error": str(e).splitlines()[0]})
        except Exception as e:  # a shard torn since the page was made: say which, keep serving
            return self._json(500, {"error": str(e).splitlines()[0] if str(e) else type(e).__name__})
        self._json(200, got)

    def _json(self, status: int, body: dict) -> None:
        self._send(status, json.dumps(body, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8"),
                   "application/json; charset=utf-8")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name): quiet
        return None


def serve(page: str, sources: dict[str, list[Path]], port: int) -> Server:
    """A server bound to 127.0.0.1:``port`` (0: any free port), not yet serving (call ``serve_forever``)."""
    return Server(port, page, sources)
