"""recipes/r1-zero-qwen-7b.yaml: GRPO from a base model at DeepSeek-R1-Zero's settings, validated and planned offline,
and its R1-Zero chat template (recipes/assets/templates/r1-zero.jinja) prepared, rendered and rewarded for real."""

import re
from pathlib import Path

import pytest

from reasonkit import dataset_ref
from reasonkit.config import load_yaml
from reasonkit.recipes.plan import plan
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, validate

ROOT = Path(__file__).resolve().parents[2] / "recipes"
RECIPE = ROOT / "r1-zero-qwen-7b.yaml"
TEMPLATE = ROOT / "assets" / "templates" / "r1-zero.jinja"


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    recipe = parse_recipe(load_yaml(RECIPE), str(RECIPE), out=str(tmp_path_factory.mktemp("r1zero")))
    planned = validate(recipe)
    return {p.step.name: p.config for p in planned}, {
        s.name: s for s in plan(recipe, planned, load_state(Path(recipe.out)))
    }


def test_grpo_uses_r1_zeros_published_settings(steps):
    configs, _ = steps
    g = configs["grpo"]
    assert g.method == "grpo" and g.full and g.student.endswith("student")
    # DeepSeek-R1-Zero: lr 3e-6, KL 0.001, T 1, G 16, 32 questions x 16 = 512 completions a step, a rollout of
    # 8,192 completions split into 16 minibatches trained once
    assert (g.learning_rate, g.kl_beta, g.temperature, g.top_p, g.num_generations) == (3e-6, 0.001, 1.0, 1.0, 16)
    assert g.loss_type == "grpo" and g.scale_rewards == "group" and g.num_iterations == 1
    per_step = g.batch_size * g.num_processes * g.grad_accum
    assert per_step == 512 and per_step // g.num_generations == 32
    assert (
        g.generation_batch_size(g.num_processes) == 8192 and g.generation_batch_size(g.num_processes) // per_step == 16
    )
    # open-r1's 7B values where R1's 671B ones do not carry over
    assert (g.max_completion_length, g.max_grad_norm, g.mask_truncated_completions) == (8192, 0.2, True)
    assert g.rewards == {"accuracy": 1.0, "format": 0.25}, "a well-formed wrong answer must score below a right one"
    # use_vllm auto: vLLM colocated wherever CUDA and a vLLM TRL supports are (distill/rl/grpo.py resolve_vllm)
    assert g.use_vllm is None and g.vllm_mode == "colocate" and g.vllm_gpu_memory_utilization == 0.35
    assert g.launcher == "accelerate" and g.accelerate_config == "zero3" and g.bf16 and g.gradient_checkpointing
    ref = dataset_ref.parse(g.data)
    assert ref.source == "open-r1/OpenR1-Math-220k" and re.fullmatch(r"[0-9a-f]{40}", ref.revision or ""), (
        "pinned to a commit"
    )


def test_the_base_and_the_trained_model_are_evaluated_alike(steps):
    configs, _ = steps
    base, trained = configs["eval_base"], configs["eval_grpo"]
    assert (base.k, base.temperature, base.top_p, base.max_tokens) == (64, 0.6, 0.95, 32768)  # R1's protocol
    assert base.data == "HuggingFaceH4/aime_2024:train" and trained.model.endswith("grpo/model")
    differ = {k for k in vars(base) if k not in ("model", "out") and getattr(base, k) != getattr(trained, k)}
    assert not differ, f"the paired comparison needs one protocol; these differ: {differ}"
    assert base.model == configs["grpo"].student == configs["student"].out  # both read the prepared base
    assert configs["student"].model == "Qwen/Qwen2.5-7B" and configs["student"].template == str(TEMPLATE)


def test_plan_sizes_grpo_by_its_completions_beside_vllm(steps):
    """A GRPO micro-step holds batch_size x (prompt + max_completion_length) tokens and no whole logits
    (TRL's fused LM head); before, --plan sized it as 4,096-token SFT rows with 22 GB of logits, or not at all."""
    _, planned = steps
    grpo = planned["grpo"]
    assert grpo.gpus == 8 and "under accelerate" in grpo.layout
    # the fused head: a 4,096 x 32,768 bf16 tile (0.3 GB), the hidden states' fp32 gradient 36,864 x 3,584 x 4
    # (0.5 GB) and the head's 152,064 x 3,584 x 4 (2.2 GB)
    assert "at 36,864 tokens a micro-step" in grpo.memory and "logits 3.0" in grpo.memory, grpo.memory
    assert "vLLM colocated: 35% of the GPU" in grpo.memory
    assert "weights 15.2 GB/GPU (7.62B params" in planned["eval_base"].memory  # Qwen2.5-7B's published size


def test_the_template_ends_turns_with_the_base_eos_and_earns_both_rewards(tmp_path, teacher_dir):
    """prepare-student writes the R1-Zero template into a copy of a base model (here the embedded teacher, whose
    EOS plays Qwen2.5's <|endoftext|>); a completion written as the template asks gets accuracy and format 1.0."""
    from transformers import AutoTokenizer

    from reasonkit.distill.prepare.run import PrepareConfig, prepare_student
    from reasonkit.distill.prepare.templates import turn_end_token
    from reasonkit.reward.functions import make_rewards

    eos = AutoTokenizer.from_pretrained(teacher_dir).eos_token
    prepare_student(
        PrepareConfig(model=str(teacher_dir), out=str(tmp_path / "student"), template=str(TEMPLATE), eos=eos)
    )
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "student"))
    assert turn_end_token(tok) == eos
    user = [{"role": "user", "content": "Compute 17 x 23"}]
    prompt = tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("A conversation between User and Assistant.") and "<think> </think>" in prompt
    assert prompt.endswith("\nUser: Compute 17 x 23\nAssistant: ") and "\\boxed{}" in prompt
    system = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, *user], tokenize=False, add_generation_prompt=True
    )
    assert system.startswith("Be brief.\nUser:"), "a system message replaces the default instruction"
    funcs, _ = make_rewards({"accuracy": 1.0, "format": 0.25}, max_completion_length=64, prefilled=False)
    right = r"<think> 17 x 23 = 17 x 20 + 17 x 3 = 340 + 51 = 391 </think> The product is \boxed{391}."
    wrong = r"<think> 17 x 23 = 381 </think> The product is \boxed{381}."
    scores = [f([prompt] * 3, [right, wrong, "391"], answer=["391"] * 3) for f in funcs]
    # the bare "391" is the answer as math-verify's default parse reads an unboxed reply (issue 27): accuracy
    # earns it, the format reward (think block + box) does not
    assert scores == [[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], scores
