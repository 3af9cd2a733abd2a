"""`--plan`'s memory per GPU on the shipped GPU recipes, term by term, against hand arithmetic: what DeepSpeed,
FSDP, TRL and vLLM allocate (distill/lint/memory.py, recipes/plan.py), and a step that does not fit refused (exit 2)."""  # noqa: E501

from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.config import load_yaml
from reasonkit.recipes.plan import PUBLISHED_SHAPES, kv_per_token, plan
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, validate

ROOT = Path(__file__).resolve().parents[2] / "recipes"
GB = 1e9
# Qwen2.5-7B(-Instruct): untied embeddings and head 152,064 x 3,584; a layer: q/o 3,584^2 each, k/v 3,584 x 512 each,
# q/k/v biases 3,584 + 2 x 512, MLP 3 x 3,584 x 18,944, two norms; 28 layers; the final norm.
P7 = 2 * 152064 * 3584 + 28 * (2 * 3584**2 + 2 * 3584 * 512 + 3584 + 1024 + 3 * 3584 * 18944 + 2 * 3584) + 3584
# Qwen2.5-1.5B / Math-1.5B: tied embeddings 151,936 x 1,536; k/v 1,536 x 256
P15 = 151936 * 1536 + 28 * (2 * 1536**2 + 2 * 1536 * 256 + 1536 + 512 + 3 * 1536 * 8960 + 2 * 1536) + 1536
TILE = 4096 * 32768 * 2  # TRL's fused LM head: one bf16 tile of 4,096 tokens x 32,768 vocabulary entries


def head(tokens, h, vocab=0):
    """The fused head: the tile, the hidden states' fp32 gradient, and the head's own when it trains (vocab)."""
    return TILE + tokens * h * 4 + vocab * h * 4


def steps(name, tmp_path, overrides=(), gpu_gb=None):
    recipe = parse_recipe(load_yaml(ROOT / name), name, list(overrides), out=str(tmp_path))
    return {s.name: s for s in plan(recipe, validate(recipe), load_state(Path(recipe.out)), gpu_gb=gpu_gb)}


def terms(text: str) -> dict[str, float]:
    """'62.5 GB (weights 1.9, gradients 1.9, ...)' -> {'weights': 1.9, ...} (GB)."""
    inner = text[text.index("(") + 1 : text.index(")")]
    return {k: float(v) for k, v in (part.rsplit(" ", 1) for part in inner.split(", "))}


def gb(n: float) -> float:
    return round(n / GB, 1)


def activations(tokens, h, layers, inter, kv, checkpointing=True, width=2):
    layer = tokens * (6 * h + 2 * kv + 4 * inter) * width
    return layers * tokens * h * width + layer if checkpointing else layers * layer


def test_r1_zero_grpo_is_zero3_with_a_reference_and_colocated_vllm(tmp_path):
    """ZeRO-3 over 8: 16 bytes a parameter (bf16 weights 2, bf16 grads 2, fp32 master + moments 12), the KL
    reference (beta 0.001, full) sharded too; 4 completions of 1,024 + 8,192 tokens; vLLM 0.35 of the H100's
    79.6 GiB; SDPA's mask (the step leaves attn_implementation at sdpa), ZeRO-3's buckets, the CUDA context, NCCL.
    Before: optimizer 3.8 GB (moments counted in bf16), no reference, vLLM outside the total (22.3 GB); then
    62.8 GB, against 0.35 x 80 GB and without the last four terms (issue 35 item 7 redid it by hand: ~70)."""
    grpo = steps("r1-zero-qwen-7b.yaml", tmp_path)["grpo"]
    t = terms(grpo.memory)
    tokens = 4 * (1024 + 8192)
    exact = {
        "weights": 2 * P7 / 8,
        "gradients": 2 * P7 / 8,
        "optimizer": 12 * P7 / 8,
        "reference": 2 * P7 / 8,
        "activations": activations(tokens, 3584, 28, 18944, 512),
        "logits": head(tokens, 3584, 152064),
        "vllm": 0.35 * 81559 * 2**20,  # torch.cuda's total_memory for an H100 80GB: 81,559 MiB
        # a boolean 4 x 9,216 x 9,216 mask, and the bf16 one torch's SDPA makes of it for the layer recomputed
        "attention mask": 4 * 9216**2 * (1 + 2),
        # DeepSpeed's default reduce (5e8) and prefetch (5e7) buckets and the LM head gathered whole, bf16
        "zero3 buffers": (500_000_000 + 50_000_000 + 152064 * 3584) * 2,
        "cuda context": 0.5e9,
        "nccl": 1.0e9,
    }
    assert t == {k: gb(v) for k, v in exact.items()}, t
    assert (gb(exact["vllm"]), gb(exact["attention mask"]), gb(exact["zero3 buffers"])) == (29.9, 1.0, 2.2)
    assert grpo.memory.startswith(f"{gb(sum(exact.values()))} GB") and gb(sum(exact.values())) == 69.4
    assert grpo.refusal is None


