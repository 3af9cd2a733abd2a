"""`distill train --method dpo` on a tiny random Llama (CPU, LoRA, TRL's DPOTrainer): reward accuracy
rises above chance, precomputed reference log-probs change nothing, and the loss on a fixed batch
is the DPO formula computed here independently of TRL."""

import math
from statistics import mean

import pytest
import torch
import torch.nn.functional as F

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.dpo_movement import MOVED_LITTLE
from reasonkit.distill.report import summary
from reasonkit.distill.train import train
from reasonkit.recipes.tasks.train_sets import write_prefs


@pytest.fixture(scope="module")
def prefs_dir(tmp_path_factory):
    return write_prefs(tmp_path_factory.mktemp("prefs") / "prefs", n=32)


def config(student, data, out, **kw):
    base = dict(
        method="dpo",
        student=str(student),
        data=str(data),
        out=str(out),
        lr=5e-3,
        batch_size=8,
        threads=1,
        save_steps=1000,
        lr_scheduler="constant",
        warmup=0.0,
    )
    return TrainConfig(**{**base, **kw})


@pytest.mark.slow
def test_dpo_raises_reward_accuracy_and_precompute_changes_nothing(tiny_model_dir, prefs_dir, tmp_path):
    report = train(config(tiny_model_dir, prefs_dir, tmp_path / "run", max_steps=24))
    accuracy = [r["reward_accuracy"] for r in report["history"]]
    losses = [r["loss"] for r in report["history"]]
    assert report["steps"] == 24
    assert accuracy[0] == 0.0 and abs(losses[0] - math.log(2)) < 1e-4  # step 1: the policy is the reference
    assert mean(accuracy[-6:]) > 0.5 and report["reward_accuracy"] > 0.5, accuracy
    assert report["reward_margin"] > 0 and mean(losses[-6:]) < math.log(2)
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    last = report["history"][-1]  # the policy left the reference, and the summary says it did
    assert max(last["log_ratio_chosen"], last["log_ratio_rejected"]) > MOVED_LITTLE, last
    assert any(line.startswith("DPO moved the model: 24 steps") for line in summary(report))

    pre = train(config(tiny_model_dir, prefs_dir, tmp_path / "pre", max_steps=6, precompute_ref=True))
    assert [r["loss"] for r in pre["history"]] == pytest.approx(losses[:6], abs=1e-4)


