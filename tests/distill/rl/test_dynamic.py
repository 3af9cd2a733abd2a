"""distill/rl/dynamic.py: DAPO's dynamic sampling over a scripted trainer (which groups are flat, how the kept
groups of several rounds join into one batch, what is counted), and for real on the embedded teacher."""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from reasonkit.distill.rl.dynamic import MAX_ROUNDS, DynamicSampling, flat_groups, join_rows

G = 2


class Scripted:
    """TRL's generation as far as dynamic sampling reads it: each call scores its batch with the next round's
    rewards (one per completion) and returns tensors whose rows name the prompt they came from."""

    num_generations = G
    reward_weights = torch.tensor([1.0])
    args = SimpleNamespace(seed=0)
    state = SimpleNamespace(global_step=0)
    model = SimpleNamespace(training=True)
    _tokenizer = SimpleNamespace(pad_token_id=0)

    def __init__(self, rounds: list[list[float]]):
        self.rounds, self.calls = list(rounds), []
        self.train_dataset = [{"prompt": f"drawn{i}"} for i in range(50)]
        self._metrics = {"train": defaultdict(list)}

    def _generate_and_score_completions(self, inputs):
        rewards = self.rounds.pop(0)
        assert len(rewards) == len(inputs)
        self.calls.append([x["prompt"] for x in inputs])
        self._rewards_per_func = torch.tensor([[r] for r in rewards])
        n, call = len(inputs), len(self.calls)
        width = 1 + call  # each round pads to another width: the join re-pads
        return {
            "prompt_ids": torch.full((n, width), 7),
            "prompt_mask": torch.ones(n, width, dtype=torch.long),
            "completion_ids": torch.arange(n).unsqueeze(1) + 100 * call,  # row k of call c: 100 c + k
            "completion_mask": torch.ones(n, 1, dtype=torch.long),
            "advantages": torch.tensor(rewards) - 0.5,
            "num_items_in_batch": torch.tensor(n),
        }


class Trainer(DynamicSampling, Scripted):
    dynamic_sampling = True


def batch(n_prompts: int) -> list[dict]:
    return [{"prompt": f"p{i}"} for i in range(n_prompts) for _ in range(G)]


def test_flat_groups_are_dropped_and_refilled_from_new_prompts():
    # round 1: groups 0 and 2 flat, 1 and 3 varied; round 2 (new prompts) the same: its two varied groups fill it
    trainer = Trainer([[1, 1, 0, 1, 0, 0, 1, 0], [0, 0, 1, 0, 1, 1, 0, 1]])
    out = trainer._generate_and_score_completions(batch(4))
    assert len(trainer.calls) == 2 and all(p.startswith("drawn") for p in trainer.calls[1])
    assert out["completion_ids"].squeeze(1).tolist() == [102, 103, 106, 107, 202, 203, 206, 207]
    assert out["prompt_ids"].shape == (8, 3) and out["prompt_mask"][:4].tolist() == [[0, 1, 1]] * 4  # left-padded
    assert out["advantages"].tolist() == [-0.5, 0.5, 0.5, -0.5, 0.5, -0.5, -0.5, 0.5]
    assert int(out["num_items_in_batch"]) == 8
    metrics = trainer._metrics["train"]
    assert metrics["dynamic/prompts_drawn"] == [8.0] and metrics["dynamic/rounds"] == [2.0]
    assert metrics["dynamic/groups_filled_flat"] == [0.0]


def test_a_batch_of_varied_groups_is_one_round():
    trainer = Trainer([[1, 0, 0, 1]])
    out = trainer._generate_and_score_completions(batch(2))
    assert len(trainer.calls) == 1 and out["completion_ids"].squeeze(1).tolist() == [100, 101, 102, 103]


def test_after_the_last_round_flat_groups_fill_the_batch():
    trainer = Trainer([[1, 1, 0, 1]] + [[0, 0, 0, 0]] * (MAX_ROUNDS - 1))
    out = trainer._generate_and_score_completions(batch(2))
    assert len(trainer.calls) == MAX_ROUNDS and len(out["completion_ids"]) == 4
    assert out["completion_ids"].squeeze(1).tolist() == [100, 101, 102, 103]  # round 1's flat group stands in
    assert trainer._metrics["train"]["dynamic/groups_filled_flat"] == [1.0]
    assert trainer._metrics["train"]["dynamic/prompts_drawn"] == [2.0 * MAX_ROUNDS]


def test_off_or_in_eval_it_is_trl_unchanged():
    trainer = Trainer([[1, 1, 1, 1]])
    trainer.dynamic_sampling = False
    out = trainer._generate_and_score_completions(batch(2))
    assert len(out["completion_ids"]) == 4 and not trainer._metrics["train"]


def test_flat_groups_leave_unscored_completions_out():
    nan = float("nan")
    assert flat_groups([[1.0, nan], [1.0, 0.5], [nan, nan], [0.0, nan]], [1.0, 1.0], group=2) == [False, True]


def test_join_rows_pads_per_token_tensors_on_the_right():
    a = {"completion_ids": torch.tensor([[1, 2], [3, 4]]), "completion_mask": torch.ones(2, 2, dtype=torch.long)}
    b = {"completion_ids": torch.tensor([[5], [6]]), "completion_mask": torch.ones(2, 1, dtype=torch.long)}
    out = join_rows([a, b], [[1], [0]], pad_id=9)
    assert out["completion_ids"].tolist() == [[3, 4], [5, 9]] and out["completion_mask"].tolist() == [[1, 1], [1, 0]]
    assert int(out["num_items_in_batch"]) == 3


@pytest.mark.slow
def test_dynamic_sampling_trains_on_the_embedded_teacher(teacher_dir, tmp_path):
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.train import train

    from .test_grpo import BATCH, settings, write_prompts

    cfg = TrainConfig(
        **{**settings(teacher_dir, write_prompts(tmp_path / "p.jsonl"), tmp_path / "run"), "max_steps": 2},
        dynamic_sampling=True,
    )
    report = train(cfg)
    assert report["steps"] == 2
    for step in report["history"]:
        assert step["prompts_drawn"] >= BATCH // 4 and 1 <= step["sampling_rounds"] <= MAX_ROUNDS
    drawn = sum(s["prompts_drawn"] for s in report["history"])
    assert report["grpo"]["rollouts"]["rows"] == drawn * 4  # every completion of every round kept
