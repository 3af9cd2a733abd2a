"""Step-DPO pairs in TRL's string prefs format: read by `distill train --method dpo`, linted as TRL
tokenizes them, and really trained on (tiny, a few steps)."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from reasonkit.distill.data import load_rows
from reasonkit.errors import UserError
from reasonkit.judges.steps.run import STEP_DPO
from reasonkit.judges.steps.text import step_dpo_pair
from reasonkit.recipes.tasks.math import render, solution
from reasonkit.reward.steps import solution_body, split_steps
from reasonkit.store import StageWriter

from ...helpers.steps import corrupt, problems, reasoning_lines


def step_pairs(n: int) -> list[dict]:
    """The pair label-steps derives for each task solution whose third line is wrong, given that a
    rollout from after line 2 wrote the correct line 3 and reached the answer."""
    pairs = []
    for p in problems(n):
        bad = corrupt(solution(p), 3)
        steps = split_steps(solution_body({"completion": bad})[0])
        good = reasoning_lines(solution(p))
        row = {
            "id": p["id"],
            "sample": 0,
            "prompt": render(p, with_solution=False) + "<think>\n",
            "completions": steps,
            "labels": [True, True] + [False] * (len(steps) - 2),
            "next_steps": [[good[0]], [good[1]], [good[2]]] + [[]] * (len(steps) - 3),
        }
        pair, why = step_dpo_pair(row)
        assert why is None
        pairs.append(pair)
    return pairs


def test_string_prefs_are_a_dpo_table():
    table = pa.Table.from_pylist(step_pairs(2), schema=STEP_DPO)
    loaded = load_rows(table, "dpo", "step_dpo")
    assert loaded.schema.field("prompt").type == pa.string() and loaded.num_rows == 2
    # the formats mixed: a string prompt with a conversational chosen
    bad = pa.table(
        {
            "prompt": ["p"],
            "chosen": [[{"role": "assistant", "content": "a"}]],
            "rejected": ["b"],
            "id": ["x"],
            "strategy": ["s"],
        }
    )
    with pytest.raises(
        UserError, match="t: column 'chosen' has type list<struct<role: string, content: string>>, expected string"
    ):
        load_rows(bad, "dpo", "t")


def test_lint_reads_string_pairs_as_trl_does(teacher_dir):
    """The trained tokens of a string pair are the step and the EOS TRL appends, not the prompt."""
    from transformers import AutoTokenizer

    from reasonkit.distill.lint.checks import trained_sequences

    tok = AutoTokenizer.from_pretrained(teacher_dir)
    (pair,) = step_pairs(1)
    sides = list(trained_sequences(tok, pair, "dpo"))
    assert [tok.decode(trained) for _, trained, *_ in sides] == [
        pair["chosen"] + "<|end|>",
        pair["rejected"] + "<|end|>",
    ]


@pytest.mark.slow
def test_dpo_trains_on_step_pairs(tmp_path, teacher_dir):
    data = tmp_path / "step_dpo"
    writer = StageWriter(data, stage="label-steps", kind="prefs_text", config={}, keys=("id", "sample"))
    writer.commit(pa.Table.from_pylist(step_pairs(8), schema=STEP_DPO))
    writer.finish()
    out = tmp_path / "dpo"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "distill"),
            "train",
            "--method",
            "dpo",
            "--student",
            teacher_dir,
            "--data",
            str(data),
            "--out",
            str(out),
            "--max-steps",
            "4",
            "--batch-size",
            "4",
            "--lr",
            "1e-3",
            "--set",
            "lint=error",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["rows"] == 8 and report["steps"] == 4 and report["lint"] == []
    assert report["loss_final"] < report["loss_first"]  # the policy moved toward the correct steps
    assert report["reward_margin"] > 0
