"""`distill train --method sft` on a tiny random Llama (CPU, fp32, LoRA through peft, TRL's SFTTrainer):
the loss falls, the report is whole, the adapter and the merged model load in transformers and agree,
and packed rows keep their examples apart."""

import json
from statistics import mean

import pytest
import torch

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.sft import RowPackedCollator
from reasonkit.distill.train import train
from reasonkit.recipes.tasks import math as task
from reasonkit.recipes.tasks.train_sets import write_sft


@pytest.fixture(scope="module")
def sft_dir(tmp_path_factory):
    return write_sft(tmp_path_factory.mktemp("sft") / "sft", n=64)


def config(student, data, out, **kw):
    base = dict(
        method="sft",
        student=str(student),
        data=str(data),
        out=str(out),
        lr=5e-3,
        batch_size=8,
        threads=1,
        save_steps=1000,
    )
    return TrainConfig(**{**base, **kw})


def last_logits(model, inputs):
    with torch.no_grad():
        return model(**inputs).logits[0, -1]


@pytest.mark.slow
def test_sft_lowers_the_loss_and_saves_models_that_load(tiny_model_dir, sft_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lines = []
    report = train(config(tiny_model_dir, sft_dir, tmp_path / "run", max_steps=30, merge=True), log=lines.append)
    losses = [r["loss"] for r in report["history"]]
    assert report["steps"] == 30 and [r["step"] for r in report["history"]] == list(range(1, 31))
    assert mean(losses[-3:]) < mean(losses[:3]) - 0.5, losses
    assert report["tokens"] > 30 * 8 * 80 and report["tokens_per_s"] > 0 and report["peak_memory_bytes"] > 2**20
    assert 0 < report["trainable_parameters"] < report["total_parameters"]  # LoRA trains a small share
    assert report["device"] == {
        "kind": "cpu",
        "bf16": False,
        "gradient_checkpointing": False,
        "threads": 1,
        "world_size": 1,
    }
    assert json.loads((tmp_path / "run" / "report.json").read_text())["loss_final"] == losses[-1]
    assert (tmp_path / "run" / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert any(line.startswith("sft: 30 steps in") for line in lines)

    tok = AutoTokenizer.from_pretrained(report["merged"])
    prompt = [{"role": "user", "content": task.user_content("What is 12 * 34?")}]
    inputs = tok.apply_chat_template(prompt, add_generation_prompt=True, return_dict=True, return_tensors="pt")
    with_adapter = AutoModelForCausalLM.from_pretrained(
        report["adapter"]
    )  # transformers reads the adapter dir via peft
    merged = AutoModelForCausalLM.from_pretrained(report["merged"])
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert torch.allclose(last_logits(with_adapter, inputs), last_logits(merged, inputs), atol=1e-4)
    assert not torch.allclose(last_logits(base, inputs), last_logits(merged, inputs), atol=1e-2)
    generated = merged.generate(**inputs, max_new_tokens=6, do_sample=False)
    assert generated.shape[1] > inputs["input_ids"].shape[1]


def test_packed_rows_keep_examples_apart(tiny_model_dir):
    """An example's logits inside a packed row equal its logits alone: no attention across examples.

    ``use_cache=False`` as in TRL's compute_loss: with a cache transformers ignores the boundaries."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation="sdpa").eval()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(5, 300, (7,), generator=g).tolist(), torch.randint(5, 300, (5,), generator=g).tolist()
    batch = RowPackedCollator(pad_token_id=0)(
        [
            {"input_ids": a + b, "labels": a + b, "seq_lengths": [7, 5]},
            {"input_ids": b, "labels": b, "seq_lengths": [5]},
        ]
    )
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
        alone = model(input_ids=torch.tensor([b])).logits[0]
    assert torch.allclose(packed[0, 7:], alone, atol=1e-5)
    assert torch.allclose(packed[1, :5], alone, atol=1e-5)


def test_packing_trains_on_full_rows(tiny_model_dir, tmp_path):
    data = write_sft(tmp_path / "varied", n=48, extra_checks=(0, 12))
    report = train(
        config(tiny_model_dir, data, tmp_path / "run", max_steps=3, packing=True, max_length=512, batch_size=2)
    )
    tokens = [r["tokens"] for r in report["history"]]
    per_step = [b - a for a, b in zip([0.0, *tokens], tokens)]
    assert report["steps"] == 3
    # the report names what its floats depended on (issue 36 item 3): torch's kernels and threads, the libraries
    hw, versions = report["hardware"], report["versions"]
    assert hw["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and hw["cpu"]
    assert hw["threads"] == 1 and hw["gpu"] is None  # the config's threads=1, on CPU
    assert versions["torch"] == torch.__version__ and versions["trl"] and versions["peft"]
    # Two packed rows of up to 512 real tokens each: more than two examples' worth, never more than the rows hold.
    assert all(2 * 200 < n <= 2 * 512 for n in per_step), per_step
