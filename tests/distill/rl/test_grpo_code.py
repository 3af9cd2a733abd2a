"""`distill train --method grpo --reward code=1.0` for real: the prompts' tests reach TRL's GRPOTrainer and
the code reward, which runs every completion's program in the sandbox (the embedded teacher writes
arithmetic, not programs: every completion earns 0.0, never None, since every prompt has tests)."""

import json

from reasonkit import sandbox
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.recipes.tasks import math as task


def test_grpo_with_the_code_reward_runs_on_the_prompts_tests(teacher_dir, tmp_path):
    rows = task.make_problems(4, seed=3, variant="aime")
    tests = {"inputs": [""], "outputs": ["0"]}
    (tmp_path / "p.jsonl").write_text(
        "".join(json.dumps({"problem": r["problem"], "tests": tests}) + "\n" for r in rows)
    )
    config = TrainConfig(
        method="grpo",
        student=str(teacher_dir),
        data=str(tmp_path / "p.jsonl"),
        out=str(tmp_path / "run"),
        max_steps=1,
        num_generations=2,
        batch_size=4,
        max_completion_length=24,
        lr=1e-3,
        warmup=0,
        threads=1,
        save_steps=1000,
        rewards={"code": 1.0, "format": 0.2},
    )
    report = train(config)
    assert set(report["grpo"]["rewards"]) == {"code", "format"}
    assert report["sandbox"] == sandbox.resolve_mode()  # how the policy's programs ran, checked before training
    assert report["history"][0]["reward_code"] == 0.0  # a number for every completion: the tests arrived
