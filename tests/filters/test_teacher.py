"""The filter on traces shaped by, and generated with, the embedded tiny teacher."""

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.recipes.tasks import math as task
from reasonkit.store import read_stage

from ..helpers.synthetic import trace, write_traces

TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"


def test_worked_solutions_with_slips(tmp_path):
    """The teacher's training format (task.solution), with arithmetic slips as a sampled teacher makes."""
    rng = random.Random(0)
    rows = []
    for p in task.make_problems(20, seed=0, variant="aime"):
        for s in range(4):
            text = task.solution(p)
            if rng.random() < 0.3:  # a slip in the final answer
                text = text.replace(f"\\boxed{{{p['answer']}}}", f"\\boxed{{{(int(p['answer']) + 7) % 1000}}}")
            reasoning, response = text.split("</think>")
            rows.append(
                trace(
                    p["id"],
                    s,
                    problem=p["problem"],
                    completion=text,
                    reasoning=reasoning.removeprefix("<think>").strip(),
                    response=response.strip(),
                    answer=p["answer"],
                    source=p["source"],
                )
            )
    write_traces(tmp_path / "traces", rows, shard_rows=16)
    report = run_filter(
        FilterConfig(traces=str(tmp_path / "traces"), out=str(tmp_path / "out"), workers=1, keep_per_prompt=1)
    )
    funnel = {s["reason"]: s["dropped"] for s in report["funnel"]}
    assert funnel["wrong"] == report["verified"]["wrong"] > 0
    assert report["rows_out"] == 20  # every prompt has a correct sample; identical ones are duplicates
    assert report["rows_in"] - sum(funnel.values()) == report["rows_out"]
    sft = read_stage(tmp_path / "out" / "sft", kind="sft")
    assert all(m[-1]["content"].startswith("<think>\n") for m in sft.column("messages").to_pylist())


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return str(TEACHER) if (TEACHER / "config.json").is_file() else tiny_model_dir


def test_traces_generated_by_the_teacher(tmp_path, model):
    from reasonkit.filters.command import filter as filter_command
    from reasonkit.gen.command import generate

    prompts = task.write_prompts(tmp_path / "p.parquet", 8, seed=0, variant="aime")
    args = [
        "--prompts",
        prompts,
        "--teacher",
        model,
        "--out",
        str(tmp_path / "traces"),
        "--backend",
        "hf",
        "--n",
        "2",
        "--max-tokens",
        "192",
        "--batch-size",
        "4",
        "--dtype",
        "float32",
    ]
    generated = CliRunner().invoke(generate, args)
    assert generated.exit_code == 0, generated.output
    result = CliRunner().invoke(
        filter_command,
        [str(tmp_path / "traces"), "--out", str(tmp_path / "out"), "--workers", "1", "--keep-per-prompt", "1", "-q"],
    )
    assert result.exit_code == 0, result.output
    kept, rejected = (
        read_stage(tmp_path / "out", kind="verdicts"),
        read_stage(tmp_path / "out" / "rejected", kind="verdicts"),
    )
    assert kept.num_rows + rejected.num_rows == 16
    assert all(r is not None for r in rejected.column("drop_reason").to_pylist())
    if model == str(TEACHER):  # a trained teacher gets some right
        assert kept.num_rows > 0 and all(kept.column("correct").to_pylist())
