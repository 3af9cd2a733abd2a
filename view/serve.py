"""``distill view PATH --serve``: the same page on 127.0.0.1, its rows read from the Parquet shards a page at a time.

For tables too large to put in one file. The page asks ``api/rows?table=KEY&offset=..&limit=..`` with the same
filters it applies itself to embedded rows (reason, verdict, source, step, prompt, length, search); the server
reads the few small columns the filters need once per table and keeps them, and reads the text of a page's
rows from their shards when asked. It answers only on the loopback address and only to a Host naming it.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa

from reasonkit.view.shards import Shards

HOST = "127.0.0.1"
MAX_LIMIT = 500  # rows in one answer


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, page: str, sources: dict[str, Shards]):
        self.page = page.encode("utf-8")
        self.tables = sources
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
        self._send(
            status,
            json.dumps(body, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8"),
            "application/json; charset=utf-8",
        )

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


def serve(page: str, sources: dict[str, Shards], port: int) -> Server:
    """A server bound to 127.0.0.1:``port`` (0: any free port), not yet serving (call ``serve_forever``)."""
    return Server(port, page, sources)
