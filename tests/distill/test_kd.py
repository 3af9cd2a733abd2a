"""distill/kd.py: the sparse forward KL against a hand computation, the alignment, the collated targets."""

import math

import pytest
import torch

from reasonkit.distill import kd
from reasonkit.errors import UserError


def _logits(*probs):
    """Logits whose softmax is exactly ``probs`` (each row sums to 1)."""
    return torch.log(torch.tensor(probs, dtype=torch.float64))


def test_kd_loss_on_three_tokens_matches_the_hand_computation():
    # Tokens [0, 3, 2]; the prompt is token 0 (label -100), the completion is tokens 3 and 2.
    # The student's distribution after token 0 and after token 3 (vocabulary of 4); the last row predicts nothing.
    logits = _logits([0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.4, 0.1], [0.7, 0.1, 0.1, 0.1]).unsqueeze(0)
    labels = torch.tensor([[-100, 3, 2]])
    # The teacher's top 2 at token 1 (ids 3, 2: p 0.6, 0.2) and at token 2 (ids 2, 1: p 0.5, 0.3).
    targets = {
        "kd_ids": torch.tensor([[[0, 0], [3, 2], [2, 1]]]),
        "kd_logprobs": torch.log(torch.tensor([[[1.0, 1.0], [0.6, 0.2], [0.5, 0.3]]])),
        "kd_mask": torch.tensor([[[False, False], [True, True], [True, True]]]),
    }
    # By hand. Cross-entropy: -ln 0.4 - ln 0.4.
    ce = -math.log(0.4) - math.log(0.4)
    # Token 1: q = (0.6, 0.2) / 0.8 = (0.75, 0.25) against the student's p(3) = 0.4, p(2) = 0.3.
    kl1 = 0.75 * math.log(0.75 / 0.4) + 0.25 * math.log(0.25 / 0.3)
    # Token 2: q = (0.5, 0.3) / 0.8 = (0.625, 0.375) against p(2) = 0.4, p(1) = 0.25.
    kl2 = 0.625 * math.log(0.625 / 0.4) + 0.375 * math.log(0.375 / 0.25)
    # 0.75 * 0.628609 + 0.25 * -0.182322 = 0.425876; 0.625 * 0.446287 + 0.375 * 0.405465 = 0.430979
    assert (round(kl1, 6), round(kl2, 6)) == (0.425876, 0.430979)

    loss, got_ce, got_kl, tokens = kd.kd_loss(logits, labels, targets, weight=0.5)
    assert int(tokens) == 2
    assert float(got_ce) == pytest.approx(ce / 2, abs=1e-6)
    assert float(got_kl) == pytest.approx((kl1 + kl2) / 2, abs=1e-6)
    assert float(loss) == pytest.approx((ce + 0.5 * (kl1 + kl2)) / 2, abs=1e-6)
    # divided by TRL's count of label tokens across gradient accumulation when it is given
    loss4, *_ = kd.kd_loss(logits, labels, targets, weight=0.5, num_items=4)
    assert float(loss4) == pytest.approx((ce + 0.5 * (kl1 + kl2)) / 4, abs=1e-6)


def test_the_kl_is_zero_where_the_student_is_the_teacher_and_gradients_flow():
    logits = _logits([0.5, 0.3, 0.2], [0.5, 0.3, 0.2]).unsqueeze(0).requires_grad_()
    targets = {
        "kd_ids": torch.tensor([[[0, 0, 0], [0, 1, 2]]]),
        "kd_logprobs": torch.log(torch.tensor([[[1.0, 1.0, 1.0], [0.5, 0.3, 0.2]]])),
        "kd_mask": torch.tensor([[[False] * 3, [True] * 3]]),
    }
    loss, ce, kl, _ = kd.kd_loss(logits, torch.tensor([[-100, 0]]), targets, weight=1.0)
    assert float(kl) == pytest.approx(0.0, abs=1e-12)
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_targets_follow_the_trained_tokens_they_match():
    # The trained assistant tokens add a <think>-like token (9) before the completion and an end token (2) after.
    row = {
        "input_ids": [1, 4, 9, 5, 6, 7, 2],
        "labels": [-100, -100, 9, 5, 6, 7, 2],
        "completion_ids": [5, 6, 7],
        "logprob_ids": [[5, 8], [6, 8], [7, 8]],
        "logprobs": [[-0.1, -2.0], [-0.2, -2.5], [-0.3, -3.0]],
    }
    got = kd.row_targets(row)
    assert got["kd_positions"] == [3, 4, 5] and got["kd_target_ids"] == [[5, 8], [6, 8], [7, 8]]
    batch = kd.collate_targets([got], width=8)
    assert batch["kd_mask"][0].any(-1).tolist() == [False, False, False, True, True, True, False, False]
    assert batch["kd_ids"][0, 4].tolist() == [6, 8]
    assert batch["kd_logprobs"][0, 5].tolist() == pytest.approx([-0.3, -3.0])


