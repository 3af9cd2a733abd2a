"""``distill generate --logprobs K`` through the three backends, on the embedded teacher: vLLM's engine
(the session's), vLLM's OpenAI-compatible server (the session's) and transformers. Greedy, so the
three draw the same tokens and their top-K must agree."""

import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.gen.run import GenerateConfig, generate, make_backend
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import read_stage

K = 5


def logprob_config(prompts, model, out, backend, **kw):
    base = dict(
        prompts=str(prompts),
        teacher=model,
        out=str(out),
        backend=backend,
        n=1,
        max_tokens=160,
        shard_size=4,
        dtype="float32",
        temperature=0.0,
        prefill_think=True,
        logprobs=K,
    )
    return GenerateConfig(**{**base, **kw})


def check_rows(out) -> list[dict]:
    """Every completion token has its sampled id and K targets, most likely first, the greedy token on top."""
    table = read_stage(out, kind="traces")
    assert table.schema.field("logprobs").type.value_type.value_type.bit_width == 16  # float16 (schema.py)
    rows = sorted(table.to_pylist(), key=lambda r: r["id"])
    for r in rows:
        assert len(r["completion_ids"]) == len(r["logprob_ids"]) == len(r["logprobs"]) == r["completion_tokens"] > 0
        for sampled, ids, lps in zip(r["completion_ids"], r["logprob_ids"], r["logprobs"]):
            assert len(ids) == len(lps) == K and lps == sorted(lps, reverse=True) and lps[0] <= 0
            assert ids[0] == sampled  # greedy: the sampled token is the most likely one
    return rows


@pytest.fixture(scope="module")
def engine_rows(tmp_path_factory, vllm_engine, gen_model):
    tmp = tmp_path_factory.mktemp("logprobs")
    prompts = write_prompts(tmp / "p.parquet", 6, seed=4, variant="mul")
    cfg = logprob_config(prompts, gen_model, tmp / "vllm", "vllm", max_model_len=512)
    manifest = generate(cfg, backend=make_backend(cfg, llm=vllm_engine))
    assert manifest["config"]["logprobs"] == K  # part of the rows' fingerprint
    return prompts, check_rows(tmp / "vllm"), tmp / "vllm"


def same_targets(a: list[dict], b: list[dict], tol: float = 2e-2) -> None:
    assert [r["completion_ids"] for r in a] == [r["completion_ids"] for r in b]
    for x, y in zip(a, b):
        assert [ids[0] for ids in x["logprob_ids"]] == [ids[0] for ids in y["logprob_ids"]]
        for p, q in zip(x["logprobs"], y["logprobs"]):
            assert p[0] == pytest.approx(q[0], abs=tol)


@pytest.mark.slow
def test_vllm_engine_stores_the_top_k(engine_rows):
    _, rows, _ = engine_rows
    assert len(rows) == 6


@pytest.mark.slow
def test_openai_backend_stores_the_same_top_k(engine_rows, vllm_server, tmp_path):
    prompts, rows, _ = engine_rows
    url, model = vllm_server
    generate(logprob_config(prompts, model, tmp_path / "api", "openai", base_url=url, dtype="auto"))
    same_targets(check_rows(tmp_path / "api"), rows)


@pytest.mark.slow
def test_hf_backend_stores_the_same_top_k(engine_rows, gen_model, tmp_path):
    prompts, rows, _ = engine_rows
    generate(logprob_config(prompts, gen_model, tmp_path / "hf", "hf", max_model_len=512))
    same_targets(check_rows(tmp_path / "hf"), rows)


@pytest.mark.slow
def test_the_filter_carries_the_columns_into_kept_and_sft(engine_rows, tmp_path):
    from reasonkit.filters.config import FilterConfig
    from reasonkit.filters.run import run_filter

    _, rows, traces = engine_rows
    run_filter(
        FilterConfig(traces=str(traces), out=str(tmp_path / "f"), verifier="int", workers=1, lang="none", decontam=())
    )
    kept = {r["id"]: r for r in read_stage(tmp_path / "f", kind="verdicts").to_pylist()}
    sft = {r["id"]: r for r in pq.read_table(tmp_path / "f" / "sft").to_pylist()}
    assert kept and set(sft) == set(kept)
    by_id = {r["id"]: r for r in rows}
    for pid, r in sft.items():
        for name in ("completion_ids", "logprob_ids"):
            assert r[name] == kept[pid][name] == by_id[pid][name]


def test_logprobs_need_k_and_no_tools(tmp_path):
    with pytest.raises(UserError, match=r"logprobs: expected at least 1, .* found 0"):
        GenerateConfig(prompts="p", teacher="t", out=str(tmp_path), logprobs=0)
    with pytest.raises(UserError, match="no --tools"):
        GenerateConfig(prompts="p", teacher="t", out=str(tmp_path), logprobs=5, tools="python")
    with pytest.raises(UserError, match="at most max_logprobs 20"):
        GenerateConfig(prompts="p", teacher="t", out=str(tmp_path), logprobs=21)
    assert GenerateConfig(prompts="p", teacher="t", out=str(tmp_path), logprobs=32, engine_args={"max_logprobs": 32})
