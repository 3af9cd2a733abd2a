"""The seed's worked example, through the real GRPOTrainer: prompt "Compute 17 x 23", gold 391, a group of
G = 4 hand-written completions, two right and two wrong.

Only generation is replaced (the completions are fixed token ids instead of samples); the rewards come from
reasonkit's accuracy reward and the advantages are the ones TRL's scoring path computes and hands to the
loss. They must be A_i = (r_i - mean r) / (std r + 1e-4) with TRL's std: Bessel-corrected (n - 1), so
+-0.866 for two right and two wrong, not the +-1.0 of the population std; a group whose rewards are all
equal gets zero advantage, whatever its reward."""

from statistics import mean, stdev

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.rl.grpo import RolloutGRPOTrainer, build_grpo_trainer, grpo_arguments
from reasonkit.distill.rl.rollouts import RolloutLog
from reasonkit.distill.student import load_model, lora_config, resolve_device, trainer_args

PROMPT = [{"role": "user", "content": "Compute 17 x 23"}]
RIGHT = [
    "<think>\n17 * 23 = 17 * 20 + 17 * 3 = 340 + 51 = 391\n</think>\nThe answer is \\boxed{391}.",
    "<think>\n23 * 17 = 230 + 161 = 391\n</think>\n\\boxed{391}",
]
WRONG = [
    "<think>\n17 * 23 = 340 + 41 = 381\n</think>\nThe answer is \\boxed{381}.",
    "<think>\n17 * 23 = 17 * 20 + 3 = 343\n</think>\n\\boxed{343}",
]


def trainer_for(student, tmp_path, texts, *, scale_rewards="group", rollouts=None):
    """A trainer built as `distill train --method grpo` builds it, whose generation returns ``texts``."""
    cfg = TrainConfig(
        method="grpo",
        student=student,
        data="unused",
        out=str(tmp_path),
        num_generations=4,
        batch_size=len(texts),
        rewards={"accuracy": 1.0},
        scale_rewards=scale_rewards,
        threads=1,
    )
    device = resolve_device(cfg)
    args = grpo_arguments(cfg, trainer_args(cfg, device, tmp_path / "checkpoints", 256))
    from datasets import Dataset
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(student)
    data = Dataset.from_list([{"prompt": PROMPT, "id": "worked", "answer": "391", "source": None}] * 4)
    trainer = build_grpo_trainer(
        cfg,
        load_model(cfg, device),
        tok,
        data,
        args,
        lora_config(cfg),
        [],
        rollouts=rollouts,
        stamp={"teacher": "t", "gen_config": "g"},
    )
    trainer.fixed = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    trainer.model.train()
    return trainer


@pytest.fixture(autouse=True)
def fixed_generation(monkeypatch):
    """Generation returns the trainer's fixed completions; everything after it is TRL's own code."""

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        assert len(prompt_ids) == len(self.fixed) and num_generations == 4
        return [list(ids) for ids in self.fixed], None

    monkeypatch.setattr(RolloutGRPOTrainer, "_generate_single_turn", generate)


def score(trainer, n):
    inputs = [{"prompt": PROMPT, "id": "worked", "answer": "391", "source": None} for _ in range(n)]
    output = trainer._generate_and_score_completions(inputs)
    rewards = trainer._rewards_per_func[:, 0].tolist()
    return rewards, output["advantages"].tolist()


def test_the_worked_example_two_right_two_wrong(teacher_dir, tmp_path):
    trainer = trainer_for(teacher_dir, tmp_path, [RIGHT[0], WRONG[0], RIGHT[1], WRONG[1]])
    rewards, advantages = score(trainer, 4)
    assert rewards == [1.0, 0.0, 1.0, 0.0]  # reasonkit's accuracy reward, called by TRL
    m, s = mean(rewards), stdev(rewards)  # stdev: n - 1 in the denominator, as TRL's nanstd
    assert advantages == pytest.approx([(r - m) / (s + 1e-4) for r in rewards], abs=1e-6)
    assert advantages[0] == pytest.approx(0.8659, abs=1e-4) and advantages[1] == pytest.approx(-0.8659, abs=1e-4)
    assert trainer._metrics["train"]["frac_reward_zero_std"][-1] == 0.0


