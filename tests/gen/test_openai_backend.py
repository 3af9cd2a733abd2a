"""The OpenAI-compatible backend against a real vLLM server on loopback, through a proxy that
injects 429 (Retry-After), 500, stalls past the client timeout, slow answers, dropped
connections and truncated responses; and the SIGKILL resume test for this backend."""

import subprocess
import time
from pathlib import Path

import pytest

from reasonkit.gen.run import GenerateConfig, generate
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import load_manifest, read_stage

from ..helpers.gen import (
    FaultProxy,
    check_resumed_equals_whole,
    distill_generate,
    kill_after_first_shard,
    rows,
)

pytestmark = pytest.mark.slow
TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"


def openai_config(prompts, url, model, out, **kw):
    base = dict(
        prompts=str(prompts),
        teacher=model,
        out=str(out),
        backend="openai",
        base_url=url,
        n=2,
        max_tokens=24,
        shard_size=3,
        concurrency=4,
    )
    return GenerateConfig(**{**base, **kw})


def test_openai_backend_writes_traces(tmp_path, vllm_server):
    url, model = vllm_server
    prompts = write_prompts(tmp_path / "p.parquet", 5, seed=3, variant="mul")
    manifest = generate(openai_config(prompts, url, model, tmp_path / "out", n=3, prefill_think=True))
    assert manifest["complete"] and manifest["rows"] == 15
    info = manifest["backend_info"]
    assert info["server"] == "vllm" and info["requests"] == 5 and not info["split_n"]  # n in one request
    for r in read_stage(tmp_path / "out", kind="traces").to_pylist():
        assert 0 < r["completion_tokens"] <= 24 and r["prompt_tokens"] > 10
        assert r["reasoning"] is not None  # the assistant turn was prefilled with <think>


def test_faults_are_retried_and_every_row_lands_once(tmp_path, vllm_server):
    url, model = vllm_server
    prompts = write_prompts(tmp_path / "p.parquet", 8, seed=4, variant="aime")
    clean = generate(openai_config(prompts, url, model, tmp_path / "clean"))
    schedule = ("429", "ok", "500", "drop", "ok", "slow", "truncate", "ok", "stall", "ok")
    proxy = FaultProxy(url, schedule)
    try:
        faulty = generate(openai_config(prompts, proxy.url, model, tmp_path / "faulty", request_timeout=2.0))
    finally:
        proxy.close()
    for fault in ("429", "500", "drop", "slow", "truncate", "stall"):
        assert proxy.counts.get(fault, 0) >= 1, proxy.counts
    assert faulty["backend_info"]["retries"] >= sum(
        proxy.counts.get(f, 0) for f in ("429", "500", "drop", "truncate", "stall")
    )
    check_resumed_equals_whole(tmp_path / "clean", tmp_path / "faulty", 8, 2)
    assert clean["gen_config"] == faulty["gen_config"]  # the URL is not part of what a row says


def test_server_refusing_n_gets_one_request_per_sample(tmp_path, vllm_server):
    url, model = vllm_server
    prompts = write_prompts(tmp_path / "p.parquet", 4, seed=5, variant="mul")
    generate(openai_config(prompts, url, model, tmp_path / "n"))

    class RefuseN(FaultProxy):  # answers 400 param=n to any request asking for several choices
        async def forward(self, lines, body):
            if b'"n":2' in body.replace(b" ", b""):
                return self.reply(400, b'{"error": {"message": "n must be 1", "param": "n", "code": 400}}')
            return await super().forward(lines, body)

    proxy = RefuseN(url)
    try:
        manifest = generate(openai_config(prompts, proxy.url, model, tmp_path / "split"))
    finally:
        proxy.close()
    assert manifest["backend_info"]["split_n"]
    # sample k is seeded seed + k either way, as vLLM seeds its k-th child: the same texts
    check_resumed_equals_whole(tmp_path / "n", tmp_path / "split", 4, 2)


def test_401_stops_at_once_with_the_variable_named_and_the_key_unlogged(tmp_path, vllm_server, monkeypatch):
    from click.testing import CliRunner

    from reasonkit.gen.command import generate as command

    url, model = vllm_server
    monkeypatch.setenv("RK_TEST_KEY", "sk-very-secret-value")
    proxy = FaultProxy(url, status=401)
    try:
        prompts = write_prompts(tmp_path / "p.parquet", 2, seed=0)
        start = time.monotonic()
        result = CliRunner().invoke(
            command,
            [
                "--prompts",
                prompts,
                "--teacher",
                model,
                "--out",
                str(tmp_path / "o"),
                "--backend",
                "openai",
                "--base-url",
                proxy.url,
                "--api-key-env",
                "RK_TEST_KEY",
            ],
        )
    finally:
        proxy.close()
    assert result.exit_code == 2 and "401 unauthorized; set $RK_TEST_KEY" in result.output
    assert "sk-very-secret" not in result.output and time.monotonic() - start < 10 and proxy.counts["401"] == 1


def test_sigkill_then_rerun_equals_an_uninterrupted_run(tmp_path, vllm_server):
    url, model = vllm_server
    prompts = write_prompts(tmp_path / "p.parquet", 16, seed=6, variant="aime")
    whole = generate(
        openai_config(prompts, url, model, tmp_path / "whole", max_tokens=64, shard_size=2, concurrency=2)
    )
    out = tmp_path / "killed"
    cmd = distill_generate(
        [
            "--prompts",
            str(prompts),
            "--teacher",
            model,
            "--out",
            str(out),
            "--backend",
            "openai",
            "--base-url",
            url,
            "--n",
            "2",
            "--max-tokens",
            "64",
            "--shard-size",
            "2",
            "--concurrency",
            "2",
        ]
    )
    killed = kill_after_first_shard(cmd, out, tmp_path / "killed.log")
    assert not killed["complete"] and 0 < killed["rows"] < 32, killed
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    check_resumed_equals_whole(tmp_path / "whole", out, 16, 2)
    assert load_manifest(out)["config_fingerprint"] == whole["config_fingerprint"]
    assert rows(out)[0]  # readable with allow_incomplete as well