def test_rlaif_grpo_holds_the_reward_model_in_every_process(tmp_path):
    """The rm reward's model (the rm step's Qwen2.5-1.5B-Instruct, merged) in bf16, whole, in each of the 8 processes."""  # noqa: E501
    t = terms(steps("rlaif-constitutional.yaml", tmp_path)["grpo"].memory)
    assert t["reward model"] == gb(2 * P15) == 3.1 and t["reference"] == gb(2 * P7 / 8)
    assert t["activations"] == gb(activations(8 * (1024 + 4096), 3584, 28, 18944, 512))


def test_sft_and_dpo_have_no_whole_logits_and_a_pair_is_two_rows(tmp_path, monkeypatch):
    """constitutional.yaml: LoRA r=32 on the 7B, 8 rows of 8,192 tokens; DPO's chosen and rejected are two rows in
    one forward, so 16 rows. Before: SFT and DPO both 82.4 GB with 39.9 GB of logits TRL 1.16 never builds.
    Planned on a machine of one GPU, which holds all 8 rows (on a node of 8 each GPU holds one: test_launch_gpus.py).
    43.8 and 70.7 GB before SDPA's mask (8 or 16 x 8,192^2 x 3 bytes: 1.6, 3.2 GB) and the CUDA context (0.5 GB)
    were counted (issue 35 item 7); one process: no NCCL."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    plans = steps("constitutional.yaml", tmp_path)
    sft, dpo = terms(plans["sft"].memory), terms(plans["dpo"].memory)
    # LoRA: the head is frozen, so no fp32 head gradient, only the hidden states' of every token
    assert (sft["logits"], dpo["logits"]) == (gb(head(8 * 8192, 3584)), gb(head(2 * 8 * 8192, 3584))) == (1.2, 2.1)
    assert sft["activations"] == gb(activations(8 * 8192, 3584, 28, 18944, 512)) == 26.0
    assert dpo["activations"] == gb(activations(2 * 8 * 8192, 3584, 28, 18944, 512)) == 52.1
    assert "reference" not in dpo, "LoRA's reference is the base with the adapter off: no copy"
    assert (sft["attention mask"], dpo["attention mask"], sft["cuda context"]) == (1.6, 3.2, 0.5) and "nccl" not in sft
    assert plans["sft"].memory.startswith("45.9 GB") and plans["dpo"].memory.startswith("74.5 GB")
    # the frozen 7B in bf16 and the r=32 adapters on every linear layer in fp32, with fp32 grads and two moments
    adapters = 28 * 32 * ((3584 + 3584) * 2 + (3584 + 512) * 2 + (3584 + 18944) * 3)
    assert (sft["weights"], sft["gradients"], sft["optimizer"]) == (
        gb(2 * P7 + 4 * adapters),
        gb(4 * adapters),
        gb(8 * adapters),
    )
    raw = terms(steps("constitutional.yaml", tmp_path, ["sft.gradient_checkpointing=false"])["sft"].memory)
    assert raw["activations"] == gb(activations(8 * 8192, 3584, 28, 18944, 512, checkpointing=False)) == 360.8
    pairs = terms(steps("dpo-verifier-pairs.yaml", tmp_path)["dpo"].memory)
    assert pairs["activations"] == gb(activations(2 * 4 * 4096, 1536, 28, 8960, 256))


def test_full_dpo_keeps_a_reference_copy_unless_precomputed(tmp_path):
    full = ["dpo.full=true", "dpo.lora_r=16"]
    t = terms(steps("dpo-verifier-pairs.yaml", tmp_path, full + ["dpo.precompute_ref=false"])["dpo"].memory)
    assert t["reference"] == gb(2 * P15) and t["optimizer"] == gb(4 * P15)  # one process: AdamW in bf16
    t = terms(steps("dpo-verifier-pairs.yaml", tmp_path, full)["dpo"].memory)  # the recipe precomputes it
    assert "reference" not in t


def test_kv_cache_per_token_comes_from_the_config():
    assert kv_per_token(PUBLISHED_SHAPES["Qwen/Qwen2.5-7B"]) == 2 * 28 * 4 * 128 * 2 == 57_344
    assert kv_per_token(PUBLISHED_SHAPES["Qwen/Qwen2.5-Math-1.5B"]) == 2 * 28 * 2 * 128 * 2
    assert kv_per_token(PUBLISHED_SHAPES["Qwen/Qwen2.5-7B"], tp=2) == 2 * 28 * 2 * 128 * 2  # KV heads split over TP
    # DeepSeek-R1's MLA: (512 latent + 64 RoPE) x 2 bytes a layer, the 61 layers over 2 stages (31 on the larger)
    assert kv_per_token(PUBLISHED_SHAPES["deepseek-ai/DeepSeek-R1"], tp=8, pp=2) == (512 + 64) * 31 * 2


def test_a_sequence_longer_than_the_kv_cache_is_refused(tmp_path):
    """Qwen2.5-7B-Instruct's eval at gpu_memory_utilization 0.19 of the H100's 85.5 GB (79.6 GiB): 16.2 - 15.2 GB
    leaves ~18K tokens at 57 KB, fewer than one 32,768-token sequence (its max_position_embeddings): vLLM would
    refuse to start. (0.21 did not fit the 80 GB the plan assumed before issue 35 item 7; of 85.5 GB it does.)"""
    eval_step = steps("r1-api-teacher-7b.yaml", tmp_path, ["eval_aime24.gpu_memory_utilization=0.19"])["eval_aime24"]
    assert eval_step.refusal.startswith("KV cache: "), eval_step.refusal
    assert "fewer than one 32,768-token sequence" in eval_step.refusal


@pytest.mark.parametrize(
    "overrides, term",
    [
        (["traces.engine_args.pipeline_parallel_size=1"], "step traces (generate): weights 85.6 GB/GPU do not fit"),
        (["sft.batch_size=16", "sft.grad_accum=1"], "step sft (train): the estimate "),
    ],
)
def test_cli_plan_refuses_a_step_that_does_not_fit_exit_2(tmp_path, overrides, term):
    args = ["run", str(ROOT / "r1-distill-qwen-1.5b.yaml"), "--plan", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(cli, [*args, *(x for o in overrides for x in ("--set", o))])
    assert result.exit_code == 2, result.output
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and term in error and "Traceback" not in result.output, error
    assert not (tmp_path / "run").exists()
    if "sft" in term:
        assert "the largest term: activations" in error
    else:  # an H200 holds R1's FP8 weights on one node
        again = CliRunner().invoke(cli, [*args, "--gpu-gb", "141", *(x for o in overrides for x in ("--set", o))])
        assert again.exit_code == 0, again.output


def test_distill_run_on_a_gpu_refuses_a_step_that_does_not_fit_before_the_first_step(tmp_path, monkeypatch):
    """`distill run` itself (not only --plan) on an 80 GB GPU machine: the R1 teacher at PP 1 is refused before
    anything starts; nothing is written."""
    from reasonkit.errors import UserError
    from reasonkit.recipes import preflight
    from reasonkit.recipes.runner import run

    monkeypatch.setattr(preflight, "gpu_memory_gb", lambda: 80.0)
    monkeypatch.setattr(preflight, "installed", lambda name: True)
    monkeypatch.setattr(preflight, "gpu_here", lambda: False)  # the vLLM check is test_preflight's
    recipe = parse_recipe(
        load_yaml(ROOT / "r1-distill-qwen-1.5b.yaml"),
        "r1.yaml",
        ["traces.engine_args.pipeline_parallel_size=1"],
        out=str(tmp_path / "run"),
    )
    with pytest.raises(
        UserError, match=r"1 step\(s\) would not fit this 80 GB GPU: step traces \(generate\): weights 85.6 GB/GPU"
    ):
        run(recipe)
    assert not (tmp_path / "run").exists()