def test_a_table_without_the_columns_is_one_line():
    with pytest.raises(UserError) as e:
        kd.check_columns(["id", "messages", "logprobs"], "out/filter/sft")
    assert str(e.value).startswith("out/filter/sft: --kd-weight needs the teacher's log-prob columns completion_ids")
    assert "\n" not in str(e.value)


def test_a_table_without_the_columns_stops_before_any_work(teacher_dir, tmp_path):
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.train import train
    from reasonkit.recipes.tasks.train_sets import write_sft

    data = write_sft(tmp_path / "sft", n=4)
    cfg = TrainConfig(method="sft", student=teacher_dir, data=str(data), out=str(tmp_path / "run"), kd_weight=0.5)
    with pytest.raises(UserError, match="needs the teacher's log-prob columns completion_ids, logprob_ids, logprobs"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_kd_weight_is_for_sft_without_packing():
    from reasonkit.distill.config import TrainConfig

    for bad in (dict(method="dpo"), dict(packing=True), dict(kd_weight=-1.0), dict(use_liger_kernel=True)):
        with pytest.raises(UserError, match="kd_weight"):
            TrainConfig(**{"method": "sft", "student": "m", "data": "d", "out": "o", "kd_weight": 0.5, **bad})


@pytest.mark.slow
def test_two_kd_steps_on_the_embedded_teacher(vllm_engine, gen_model, tmp_path):
    """Teacher traces with their top 5 (vLLM), filtered, then 2 SFT steps with the KL beside the cross-entropy:
    every target aligns (the student shares the teacher's tokenizer), and the loss's KD term is logged."""
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.train import train
    from reasonkit.filters.config import FilterConfig
    from reasonkit.filters.run import run_filter
    from reasonkit.gen.run import GenerateConfig, generate, make_backend
    from reasonkit.recipes.tasks.math import write_prompts

    prompts = write_prompts(tmp_path / "p.parquet", 8, seed=2, variant="mul")
    gen = GenerateConfig(
        prompts=str(prompts),
        teacher=gen_model,
        out=str(tmp_path / "traces"),
        n=2,
        max_tokens=128,
        dtype="float32",
        max_model_len=512,
        prefill_think=True,
        logprobs=5,
    )
    generate(gen, backend=make_backend(gen, llm=vllm_engine))
    run_filter(
        FilterConfig(
            traces=str(tmp_path / "traces"),
            out=str(tmp_path / "f"),
            verifier="int",
            workers=1,
            lang="none",
            decontam=(),
        )
    )
    cfg = TrainConfig(
        method="sft",
        student=gen_model,
        data=str(tmp_path / "f" / "sft"),
        out=str(tmp_path / "run"),
        full=True,
        kd_weight=0.5,
        max_steps=2,
        batch_size=4,
        lr=1e-4,
        threads=1,
        max_length=256,
        save_steps=1000,
    )
    report = train(cfg)
    assert report["steps"] == 2 and report["kd_aligned_share"] == 1.0 and report["kd_targets"] > 100
    for step in report["history"]:
        assert step["kd_loss"] > 0 and step["kd_tokens"] > 0
        assert step["loss"] == pytest.approx(step["ce_loss"] + 0.5 * step["kd_loss"], rel=1e-3)
