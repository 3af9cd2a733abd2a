"""`--reward rm=PATH`: GRPO against a reward model gets, for every completion it sampled, the reward `distill score`
writes for the same completion (a real GRPOTrainer run on the embedded teacher; its rollouts scored afterwards)."""

import json

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.command import parse_rewards
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.errors import UserError
from reasonkit.filters.reward_model import ModelReward
from reasonkit.filters.rewards import make_rewards
from reasonkit.judges.score.run import ScoreConfig, run_score
from reasonkit.recipes.tasks import math as task
from reasonkit.store import read_stage

from ...helpers.score import build_reward_model


def _prompts(path, n=8):
    rows = task.make_problems(n, seed=5, variant="aime")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_trainers_reward_is_what_distill_score_writes(teacher_dir, tmp_path):
    rm = build_reward_model(tmp_path / "rm")
    cfg = TrainConfig(
        method="grpo",
        student=teacher_dir,
        data=str(_prompts(tmp_path / "p.jsonl")),
        out=str(tmp_path / "run"),
        max_steps=2,
        num_generations=4,
        batch_size=8,
        max_completion_length=96,
        lr=1e-3,
        warmup=0,
        threads=1,
        save_steps=1000,
        temperature=1.6,
        rewards={"rm": 1.0},
        reward_model=rm,
    )
    report = train(cfg)
    assert set(report["grpo"]["rewards"]) == {"rm"}
    rollouts = read_stage(tmp_path / "run" / "rollouts").to_pylist()
    assert len(rollouts) == 16
    trainer_got = {(r["id"], r["sample"]): r["reward_rm"] for r in rollouts}
    # the rollouts are a traces directory: score it as any traces (its reward column is replaced)
    run_score(
        ScoreConfig(input=str(tmp_path / "run" / "rollouts"), out=str(tmp_path / "scored"), model=rm, batch_size=5)
    )
    written = {(r["id"], r["sample"]): r["reward"] for r in read_stage(tmp_path / "scored").to_pylist()}
    assert written.keys() == trainer_got.keys()
    assert max(written.values()) - min(written.values()) > 0.5  # different completions, different numbers
    for key, value in written.items():
        assert trainer_got[key] == pytest.approx(value, abs=1e-5), key


def test_model_reward_scores_like_distill_score_on_literal_completions(tmp_path):
    from reasonkit.judges.score.scorer import Scorer, inspect_model, turn_of

    rm = build_reward_model(tmp_path / "rm")
    funcs, weights = make_rewards(
        {"accuracy": 1.0, "rm": 0.5}, max_completion_length=64, verifier="int", reward_model=rm
    )
    assert [f.__name__ for f in funcs] == ["accuracy", "rm"] and weights == [1.0, 0.5]
    prompts = [[{"role": "user", "content": "What is 12 * 3?"}]] * 3
    completions = [
        [{"role": "assistant", "content": "<think>12 * 3 = 36</think>\\boxed{36}"}],
        [{"role": "assistant", "content": "\\boxed{35}"}],
        [{"role": "assistant", "content": "36", "reasoning_content": "12 * 3 = 36"}],
    ]
    got = funcs[1](prompts, completions, answer=["36"] * 3)
    rows = [
        {"reasoning": "12 * 3 = 36", "response": "\\boxed{36}"},
        {"reasoning": None, "response": "\\boxed{35}"},
        {"reasoning": "12 * 3 = 36", "response": "36"},
    ]
    scorer = Scorer(inspect_model(rm))
    want = [r for r, _ in scorer.score(prompts, [turn_of(r) for r in rows], batch_size=1)]
    assert got == pytest.approx(want, abs=1e-5) and len(set(got)) == 3
    import pickle

    assert pickle.loads(pickle.dumps(funcs[1])).path == rm  # TRL may ship a reward to a worker: it pickles


def test_rm_flag_syntax_and_bad_input(teacher_dir, tmp_path):
    assert parse_rewards(("rm=runs/rm",)) == {"rm": 1.0}
    assert parse_rewards(("accuracy=1", "rm=runs/rm:0.25")) == {"accuracy": 1.0, "rm": 0.25}
    with pytest.raises(UserError, match="LlamaForCausalLM"):
        ModelReward(teacher_dir)  # a causal LM is no reward model
    with pytest.raises(UserError, match="rm=PATH"):
        make_rewards({"rm": 1.0}, max_completion_length=8)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--method",
            "grpo",
            "--student",
            teacher_dir,
            "--data",
            str(_prompts(tmp_path / "p.jsonl")),
            "--out",
            str(out),
            "--reward",
            f"rm={teacher_dir}:0.5",
            "--num-generations",
            "2",
            "--batch-size",
            "2",
            "--set",
            "threads=1",
        ],
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "LlamaForCausalLM" in lines[0], result.output
    assert not (out / "adapter").exists() and not (out / "rollouts").exists()
