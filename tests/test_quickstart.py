"""The shipped quickstart recipe end to end, shrunk by --set overrides (the full-size run is the
README's main job; its figures are in the issue notes)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = [
    "train_problems.n=40", "eval_problems.n=8",
    "traces.backend=hf", "student_samples.backend=hf",
    "sft.epochs=1", "dpo.epochs=1",
    # one SFT epoch leaves a student with no correct samples, so no pairs: let the teacher sample
    "student_samples.teacher=${reasonkit}/recipes/assets/teacher",
    *(f"{step}.backend=hf" for step in ("eval_teacher", "eval_student_before", "eval_student_sft", "eval_student_dpo")),
    *(f"{step}.k=2" for step in ("eval_teacher", "eval_student_before", "eval_student_sft", "eval_student_dpo")),
]


def test_quickstart_runs_every_step_writes_the_report_and_resumes(tmp_path):
    out = tmp_path / "qs"
    args = [str(Path(sys.executable).parent / "distill"), "quickstart", "--out", str(out)]
    for item in SMALL:
        args += ["--set", item]
    first = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    state = json.loads((out / "_recipe_state.json").read_text())
    assert all(record["done"] for record in state.values()) and len(state) == 14
    report = (out / "report.md").read_text()
    for heading in ("## Steps", "filter funnel", "SFT training", "DPO training", "## Evaluation"):
        assert heading in report, heading
    for name in ("eval_teacher", "eval_student_before", "eval_student_sft", "eval_student_dpo"):
        assert f"| {name} |" in report
        assert json.loads((out / name / "summary.json").read_text())["n_problems"] == 8
    assert (out / "pass_at_k.png").is_file() and (out / "funnel_verified.png").is_file()
    teacher = json.loads((out / "eval_teacher" / "summary.json").read_text())
    assert teacher["pass@1"] > 0.2

    again = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("[skip]") == 14, again.stdout
