"""The filter stage on a local Ray cluster (2 CPUs): the local engine's rows exactly, in its
order, with 2 replicas; and a replica SIGKILLed in the middle of a shard costs nothing."""

import functools
import json
from pathlib import Path

import pytest

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import WORK, run_filter
from reasonkit.gen.run import GenerateConfig, generate
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import load_manifest

from ..helpers.ray import filters_that_kill_once, ship_to_workers, stage_rows
from ..helpers.synthetic import synthetic_rows, write_traces

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_traces(tiny_model_dir, tmp_path_factory) -> str:
    """Traces of the tiny model (transformers backend, local): 12 prompts x 2 samples in 4 shards."""
    work = tmp_path_factory.mktemp("tiny-traces")
    prompts = write_prompts(work / "p.parquet", 12, seed=3, variant="mul")
    out = work / "traces"
    generate(
        GenerateConfig(
            prompts=prompts,
            teacher=tiny_model_dir,
            out=str(out),
            backend="hf",
            n=2,
            max_tokens=24,
            shard_size=3,
            dtype="float32",
            batch_size=3,
            temperature=1.0,
        )
    )
    return str(out)


def filter_config(traces, out, **kw):
    return FilterConfig(**{**dict(traces=str(traces), out=str(out), verifier="int", workers=1, batch_rows=4), **kw})


def assert_same_output(local, ray):
    """Kept, rejected and sft rows equal *in committed order*, the same shards, the same funnel."""
    for sub in ("", "rejected", "sft"):
        assert stage_rows(Path(ray) / sub, sort=None) == stage_rows(Path(local) / sub, sort=None), sub or "kept"
        shards = lambda d: [s["rows"] for s in load_manifest(Path(d) / sub)["shards"]]  # noqa: E731
        assert shards(ray) == shards(local)
        assert load_manifest(Path(ray) / sub)["complete"]
    report = lambda d: {k: v for k, v in json.loads((Path(d) / "report.json").read_text()).items() if k != "seconds"}  # noqa: E731
    assert report(ray) == report(local)
    assert not (Path(ray) / WORK).exists()


def test_tiny_teacher_traces_filter_on_ray_as_locally(tmp_path, ray_cluster, tiny_traces):
    local = run_filter(filter_config(tiny_traces, tmp_path / "local", lang=None))
    ray = run_filter(filter_config(tiny_traces, tmp_path / "ray", lang=None, engine="ray", replicas=2))
    assert ray["rows_in"] == local["rows_in"] == 24
    assert_same_output(tmp_path / "local", tmp_path / "ray")


def duplicated_traces(path) -> str:
    """Synthetic traces (30% wrong answers) where each prompt's last sample repeats its first:
    which copy dedup keeps, and what --keep-per-prompt selects, depend on the row order."""
    rows = synthetic_rows(16, "int", samples=3, seed=5)
    for i in range(2, len(rows), 3):
        donor = rows[i - 2]
        rows[i] = {**rows[i], **{k: donor[k] for k in ("completion", "reasoning", "response")}}
    write_traces(path, rows, shard_rows=8)
    return str(path)


def test_worker_killed_mid_shard_is_retried_without_loss_or_duplicates(tmp_path, ray_cluster, monkeypatch):
    from reasonkit.filters import ray_engine

    traces = duplicated_traces(tmp_path / "traces")
    settings = dict(keep_per_prompt=1, select="random", lang="en")
    run_filter(filter_config(traces, tmp_path / "local", **settings))
    marker = tmp_path / "killed.pid"
    ship_to_workers()
    # run_filter's own call of pass 1, with replicas whose filters include one that kills its worker
    monkeypatch.setattr(
        ray_engine,
        "pass1_on_ray",
        functools.partial(ray_engine.pass1_on_ray, make_filters=filters_that_kill_once(str(marker))),
    )
    run_filter(filter_config(traces, tmp_path / "ray", engine="ray", replicas=2, **settings))
    assert marker.is_file(), "no replica was killed: the test did not test anything"
    assert_same_output(tmp_path / "local", tmp_path / "ray")
    kept = stage_rows(tmp_path / "ray")
    assert 0 < len(kept) < 48 and len({(r["id"], r["sample"]) for r in kept}) == len(kept)
    reasons = {r["drop_reason"] for r in stage_rows(tmp_path / "ray" / "rejected")}
    assert {"duplicate", "wrong", "not_selected"} <= reasons  # the order-dependent decisions were made
