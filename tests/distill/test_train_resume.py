"""A `distill train` killed with SIGKILL after its first checkpoint, rerun with --resume, ends at the
same step count as a run that never stopped, with the same per-step losses."""

import os
import signal
import subprocess
import sys
import time

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.recipes.tasks.train_sets import write_sft

STEPS, SAVE = 16, 4


def settings(student, data, out):
    return dict(
        method="sft",
        student=str(student),
        data=str(data),
        out=str(out),
        max_steps=STEPS,
        lr=5e-3,
        batch_size=8,
        save_steps=SAVE,
        threads=1,
    )


def kill_after_first_checkpoint(cmd: list[str], out, log_path, timeout: float = 240.0, ready=None) -> int:
    """SIGKILL the run once a checkpoint is complete (or once ``ready()`` says so); its exit status."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if ready() if ready else list((out / "checkpoints").glob("checkpoint-*/trainer_state.json")):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_sigkill_then_resume_ends_at_the_same_step_with_the_same_losses(tiny_model_dir, tmp_path):
    data = write_sft(tmp_path / "sft", n=64)
    out = tmp_path / "run"
    s = settings(tiny_model_dir, data, out)
    cmd = [
        sys.executable,
        "-m",
        "reasonkit.distill.command",
        "--method",
        "sft",
        "--student",
        s["student"],
        "--data",
        s["data"],
        "--out",
        s["out"],
        "--max-steps",
        str(STEPS),
        "--lr",
        str(s["lr"]),
        "--batch-size",
        "8",
        "--set",
        f"save_steps={SAVE}",
        "--set",
        "threads=1",
    ]
    code = kill_after_first_checkpoint(cmd, out, tmp_path / "killed.log")
    assert code == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-2000:]
    assert not (out / "report.json").exists()

    lines = []
    resumed = train(TrainConfig(**s, resume=True), log=lines.append)
    assert any(line.startswith("resuming from") for line in lines), lines
    assert resumed["resumed_from_step"] >= SAVE and resumed["resumed_from_step"] % SAVE == 0
    assert resumed["steps"] == STEPS and [r["step"] for r in resumed["history"]] == list(range(1, STEPS + 1))

    whole = train(TrainConfig(**settings(tiny_model_dir, data, tmp_path / "whole")))
    assert whole["steps"] == STEPS
    assert [r["loss"] for r in resumed["history"]] == pytest.approx([r["loss"] for r in whole["history"]], abs=1e-4)

    again = train(TrainConfig(**s, resume=True), log=lines.append)  # finished: nothing left to do
    assert again["steps"] == STEPS and lines[-1].endswith("nothing to resume")
