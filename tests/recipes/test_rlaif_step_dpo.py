"""recipes/rlaif-constitutional.yaml and recipes/step-dpo.yaml: the chain each promises, checked on the validated
configs (offline, nothing loaded): the reward model learns the critique's preferences and GRPO optimises it under a
KL penalty; the two DPO runs of step-dpo differ only in their pairs, and every eval shares one protocol."""

from pathlib import Path

import pytest

from reasonkit.config import load_yaml
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import validate

ROOT = Path(__file__).resolve().parents[2] / "recipes"


def configs(name: str, tmp_path, overrides=()):
    path = ROOT / name
    recipe = parse_recipe(load_yaml(path), str(path), list(overrides), out=str(tmp_path))
    return recipe, {p.step.name: p.config for p in validate(recipe)}


def same_protocol(a, b, allowed=("model", "adapter", "out")):
    return {k for k in vars(a) if k not in allowed and getattr(a, k) != getattr(b, k)}


def test_rlaif_fits_a_reward_model_on_the_critique_and_optimises_it_with_a_kl_penalty(tmp_path):
    recipe, c = configs("rlaif-constitutional.yaml", tmp_path)
    assert c["critique"].input == c["traces"].out
    rm, grpo = c["rm"], c["grpo"]
    assert rm.method == "rm" and rm.data == c["critique"].out, "the labeller's (revision over original) prefs"
    assert rm.eval_share > 0 and rm.center_rewards_coefficient and rm.merge
    assert grpo.method == "grpo" and grpo.reward_model == rm.out and "rm" in grpo.rewards
    assert "accuracy" not in grpo.rewards, "the preference model is the signal of the RLAIF loop"
    assert grpo.kl_beta > 0, "RLHF's KL penalty to the starting policy"
    assert grpo.student == c["eval_policy"].model and c["eval_rlaif"].model == f"{grpo.out}/model"
    assert not same_protocol(c["eval_policy"], c["eval_rlaif"])
    assert [tuple(x) for x in recipe.compare] == [("eval_policy", "eval_rlaif")]


def test_step_dpo_and_whole_trace_dpo_differ_only_in_their_pairs(tmp_path, teacher_dir):
    recipe, c = configs("step-dpo.yaml", tmp_path, [f"sft_student.model={teacher_dir}"])
    student = c["sft_student"].out
    assert c["sft_student"].template == "keep"
    assert c["samples"].teacher == student and c["steps"].policy == student
    steps, trace, step = c["steps"], c["dpo_trace"], c["dpo_step"]
    assert steps.input == c["verified"].out and steps.wrong_only and steps.n > 1 and steps.temperature > 0
    assert trace.data == c["pairs"].out and step.data == f"{steps.out}/step_dpo"
    differ = {k for k in vars(trace) if k not in ("data", "out") and getattr(trace, k) != getattr(step, k)}
    assert not differ, f"one learning rate, beta, LoRA shape and student for both; these differ: {differ}"
    assert trace.student == student and trace.method == step.method == "dpo"
    evals = [c[n] for n in ("eval_sft", "eval_dpo_trace", "eval_dpo_step")]
    assert all(e.model == student and e.data == c["eval_problems"].out for e in evals)
    assert [e.adapter for e in evals] == [None, f"{trace.out}/adapter", f"{step.out}/adapter"]
    assert not same_protocol(evals[0], evals[1]) and not same_protocol(evals[0], evals[2])
    assert list(c["verified"].decontam) == [c["eval_problems"].out]
    pairs = {tuple(x) for x in recipe.compare}
    assert ("eval_dpo_trace", "eval_dpo_step") in pairs and ("eval_sft", "eval_dpo_step") in pairs


@pytest.mark.parametrize("name", ["rlaif-constitutional.yaml", "step-dpo.yaml"])
def test_the_header_shows_how_to_run_and_compare(name):
    header = (ROOT / name).read_text().splitlines()[:12]
    assert any("distill run recipes/" + name in line for line in header)
    assert any("distill eval compare" in line for line in header)


def test_plan_sizes_the_reward_model_without_vocabulary_logits_and_a_pair_as_two_rows(tmp_path):
    """--plan sized `method: rm` as SFT: 19.9 GB of logits over the vocabulary a score head never computes, and half
    the tokens of a micro-step (each pair is a chosen and a rejected row)."""
    from reasonkit.recipes.plan import plan
    from reasonkit.recipes.runner import load_state

    recipe, c = configs("rlaif-constitutional.yaml", tmp_path)
    planned = {s.name: s for s in plan(recipe, validate(recipe), load_state(Path(recipe.out)))}
    rm = c["rm"]
    # planned as on a node of 8 GPUs: the rm step's 8 pairs a step go one to a GPU (distill/launch.py's layout)
    assert planned["rm"].gpus == 8 and "8 processes under accelerate launch on GPUs 0-7, 1 x 1" in planned["rm"].layout
    tokens = (rm.batch_size // 8) * rm.max_length * 2
    assert f"at {tokens:,} tokens a micro-step" in planned["rm"].memory and "logits 0.0" in planned["rm"].memory
