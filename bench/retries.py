"""Benchmark: the OpenAI client's own retries against gen/retry.py's policy, on a failing server.

    python bench/retries.py

A loopback server answers every request 503 (an outage), then 429 with ``Retry-After: 180`` (a
rate-limit window). The OpenAI client (``max_retries=10``) is timed until it gives up; our policy's
waits are drawn by the same tenacity loop the backend runs (recorded, not slept). Measured here
with openai 3.57 and tenacity 9.2: the client gives up after 48-50 s of the outage (waits 0.5,
0.8, 1.9, 3.6, then 6-8 s: capped at 8 s) and does not retry the 429 at all (it honours Retry-After
up to 120 s); ours waits up to 60 s per retry (148 s in all on average over 200 draws) and
waits the 180 s the server asked for.
That is why gen/openai_backend.py turns the client's retries off and retries with tenacity.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import statistics
import threading
import time

MODES = [(503, {}), (429, {"retry-after": "180"})]


def serve(mode: list, hits: list) -> str:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            hits.append(time.monotonic())
            self.rfile.read(int(self.headers.get("content-length", 0)))
            code, headers = mode[0]
            body = json.dumps({"error": {"message": "busy"}}).encode()
            self.send_response(code)
            for key, value in {
                **headers,
                "content-type": "application/json",
                "content-length": str(len(body)),
            }.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def client_side(url: str, mode: list, hits: list) -> None:
    import openai

    for current in MODES:
        mode[0] = current
        hits.clear()
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=10)
        start = time.monotonic()
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.APIStatusError:
            pass
        gaps = [round(b - a, 1) for a, b in zip(hits, hits[1:])]
        print(
            f"openai client, {current[0]} {current[1] or ''}: {len(hits)} attempts, gave up after "
            f"{time.monotonic() - start:.1f} s; waits {gaps}"
        )


def ours(url: str, mode: list, runs: int = 200) -> None:
    import openai

    from reasonkit.gen.retry import RetryPolicy

    for current in MODES:
        mode[0] = current
        totals = []
        for _ in range(runs if current[0] == 503 else 1):
            waits: list[float] = []

            async def record(seconds: float) -> None:
                waits.append(seconds)

            async def call():
                client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
                try:
                    async for attempt in RetryPolicy(max_retries=10).retrying(sleep=record):
                        with attempt:
                            await client.chat.completions.create(
                                model="m", messages=[{"role": "user", "content": "hi"}]
                            )
                except openai.APIStatusError:
                    pass
                finally:
                    await client.close()

            asyncio.run(call())
            totals.append(sum(waits))
        print(
            f"reasonkit policy, {current[0]} {current[1] or ''}: {len(waits) + 1} attempts, waits in all "
            f"{statistics.mean(totals):.0f} s on average over {len(totals)} runs; last run's "
            f"{[round(w, 1) for w in waits]}"
        )


if __name__ == "__main__":
    mode, hits = [MODES[0]], []
    url = serve(mode, hits)
    client_side(url, mode, hits)
    ours(url, mode)
