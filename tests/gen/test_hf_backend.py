"""The transformers backend for real, on the embedded teacher (or a random tiny model before it exists)."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.gen.command import generate
from reasonkit.recipes.tasks.math import write_prompts
from reasonkit.store import load_manifest, read_stage

from ..helpers.gen import check_cut_off_reasoning, think_opening_template

TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return str(TEACHER) if (TEACHER / "config.json").is_file() else tiny_model_dir


def test_hf_backend_writes_traces_and_resumes(tmp_path, model):
    prompts = write_prompts(tmp_path / "p.parquet", 6, seed=0, variant="aime")
    args = [
        "--prompts",
        prompts,
        "--teacher",
        model,
        "--out",
        str(tmp_path / "out"),
        "--backend",
        "hf",
        "--n",
        "2",
        "--max-tokens",
        "192",
        "--shard-size",
        "4",
        "--batch-size",
        "2",
        "--dtype",
        "float32",
    ]
    first = CliRunner().invoke(generate, args)
    assert first.exit_code == 0, first.output
    assert "generate: 12 rows (6 prompts)" in first.output  # the summary line
    manifest = load_manifest(tmp_path / "out")
    assert manifest["complete"] and manifest["rows"] == 12 and len(manifest["shards"]) == 2
    assert manifest["backend_info"]["backend"] == "hf"
    t = read_stage(tmp_path / "out", kind="traces")
    rows = t.to_pylist()
    # the teacher by content, not by this machine's path: NAME@sha256:<16 hex> of its weights
    identity = manifest["config"]["teacher_identity"]
    assert identity.startswith("sha256:") and {r["teacher"] for r in rows} == {f"{Path(model).name}@{identity[:23]}"}
    assert {r["sample"] for r in rows} == {0, 1}
    for r in rows:
        assert r["finish_reason"] in ("stop", "length")
        assert 0 < r["completion_tokens"] <= 192 and r["prompt_tokens"] > 10
        assert r["answer"] is not None
        if r["finish_reason"] == "length":
            assert r["completion_tokens"] == 192
    if model == str(TEACHER):  # a trained teacher reasons and answers in the box
        assert sum(r["reasoning"] is not None and "\\boxed{" in r["response"] for r in rows) >= len(rows) // 2

    again = CliRunner().invoke(generate, args)  # nothing left to do: same rows, still complete
    assert again.exit_code == 0, again.output
    assert read_stage(tmp_path / "out").num_rows == 12 and load_manifest(tmp_path / "out")["complete"]


def test_a_template_that_opens_think_makes_a_cut_off_sample_reasoning(tmp_path, model):
    """The backend sees the rendered prompt: a template ending in <think> (R1's) without
    --prefill-think still splits a truncated sample as reasoning (it was a response before)."""
    template = think_opening_template(model, tmp_path / "opens.jinja")
    prompts = write_prompts(tmp_path / "p.parquet", 3, seed=0, variant="aime")
    result = CliRunner().invoke(
        generate,
        [
            "--prompts",
            prompts,
            "--teacher",
            model,
            "--out",
            str(tmp_path / "out"),
            "--backend",
            "hf",
            "--n",
            "2",
            "--max-tokens",
            "12",
            "--dtype",
            "float32",
            "--chat-template",
            template,
        ],
    )
    assert result.exit_code == 0, result.output
    check_cut_off_reasoning(tmp_path / "out")
