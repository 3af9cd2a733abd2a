"""How `distill train --method grpo` and `--method distill` sample on TRL's transformers path (distill/sampling.py):
from the policy in eval mode (no dropout), the LoRA adapter merged where the round trip is exact (fp32) and
unmerged after, with a KV cache whatever the student's generation_config says; the frozen weights come back
unchanged."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.sampling import merges_exactly, sampling_policy
from reasonkit.distill.train import train

from .onpolicy.test_trainer import settings as distill_settings
from .rl.test_grpo import settings, write_prompts


def lora_teacher(teacher_dir, dtype=torch.float32):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=dtype)
    config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def frozen(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}


def is_merged(model) -> bool:
    return any(getattr(m, "merged", False) for m in model.modules())


def test_merge_round_trips_restore_the_weights_and_train_mode(teacher_dir):
    model = lora_teacher(teacher_dir)
    torch.manual_seed(0)
    with torch.no_grad():  # peft starts lora_B at zero, where a merge would change nothing
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    before, adapter = frozen(model), {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    x = torch.tensor([[5, 7, 9, 11, 13, 17]])
    model.eval()
    with torch.no_grad():
        expected = model(x).logits
    model.train()
    for _ in range(200):
        with sampling_policy(model, merge=True):
            assert not model.training and is_merged(model)
    assert model.training and not is_merged(model)
    with sampling_policy(model, merge=True), torch.no_grad():  # merged, the policy computes what the adapter does
        assert torch.allclose(model(x).logits, expected, atol=1e-5)
    for name, w in frozen(model).items():
        assert (w - before[name]).abs().max() < 1e-6, name
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert torch.equal(p, adapter[name]), name
    model.eval()  # a model in eval mode is left in eval mode
    with sampling_policy(model, merge=False):
        assert not is_merged(model)
    assert not model.training


def test_only_fp32_peft_models_merge(teacher_dir):
    from transformers import AutoModelForCausalLM

    assert merges_exactly(lora_teacher(teacher_dir))
    assert not merges_exactly(lora_teacher(teacher_dir, dtype=torch.bfloat16))  # bf16: each round trip would drift
    assert not merges_exactly(AutoModelForCausalLM.from_pretrained(teacher_dir))  # full fine-tuning: no adapter


@pytest.mark.parametrize("method", ["grpo", pytest.param("distill", marks=pytest.mark.slow)])
def test_the_policy_samples_merged_in_eval_mode_with_a_kv_cache(method, teacher_dir, tmp_path, monkeypatch):
    """A real LoRA run from a student whose generation_config turns the KV cache off: every generate sees the
    policy in eval mode with the adapter merged and a cache; the frozen weights end where they started."""
    from peft import PeftModelForCausalLM

    student = tmp_path / "student"
    if method == "grpo":
        shutil.copytree(teacher_dir, student)
    else:  # a fresh student: one copied from the teacher would diverge from it by 0, and never move
        from reasonkit.recipes.teachers.student import StudentConfig, init_student

        init_student(StudentConfig(tokenizer=teacher_dir, out=str(student)))
    gen = json.loads((student / "generation_config.json").read_text())
    (student / "generation_config.json").write_text(json.dumps(gen | {"use_cache": False}))

    seen, models = [], []
    generate = PeftModelForCausalLM.generate

    def spy(self, *args, **kwargs):
        resolved, _ = self.get_base_model()._prepare_generation_config(kwargs.get("generation_config"))
        seen.append((self.training, is_merged(self), resolved.use_cache))
        models.append(self)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(PeftModelForCausalLM, "generate", spy)
    prompts = write_prompts(tmp_path / "prompts.jsonl", n=8)
    if method == "grpo":
        s = settings(student, prompts, tmp_path / "run") | {"max_steps": 2}
    else:
        s = distill_settings(student, teacher_dir, prompts, tmp_path / "run") | {"max_steps": 2}
    report = train(TrainConfig(**s))
    assert report["steps"] == 2 and len(seen) == 2
    assert seen == [(False, True, True)] * 2, seen  # (training, merged, use_cache) as each generate saw it
    model = models[-1]
    assert model.training and not is_merged(model)
    moved = [n for n, p in model.named_parameters() if "lora_B" in n and p.abs().max() > 0]
    assert moved, "the adapter trained between the generations"
    original = load_file(str(student / "model.safetensors"))
    after = {n.removeprefix("base_model.model.").replace(".base_layer", ""): w for n, w in frozen(model).items()}
    assert set(after) <= set(original) and any(".q_proj." in n for n in after)
    for name, w in after.items():
        assert (w - original[name]).abs().max() < 1e-6, name
