"""`--plan` against the real GPU (issue 35 items 3 and 7): the GPU it fits is named, sized as torch.cuda reports it
(vLLM takes its fraction of that), and the terms a GPU run adds are counted only where the run has them."""

import os
import stat
from pathlib import Path

import pytest

from reasonkit.config import load_yaml
from reasonkit.recipes import plan as plan_module
from reasonkit.recipes.plan import plan, render
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, validate

ROOT = Path(__file__).resolve().parents[2] / "recipes"
# Qwen2.5-1.5B-Instruct (rlaif's reward model): tied embeddings 151,936 x 1,536; k/v 1,536 x 256
P15 = 151936 * 1536 + 28 * (2 * 1536**2 + 2 * 1536 * 256 + 1536 + 512 + 3 * 1536 * 8960 + 2 * 1536) + 1536
H100 = 81559 * 2**20  # torch.cuda.get_device_properties(0).total_memory on an H100 80GB (SXM)


def planned(name, tmp_path, overrides=(), gpu_gb=None):
    recipe = parse_recipe(load_yaml(ROOT / name), name, list(overrides), out=str(tmp_path))
    return plan(recipe, validate(recipe), load_state(Path(recipe.out)), gpu_gb=gpu_gb)


def terms(text: str) -> dict[str, float]:
    inner = text[text.index("(") + 1 : text.index(")")]
    return {k: float(v) for k, v in (part.rsplit(" ", 1) for part in inner.split(", "))}


@pytest.fixture
def no_gpu_here(monkeypatch):
    monkeypatch.setattr(plan_module, "visible_gpu", lambda smi="nvidia-smi": None)


@pytest.fixture
def an_h200_here(tmp_path, monkeypatch):
    """A machine whose nvidia-smi shows one H200 (143,771 MiB), as the real one answers both queries."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        '#!/bin/sh\nif [ "$1" = "-L" ]; then echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"; '
        'else echo "NVIDIA H200, 143771"; fi\n'
    )
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_the_plan_names_the_gpu_it_fits(tmp_path, no_gpu_here):
    steps = planned("r1-zero-qwen-7b.yaml", tmp_path)
    assert {(s.gpu_name, s.gpu) for s in steps} == {("H100 80GB", H100)}
    assert (
        "memory per GPU fitted to: H100 80GB, 79.6 GiB = 85.5 GB (no GPU visible here; --gpu-gb for another)"
        in render(steps).splitlines()
    )
    given = render(planned("r1-zero-qwen-7b.yaml", tmp_path, gpu_gb=141))
    assert "memory per GPU fitted to: 141 GB (--gpu-gb), 131.3 GiB = 141.0 GB" in given.splitlines()


def test_colocated_vllm_takes_its_fraction_of_the_gpu_this_machine_has(tmp_path, an_h200_here):
    (grpo,) = [s for s in planned("r1-zero-qwen-7b.yaml", tmp_path) if s.name == "grpo"]
    assert grpo.gpu_name == "NVIDIA H200 (this machine's GPU 0)" and grpo.gpu == 143771 * 2**20
    assert terms(grpo.memory)["vllm"] == round(0.35 * 143771 * 2**20 / 1e9, 1) == 52.8


@pytest.mark.parametrize("overrides, per_parameter", [((), 2), (["grpo.bf16=false"], 4)])
def test_the_reward_model_term_is_what_the_scorer_loads(tmp_path, no_gpu_here, overrides, per_parameter):
    """The reward model loads in the policy's dtype (reward/model.py,
    tests/reward/test_model.py):
    bf16 on a GPU, fp32 when the policy trains in fp32; the plan counts those bytes for every process."""
    (grpo,) = [s for s in planned("rlaif-constitutional.yaml", tmp_path, overrides) if s.name == "grpo"]
    assert terms(grpo.memory)["reward model"] == round(P15 * per_parameter / 1e9, 1)


@pytest.mark.parametrize(
    "overrides, mask",
    [
        ((), True),  # sdpa, padded completions: the mask
        (["grpo.attn_implementation=flash_attention_2"], False),  # FlashAttention 2 takes no mask
    ],
)
def test_the_attention_mask_is_counted_only_under_sdpa(tmp_path, no_gpu_here, overrides, mask):
    (grpo,) = [s for s in planned("r1-zero-qwen-7b.yaml", tmp_path, overrides) if s.name == "grpo"]
    assert ("attention mask" in terms(grpo.memory)) == mask, grpo.memory
    assert ("sdpa attention" in grpo.memory) == mask


def test_auto_attention_is_counted_as_the_one_it_resolves_to(tmp_path, no_gpu_here, monkeypatch):
    """levers.resolve_attention: auto is FlashAttention 2 where flash-attn imports, else SDPA and its mask."""
    import importlib.util

    def planned_sft():
        (sft,) = [s for s in planned("r1-distill-qwen-1.5b.yaml", tmp_path) if s.name == "sft"]
        return sft.memory

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else find_spec(name, *a)
    )
    without = planned_sft()
    assert "sdpa attention" in without and terms(without)["attention mask"] == round(2 * 32768**2 * 3 / 1e9, 1) == 6.4
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: object() if name == "flash_attn" else find_spec(name, *a)
    )
    with_flash = planned_sft()
    assert "flash_attention_2 attention" in with_flash and "attention mask" not in terms(with_flash)


def test_the_qwen3_distillation_is_planned_offline_with_a_teacher_copy_a_process(tmp_path, no_gpu_here, monkeypatch):
    """recipes/onpolicy-qwen3.yaml before any download: both models' shapes are the published ones (one embedding size,
    which the pair was chosen for), and every one of the 8 processes holds the bf16 8B teacher."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert plan_module.PUBLISHED["Qwen/Qwen3-8B"][2] == plan_module.PUBLISHED["Qwen/Qwen3-1.7B"][2] == 151_936
    steps = {s.name: s for s in planned("onpolicy-qwen3.yaml", tmp_path / "out")}
    assert steps["distill"].gpus == 8 and terms(steps["distill"].memory)["teacher"] == 16.4, steps["distill"].memory
    assert "114.7 KB a token" in steps["eval_student"].memory  # 2 x 28 layers x 8 KV heads x 128 x 2 bytes
