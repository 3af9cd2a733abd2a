"""The README's main job, `distill quickstart`, at full size (the session's one run, tests/conftest.py):
its headline figures reproduce, the terminal shows steps and figures (library logs go to each step's
run.log), the report says how far DPO moved the student, and a rerun skips every step."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# the session's full quickstart (~9 minutes): outside the fast lane
pytestmark = pytest.mark.slow

STEPS = 17
EVALS = ("eval_teacher", "eval_student_before", "eval_student_sft", "eval_student_dpo", "eval_student_grpo")


def pass_at_1(out: Path, step: str) -> float:
    summary = json.loads((out / step / "summary.json").read_text())
    k = 1 if step == "eval_student_before" else 8  # a random student: one sample a problem shows it answers nothing
    assert summary["n_problems"] == 200 and summary["n_samples"] == 200 * k, step  # 200 held-out problems x k
    return summary["pass@1"]


def test_the_student_learns_as_the_readme_says(quickstart):
    out = quickstart.out
    state = json.loads((out / "_recipe_state.json").read_text())
    assert len(state) == STEPS and all(record["done"] for record in state.values())
    # Measured (issue 36; README's table), pass@1 over 8 samples of 200 held-out problems, bench/quickstart_spread.py:
    # on a 2-core AMD EPYC Zen 4 (AVX-512), seed 0 (this test's): teacher 0.932, SFT 0.916, DPO 0.915, GRPO 0.918
    # with its own kernels (the same from a fresh clone); 0.932, 0.936, 0.936, 0.936 with torch/oneDNN/MKL/vLLM held
    # to AVX2 (what a Zen 3 runs). Over seeds 0-2 the SFT student ranged 0.866-0.937: it still moves with the seed more
    # than the 0.03 issue 36 asks. The bars are the lowest SFT figure less a few samples, and the teacher's less 0.03:
    # a student that learned (it starts at 0.000) on every setting and seed measured.
    figures = {step: pass_at_1(out, step) for step in EVALS}
    assert figures["eval_teacher"] >= 0.90, figures
    assert figures["eval_student_before"] <= 0.02, figures
    assert figures["eval_student_sft"] >= 0.83, figures
    assert figures["eval_student_dpo"] >= 0.83, figures
    assert figures["eval_student_grpo"] >= 0.83, figures
    report = (out / "report.md").read_text()
    for heading in (
        "## Steps",
        "filter funnel",
        "SFT training",
        "DPO training",
        "GRPO training",
        "## Evaluation",
        "## Paired comparisons",
        "eval_student_grpo - eval_student_sft: ",
    ):
        assert heading in report, heading
    for step in EVALS:
        assert f"| {step} |" in report
    assert (out / "pass_at_k.png").is_file() and (out / "funnel_verified.png").is_file()


def test_the_report_says_dpo_barely_moved_the_student(quickstart):
    """lr 5e-5 for one epoch (5 steps) on a zero-initialised LoRA: the recipe's report gives the
    measured movement (mean |log pi/pi_ref| a token; measured 0.0003 chosen, 0.001 rejected) and
    says it was little."""
    from reasonkit.distill.dpo_movement import movement_line

    train_report = json.loads((quickstart.out / "dpo" / "report.json").read_text())
    last = train_report["history"][-1]
    assert last["log_ratio_chosen"] > 0 and last["log_ratio_rejected"] > 0, last
    line = movement_line(train_report)
    assert line.startswith("DPO moved the model little") and line in (quickstart.out / "report.md").read_text()


def test_the_terminal_shows_steps_not_library_logs(quickstart):
    terminal = quickstart.process.stdout + quickstart.process.stderr
    assert terminal.count("[done]") == STEPS
    chatter = [line for line in terminal.splitlines() if " INFO " in line or " WARNING " in line]
    assert len(chatter) <= 5, chatter[:10]
    assert (quickstart.out / "traces" / "run.log").is_file(), "vLLM's lines went to the step's log"


def test_a_rerun_skips_every_step(quickstart):
    args = [str(Path(sys.executable).parent / "distill"), "quickstart", "--out", str(quickstart.out)]
    again = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("[skip]") == STEPS, again.stdout


def test_grpo_keeps_its_rollouts_and_is_compared_with_sft(quickstart):
    """30 GRPO steps of 8 prompts x 8 samples: every sampled completion is a row of grpo/rollouts
    (a traces stage directory), and report.md holds the paired comparison GRPO - SFT."""
    from reasonkit.store import read_stage

    rollouts = read_stage(quickstart.out / "grpo" / "rollouts")
    assert rollouts.num_rows == 30 * 64
    assert sorted(set(rollouts.column("step").to_pylist())) == list(range(1, 31))
    report = json.loads((quickstart.out / "grpo" / "report.json").read_text())
    assert report["steps"] == 30 and report["method"] == "grpo"
    assert "rewards (first step -> last steps): accuracy" in (quickstart.out / "report.md").read_text()
    text = (quickstart.out / "report.md").read_text().split("## Paired comparisons")[1]
    assert "paired bootstrap over 200 problems" in text
