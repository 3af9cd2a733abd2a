"""`distill push` against a loopback HTTP server that records the requests the hub client makes
(huggingface_hub reads `HF_ENDPOINT` at import, so each push runs in a fresh interpreter): the card
and shards arrive intact, a refusal is one line, and without a token nothing is sent."""

import base64
import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from ..helpers.hub import TOKEN, folder_files


class _Hub(BaseHTTPRequestHandler):
    """Just enough of the Hub API for `create_repo`, `list_repo_files` and `create_commit`."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _reply(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: bytes) -> None:
        self.server.requests.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )

    def do_GET(self):
        self._record(b"")
        path = urlparse(self.path).path
        if path == f"/api/datasets/{self.server.repo}/tree/main":
            self._reply(
                200,
                [{"type": "file", "path": p, "size": len(d), "oid": "0" * 40} for p, d in self.server.files.items()],
            )
        else:
            self._reply(404, {"error": f"not here: {path}"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._record(body)
        path, repo = urlparse(self.path).path, self.server.repo
        if self.server.fail_with:
            self._reply(self.server.fail_with, {"error": "Invalid credentials in Authorization header"})
        elif path == "/api/repos/create":
            self._reply(200, {"url": f"http://{self.headers['Host']}/datasets/{repo}", "name": repo})
        elif path == "/api/validate-yaml":
            yaml.safe_load(json.loads(body)["content"].split("---\n")[1])  # the card's metadata parses
            self._reply(200, {"errors": [], "warnings": []})
        elif path == f"/api/datasets/{repo}/preupload/main":
            files = json.loads(body)["files"]
            self._reply(
                200,
                {
                    "files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None} for f in files
                    ]
                },
            )
        elif path == f"/api/datasets/{repo}/commit/main":
            for line in body.splitlines():
                op = json.loads(line)
                if op["key"] == "file":
                    self.server.files[op["value"]["path"]] = base64.b64decode(op["value"]["content"])
                elif op["key"] == "deletedFile":
                    self.server.files.pop(op["value"]["path"])
                elif op["key"] != "header":
                    raise AssertionError(f"unexpected commit operation {op['key']}")
            self._reply(
                200,
                {
                    "commitUrl": f"http://{self.headers['Host']}/datasets/{repo}/commit/{'c' * 40}",
                    "commitOid": "c" * 40,
                },
            )
        else:
            self._reply(404, {"error": f"not here: {path}"})


@pytest.fixture
def hub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    server.repo, server.requests, server.fail_with = "org/r1-distill-tiny", [], None
    server.files = {".gitattributes": b"*.parquet filter=lfs\n", "data/train-00000-of-00009.parquet": b"stale"}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _distill_subprocess(args: list, hub, tmp_path: Path, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    """`distill push` in a fresh interpreter: huggingface_hub reads HF_ENDPOINT and offline mode at import."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")}
    env.update(
        HF_ENDPOINT=f"http://127.0.0.1:{hub.server_address[1]}",
        HF_HOME=str(tmp_path / "hf-home"),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    if token:
        env["HF_TOKEN"] = token
    runner = textwrap.dedent("""
        from reasonkit import cli
        cli.main()
    """)
    return subprocess.run(
        [sys.executable, "-c", runner, "push", *map(str, args)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_upload_reaches_the_hub_intact(stages, tmp_path, hub):
    preview = tmp_path / "preview"
    out = _distill_subprocess(
        [stages, "--repo", "org/r1-distill-tiny", "--private", "--dry-run", preview], hub, tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert hub.requests == []  # a dry run makes no request at all

    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny", "--private"], hub, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pushed 6 files to http://127.0.0.1" in out.stdout and "removed 1 stale shard(s)" in out.stdout
    assert TOKEN not in out.stdout + out.stderr

    calls = [(r["method"], urlparse(r["path"]).path) for r in hub.requests]
    assert calls == [
        ("POST", "/api/repos/create"),
        ("GET", "/api/datasets/org/r1-distill-tiny/tree/main"),
        ("POST", "/api/validate-yaml"),
        ("POST", "/api/datasets/org/r1-distill-tiny/preupload/main"),
        ("POST", "/api/datasets/org/r1-distill-tiny/commit/main"),
    ]
    assert json.loads(hub.requests[0]["body"]) == {
        "name": "r1-distill-tiny",
        "organization": "org",
        "visibility": "private",
        "type": "dataset",
    }
    assert all(r["headers"].get("authorization") == f"Bearer {TOKEN}" for r in hub.requests)
    # Exactly the dry-run repository arrived (card, provenance, shards byte for byte), the stale
    # shard from an earlier push is gone and files that are not shards are left alone.
    assert hub.files == {".gitattributes": b"*.parquet filter=lfs\n", **folder_files(preview)}
    header = json.loads(hub.requests[-1]["body"].splitlines()[0])["value"]
    assert header["summary"] == "reasonkit push: filter (7 rows)"


def test_hub_refusal_is_one_line_without_token(stages, tmp_path, hub):
    hub.fail_with = 401
    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny"], hub, tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr == (
        "error: push to org/r1-distill-tiny failed: HTTP 401 Unauthorized: Invalid credentials in "
        "Authorization header; check that the token may write to this namespace\n"
    )
    assert TOKEN not in out.stdout + out.stderr
    paths = [urlparse(r["path"]).path for r in hub.requests]
    assert paths[0] == "/api/repos/create" and not any("/preupload/" in p or "/commit/" in p for p in paths)


def test_missing_token_uploads_nothing(stages, tmp_path, hub):
    out = _distill_subprocess([stages, "--repo", "org/r1-distill-tiny"], hub, tmp_path, token=None)
    assert out.returncode == 2 and out.stderr.startswith("error: no Hugging Face token")
    assert hub.requests == []
