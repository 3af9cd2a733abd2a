"""The generate stage on a local Ray cluster (2 CPUs): the hf and vLLM backends over 2 replicas
write the local engine's rows, and a driver SIGKILLed mid-run resumes from its committed shards."""

import re
import subprocess

import pytest

from reasonkit.gen.run import GenerateConfig, generate, make_backend
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import load_manifest

from ..helpers.gen import kill_after_first_shard, vllm_engine_for
from ..helpers.ray import distill, shard_stamps, stage_rows

pytestmark = pytest.mark.slow
# hf: seeds are per batch, so batch_size divides shard_size and both engines draw the same batches
HF = dict(backend="hf", n=2, max_tokens=24, shard_size=3, batch_size=3, dtype="float32", temperature=1.0)


def config(prompts, model, out, **kw):
    return GenerateConfig(prompts=str(prompts), teacher=model, out=str(out), **kw)


def assert_same_rows(local, ray):
    assert [(r["id"], r["sample"]) for r in stage_rows(ray)] == [(r["id"], r["sample"]) for r in stage_rows(local)]
    assert stage_rows(ray) == stage_rows(local)  # texts, token counts, provenance: everything


@pytest.fixture(scope="module")
def hf_local(tmp_path_factory, tiny_model_dir):
    """12 prompts generated locally with the hf backend: (prompts, output directory)."""
    work = tmp_path_factory.mktemp("hf-local")
    prompts = write_prompts(work / "p.parquet", 12, seed=4, variant="mul")
    generate(config(prompts, tiny_model_dir, work / "local", **HF))
    return prompts, work / "local"


def test_hf_backend_on_two_replicas_writes_the_local_rows(tmp_path, ray_cluster, tiny_model_dir, hf_local):
    prompts, local = hf_local
    manifest = generate(config(prompts, tiny_model_dir, tmp_path / "ray", **HF, engine="ray", replicas=2))
    assert manifest["complete"] and manifest["rows"] == 24 and len(manifest["shards"]) == 4
    assert manifest["backend_info"]["engine"] == "ray" and manifest["backend_info"]["backend"] == "hf"
    assert manifest["config_fingerprint"] == load_manifest(local)["config_fingerprint"]
    assert_same_rows(local, tmp_path / "ray")


def test_vllm_backend_on_two_replicas_writes_the_local_rows(tmp_path, ray_cluster, tiny_model_dir):
    prompts = write_prompts(tmp_path / "p.parquet", 8, seed=6, variant="aime")
    settings = dict(
        backend="vllm", n=2, max_tokens=32, shard_size=2, dtype="float32", max_model_len=512, temperature=1.0
    )
    local = config(prompts, tiny_model_dir, tmp_path / "local", **settings)
    with vllm_engine_for(tiny_model_dir, 512) as llm:  # shut down before the replicas start theirs
        generate(local, backend=make_backend(local, llm=llm))
    manifest = generate(config(prompts, tiny_model_dir, tmp_path / "ray", **settings, engine="ray", replicas=2))
    assert manifest["complete"] and manifest["rows"] == 16 and manifest["backend_info"]["backend"] == "vllm"
    assert_same_rows(tmp_path / "local", tmp_path / "ray")


def test_driver_killed_mid_run_resumes_from_committed_shards(tmp_path, ray_cluster, tiny_model_dir, hf_local):
    prompts, local = hf_local
    out = tmp_path / "ray"
    # one replica: shards finish one after another, so the kill lands with some still owed
    cmd = distill(
        "generate",
        [
            "--prompts",
            str(prompts),
            "--teacher",
            tiny_model_dir,
            "--out",
            str(out),
            "--backend",
            "hf",
            "--n",
            "2",
            "--max-tokens",
            "24",
            "--shard-size",
            "3",
            "--batch-size",
            "3",
            "--dtype",
            "float32",
            "--temperature",
            "1.0",
            "--engine",
            "ray",
            "--replicas",
            "1",
            "--ray-address",
            ray_cluster,
        ],
    )
    killed = kill_after_first_shard(cmd, out, tmp_path / "killed.log")
    committed = shard_stamps(out)
    assert 1 <= len(committed) < 4 and not killed["complete"]
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    owed = re.search(r"ray: (\d+) shards to generate \((\d+) committed earlier\) on 1 replica\b", rerun.stderr)
    assert owed and (int(owed[1]), int(owed[2])) == (4 - len(committed), len(committed)), rerun.stderr[-2000:]
    after = shard_stamps(out)
    assert {name: after[name] for name in committed} == committed  # never rewritten, never recomputed
    assert len(after) == 4 and load_manifest(out)["complete"]
    assert_same_rows(local, out)