def test_a_group_of_equal_rewards_has_zero_advantage_beside_one_that_differs(teacher_dir, tmp_path):
    """Two groups in one batch: each is normalised by its own mean and std; the all-right group gets zero."""
    log = RolloutLog(
        tmp_path / "rollouts", names=["accuracy"], run={"fingerprint": "f"}, input_fingerprint="i", data="d"
    )
    trainer = trainer_for(
        teacher_dir,
        tmp_path,
        [RIGHT[0], RIGHT[1], RIGHT[0], RIGHT[1], WRONG[0], RIGHT[0], WRONG[1], RIGHT[1]],
        rollouts=log,
    )
    rewards, advantages = score(trainer, 8)
    assert rewards == [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert advantages[:4] == [0.0, 0.0, 0.0, 0.0]
    assert advantages[4:] == pytest.approx([-0.8659, 0.8659, -0.8659, 0.8659], abs=1e-4)
    assert trainer._metrics["train"]["frac_reward_zero_std"][-1] == 0.5  # TRL counts it per completion: half
    # the rollouts hold what the trainer used, numbered per prompt over the run
    rows = log.buffer
    assert [r["advantage"] for r in rows] == pytest.approx(advantages)
    assert [r["reward_accuracy"] for r in rows] == rewards == [r["reward"] for r in rows]
    assert [r["sample"] for r in rows] == list(range(8)) and {r["step"] for r in rows} == {1}
    assert rows[0]["response"] == "The answer is \\boxed{391}." and rows[0]["finish_reason"] == "stop"


def test_scale_rewards_none_keeps_the_centred_reward(teacher_dir, tmp_path):
    """Dr. GRPO's choice: no division by the std (a hard question's group is not scaled up)."""
    trainer = trainer_for(teacher_dir, tmp_path, [RIGHT[0], WRONG[0], WRONG[1], WRONG[0]], scale_rewards="none")
    rewards, advantages = score(trainer, 4)
    assert advantages == pytest.approx([r - mean(rewards) for r in rewards], abs=1e-6) == [0.75, -0.25, -0.25, -0.25]


def test_groups_of_equal_weighted_rewards_count_as_teaching_nothing():
    """TRL checks its group std with torch.isclose(std, 0): equal sums 1.0 + 0.2 give a std of ~1e-8
    in float32, so the logged share of signal-less groups read 0 for the quickstart's weights."""
    import torch
    from trl.trainer.utils import nanstd

    from reasonkit.distill.rl.grpo import zero_variance_share

    scores = [[1.0, 1.0]] * 8 + [[1.0, 1.0]] * 4 + [[0.0, 1.0]] * 4  # two groups of 8: all right; half right
    sums = torch.tensor([1.0 * a + 0.2 * f for a, f in scores], dtype=torch.float32)
    trl_share = torch.isclose(nanstd(sums.view(-1, 8), dim=1), torch.zeros(2)).float().mean().item()
    assert zero_variance_share(scores, [1.0, 0.2], group=8) == 0.5
    assert trl_share == 0.0  # TRL: the all-right group (std 1.3e-7) counted as having signal


def test_a_rollout_keeps_the_reasoning_the_rewards_saw():
    """A completion whose parser split the think block into reasoning_content: the rollout's text is
    what the rewards scored (was: the content alone, the reasoning lost)."""
    from reasonkit.distill.rl.grpo import rollout_row
    from reasonkit.reward.completions import completion_text

    completion = [{"role": "assistant", "content": "\\boxed{391}", "reasoning_content": "17 * 23 = 391"}]
    row = rollout_row({"id": "p", "prompt": [], "answer": "391"}, completion, [1, 2], [7, 8, 9], {9})
    assert row["completion"] == completion_text(completion) and "17 * 23 = 391" in row["completion"]
    assert row["finish_reason"] == "stop" and row["completion_tokens"] == 3
