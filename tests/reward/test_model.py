"""The rm reward (reward/model.py). `--reward rm=PATH`: GRPO against a reward model gets, for every completion
it sampled, the reward `distill score` writes for the same completion (a real GRPOTrainer run on the embedded
teacher; its rollouts scored afterwards). A GRPO run's reward model loads in the policy's dtype (issue 35 item 3):
bf16 on a GPU, where it used to load in the scorer's default fp32, 6.2 GB in each of 8 processes for a 1.5B
reward model where --plan counted 3.1 GB; fp32 on a CPU as before."""

import json

import pytest
import torch
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.command import parse_rewards
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.rl.grpo import build_grpo_trainer, grpo_arguments
from reasonkit.distill.student import Device, load_model, lora_config, resolve_device, trainer_args
from reasonkit.distill.train import train
from reasonkit.errors import UserError
from reasonkit.judges.score.config import ScoreConfig
from reasonkit.judges.score.run import run_score
from reasonkit.recipes.tasks import math as task
from reasonkit.reward.functions import make_rewards
from reasonkit.reward.model import ModelReward
from reasonkit.store import read_stage

from ..helpers.score import build_reward_model


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
    from reasonkit.reward.scorer import Scorer, inspect_model, turn_of

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


@pytest.mark.parametrize("kind, bf16, loaded", [("cuda", True, torch.bfloat16), ("cpu", False, torch.float32)])
def test_the_reward_model_loads_in_the_policys_dtype(kind, bf16, loaded, teacher_dir, tmp_path):
    from datasets import Dataset
    from transformers import AutoTokenizer

    rm = build_reward_model(tmp_path / "rm")
    cfg = TrainConfig(
        method="grpo",
        student=teacher_dir,
        data="unused",
        out=str(tmp_path / "run"),
        num_generations=4,
        batch_size=4,
        rewards={"accuracy": 1.0, "rm": 1.0},
        reward_model=rm,
        threads=1,
    )
    # the policy as load_model gives it on the device resolve_device found: a GPU's is bf16 (built in CPU memory here)
    device = Device(kind=kind, bf16=bf16, gradient_checkpointing=False, threads=1, world_size=1)
    policy = load_model(cfg, device)
    assert policy.dtype == loaded
    args = grpo_arguments(cfg, trainer_args(cfg, resolve_device(cfg), tmp_path / "ck", 256))
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "1 + 1?"}], "answer": "2"}] * 4)
    trainer = build_grpo_trainer(
        cfg, policy, AutoTokenizer.from_pretrained(teacher_dir), data, args, lora_config(cfg), []
    )
    reward = next(f for f in trainer.reward_funcs if isinstance(f, ModelReward))
    assert reward.scorer.model.dtype == loaded  # what the scorer really loaded
    assert reward.scorer.model.score.weight.dtype == loaded


def test_a_reward_built_alone_keeps_the_scorers_fp32(tmp_path):
    """`distill score` and a reward outside a trainer: fp32 as before."""
    reward = ModelReward(build_reward_model(tmp_path / "rm"))
    assert reward.scorer.model.dtype == torch.float32


def test_the_reward_model_loads_whole_inside_a_zero3_run(tmp_path, monkeypatch):
    """rlaif-constitutional's GRPO runs under ZeRO-3 with zero3_init_flag, which registers transformers' DeepSpeed
    config in every process: from_pretrained would then partition the reward model (deepspeed.zero.Init; here, with
    no DeepSpeed installed, that import raises), and the scorer runs it outside any engine. It loads whole."""
    from transformers.integrations import deepspeed

    class Zero3:
        def is_zero3(self):
            return True

    reward = ModelReward(build_reward_model(tmp_path / "rm"))
    registered = Zero3()
    monkeypatch.setattr(deepspeed, "_hf_deepspeed_config_weak_ref", lambda: registered)
    assert deepspeed.is_deepspeed_zero3_enabled()
    scorer = reward.scorer
    assert all(p.numel() > 0 for p in scorer.model.parameters())
    assert deepspeed.is_deepspeed_zero3_enabled(), "the run's own ZeRO-3 config is left as it was"