def pair_logps(model, batch):
    """Summed completion log-probs of a collated DPO batch (chosen rows first, then rejected), and
    the chosen rows' mean token NLL (RPO's extra term)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["input_ids"][:, 1:]
    mask = batch["completion_mask"][:, 1:].bool()
    token_logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    chosen_logps, chosen_mask = token_logps.chunk(2)[0], mask.chunk(2)[0]
    return *(token_logps * mask).sum(dim=1).chunk(2), -chosen_logps[chosen_mask].mean()


@pytest.mark.parametrize("rpo_alpha", [0.0, 0.7])
def test_dpo_loss_on_a_fixed_batch_is_the_formula(tiny_model_dir, prefs_dir, tmp_path, rpo_alpha):
    from transformers import AutoModelForCausalLM

    from reasonkit.distill.data import load_tokenizer, read_rows, to_dataset
    from reasonkit.distill.dpo import build_dpo_trainer
    from reasonkit.distill.student import lora_config, resolve_device, trainer_args

    beta = 0.5
    cfg = config(tiny_model_dir, prefs_dir, tmp_path / "run", beta=beta, rpo_alpha=rpo_alpha)
    tok = load_tokenizer(cfg)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    dataset = to_dataset(read_rows(prefs_dir, "dpo"), "dpo")
    trainer = build_dpo_trainer(
        cfg, model, tok, dataset, trainer_args(cfg, resolve_device(cfg), tmp_path / "ck", 256), lora_config(cfg), []
    )
    policy = trainer.model
    torch.manual_seed(0)
    with torch.no_grad():  # LoRA B starts at zero (policy == reference); move the policy away from it
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    with torch.no_grad():
        loss = trainer.compute_loss(policy, dict(batch)).item()
        logp_c, logp_r, chosen_nll = pair_logps(policy, batch)
        with policy.disable_adapter():  # the reference: the base with adapters disabled
            ref_c, ref_r, _ = pair_logps(policy, batch)
    expected = (
        -F.logsigmoid(beta * ((logp_c - ref_c) - (logp_r - ref_r))).mean().item() + rpo_alpha * chosen_nll.item()
    )
    assert abs(expected - math.log(2)) > 1e-2  # the check is not the trivial policy == reference case
    assert loss == pytest.approx(expected, abs=1e-5)


def sequence_logp(model, tok, prompt, completion):
    """log p(completion | prompt) from the chat template's text alone, one unpadded sequence, plain torch:
    the completion is everything the template renders after the prompt and its generation prompt."""
    prompt_text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    full_text = tok.apply_chat_template(prompt + completion, tokenize=False)
    assert full_text.startswith(prompt_text) and len(full_text) > len(prompt_text)
    prompt_ids = tok(prompt_text, add_special_tokens=False)["input_ids"]
    ids = tok(full_text, add_special_tokens=False)["input_ids"]
    assert ids[: len(prompt_ids)] == prompt_ids
    logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    token_logps = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
    return token_logps[len(prompt_ids) - 1 :].sum().item()  # position t predicts token t + 1


def test_dpo_loss_and_logps_match_an_independent_tokenisation(tiny_model_dir, prefs_dir, tmp_path):
    """The loss TRL computes on a batch equals -logsigmoid(beta * ((pc - rc) - (pr - rr))) with each term a
    sum of log-probs computed here from the raw pair rows -- not from TRL's collated batch -- and TRL's
    logged policy log-probs equal ours, so a prompt/completion boundary off by one token fails (in the loss
    alone a shift inside the shared prompt would cancel between chosen and rejected)."""
    from transformers import AutoModelForCausalLM

    from reasonkit.distill.data import load_tokenizer, read_rows, to_dataset
    from reasonkit.distill.dpo import build_dpo_trainer
    from reasonkit.distill.student import lora_config, resolve_device, trainer_args

    beta, n = 0.5, 4
    cfg = config(tiny_model_dir, prefs_dir, tmp_path / "run", beta=beta)
    tok = load_tokenizer(cfg)
    table = read_rows(prefs_dir, "dpo")
    trainer = build_dpo_trainer(
        cfg,
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        tok,
        to_dataset(table, "dpo"),
        trainer_args(cfg, resolve_device(cfg), tmp_path / "ck", 256),
        lora_config(cfg),
        [],
    )
    policy = trainer.model.eval()
    torch.manual_seed(1)
    with torch.no_grad():  # LoRA B starts at zero (policy == reference); move the policy away from it
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    rows = table.slice(0, n).to_pylist()
    with torch.no_grad():
        loss = trainer.compute_loss(
            policy, dict(trainer.data_collator([trainer.train_dataset[i] for i in range(n)]))
        ).item()
        pc = [sequence_logp(policy, tok, r["prompt"], r["chosen"]) for r in rows]
        pr = [sequence_logp(policy, tok, r["prompt"], r["rejected"]) for r in rows]
        with policy.disable_adapter():
            rc = [sequence_logp(policy, tok, r["prompt"], r["chosen"]) for r in rows]
            rr = [sequence_logp(policy, tok, r["prompt"], r["rejected"]) for r in rows]
    margins = torch.tensor([(a - b) - (c - d) for a, b, c, d in zip(pc, rc, pr, rr)])
    expected = -F.logsigmoid(beta * margins).mean().item()
    assert abs(expected - math.log(2)) > 1e-2  # not the trivial policy == reference case
    assert loss == pytest.approx(expected, abs=1e-4)
    logged = trainer._metrics["eval"]
    assert logged["logps/chosen"][-1] == pytest.approx(mean(pc), abs=1e-3)
    assert logged["logps/rejected"][-1] == pytest.approx(mean(pr), abs=1e-3)
    assert logged["rewards/chosen"][-1] == pytest.approx(beta * mean(a - b for a, b in zip(pc, rc)), abs=1e-3)


def test_a_run_that_barely_moves_the_model_says_so(tiny_model_dir, prefs_dir, tmp_path):
    """The quickstart's DPO rung in miniature: a few steps at lr 5e-5 on a zero-initialised LoRA."""
    from reasonkit.recipes.recipe import Recipe, Step
    from reasonkit.recipes.report import write_report

    report = train(config(tiny_model_dir, prefs_dir, tmp_path / "dpo", max_steps=3, lr=5e-5))
    last = report["history"][-1]
    assert last["step"] == 3 and last["log_ratio_pairs"] == 32
    assert 0 < last["log_ratio_chosen"] < MOVED_LITTLE and 0 < last["log_ratio_rejected"] < MOVED_LITTLE
    line = next(s for s in summary(report) if s.startswith("DPO moved"))
    assert line.startswith("DPO moved the model little: 3 steps, mean |log pi/pi_ref| ") and line.endswith(
        "a token (under 0.01)"
    )
    page = write_report(Recipe(path="r.yaml", out=str(tmp_path), steps=(Step("dpo", "train"),))).read_text()
    assert f"{line}." in page.split("## dpo: DPO training", 1)[1]


def test_full_fine_tuning_saves_a_plain_model(tiny_model_dir, prefs_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    lines = []
    report = train(
        config(tiny_model_dir, prefs_dir, tmp_path / "run", max_steps=3, full=True, lr=1e-4, merge=True),
        log=lines.append,
    )
    assert report["adapter"] is None and report["merged"] is None and report["steps"] == 3
    assert report["trainable_parameters"] == report["total_parameters"]
    assert any("nothing to merge" in line for line in lines)
    model = AutoModelForCausalLM.from_pretrained(report["model"])  # a frozen copy of the student was the reference
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert not torch.equal(model.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight)
