"""`distill train --method grpo` killed with SIGKILL after its first checkpoint, rerun with --resume: it ends at
the same final step, its rollouts hold every step once (the killed run's rows after the checkpoint are
dropped and sampled again), and the report's history is whole."""

import json
import signal
import sys
from collections import Counter

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.store import load_manifest, read_stage

from ..test_train_resume import kill_after_first_checkpoint
from .test_grpo import settings, write_prompts

STEPS, SAVE, BATCH = 4, 2, 8


def past_the_checkpoint(out):
    """Once checkpoint-SAVE is complete and the rollouts of step SAVE + 1 are committed too (the killed run
    commits every step), so the resumed run has rows of a step it retrains to drop."""

    def ready() -> bool:
        try:
            rows = json.loads((out / "rollouts" / "_manifest.json").read_text())["rows"]
        except (OSError, ValueError):
            return False
        return (out / "checkpoints" / f"checkpoint-{SAVE}" / "trainer_state.json").exists() and rows >= (
            SAVE + 1
        ) * BATCH

    return ready


@pytest.mark.slow
def test_sigkill_then_resume_continues_to_the_same_step_without_duplicate_rollouts(teacher_dir, tmp_path):
    data = write_prompts(tmp_path / "prompts.jsonl", n=32)
    out = tmp_path / "run"
    s = settings(teacher_dir, data, out) | {"max_steps": STEPS, "save_steps": SAVE}
    cmd = [
        sys.executable,
        "-m",
        "reasonkit.distill.command",
        "--method",
        "grpo",
        "--student",
        s["student"],
        "--data",
        s["data"],
        "--out",
        s["out"],
        "--max-steps",
        str(STEPS),
        "--num-generations",
        "4",
        "--batch-size",
        str(BATCH),
        "--max-completion-length",
        "192",
        "--lr",
        "1e-3",
        "--temperature",
        "1.6",
        *[f"--set={k}={s[k]}" for k in ("warmup", "threads", "verifier", "save_steps")],
        "--set=rollouts_every=1",
    ]
    code = kill_after_first_checkpoint(cmd, out, tmp_path / "killed.log", ready=past_the_checkpoint(out))
    assert code == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-2000:]
    assert not (out / "report.json").exists()
    before = load_manifest(out / "rollouts")
    assert before["rows"] > SAVE * BATCH and not before["complete"]

    lines = []
    resumed = train(TrainConfig(**s, resume=True), log=lines.append)
    assert any(line.startswith("resuming from") for line in lines), lines
    start = resumed["resumed_from_step"]
    assert start == SAVE
    dropped = before["rows"] - SAVE * BATCH
    assert f"rollouts: dropped {dropped} rows of steps after {SAVE}, which this run trains again" in lines
    assert resumed["steps"] == STEPS and [r["step"] for r in resumed["history"]] == list(range(1, STEPS + 1))

    rows = read_stage(out / "rollouts").to_pylist()  # complete now: readable without --allow-incomplete
    assert Counter(r["step"] for r in rows) == {step: BATCH for step in range(1, STEPS + 1)}
    assert len({(r["step"], r["id"], r["sample"]) for r in rows}) == len(rows) == STEPS * BATCH
    assert len({(r["id"], r["sample"]) for r in rows}) == len(rows)
    assert resumed["grpo"]["rollouts"]["rows"] == STEPS * BATCH

    again = train(TrainConfig(**s, resume=True), log=lines.append)  # finished: nothing left to do
    assert again["steps"] == STEPS and lines[-1].endswith("nothing to resume")
    assert read_stage(out / "rollouts").num_rows == STEPS * BATCH
