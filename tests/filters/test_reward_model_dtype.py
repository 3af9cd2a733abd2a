"""A GRPO run's reward model loads in the policy's dtype (issue 35 item 3): bf16 on a GPU, where it used to load
in the scorer's default fp32, 6.2 GB in each of 8 processes for a 1.5B reward model where --plan counted 3.1 GB;
fp32 on a CPU as before."""

import pytest
import torch

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.rl.grpo import build_grpo_trainer, grpo_arguments
from reasonkit.distill.student import Device, load_model, lora_config, resolve_device, trainer_args
from reasonkit.filters.reward_model import ModelReward

from ..helpers.score import build_reward_model


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
