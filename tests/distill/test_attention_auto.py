"""``attn_implementation: auto`` (issue 35 item 5): FlashAttention 2 where flash-attn imports on a GPU, SDPA otherwise,
for the student and the reward heads alike, recorded in the train report; padding_free under auto is turned off (with a
warning) where auto resolves to SDPA. Before, "auto" reached from_pretrained as it was, the config refused it with
padding_free, and the shipped recipes named flash_attention_2, which a node where flash-attn did not build cannot
run."""

import importlib.util
from pathlib import Path

import pytest

from reasonkit.config import load_yaml
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.reward import heads
from reasonkit.distill.sft import RowPackedCollator, build_sft_trainer, sft_arguments
from reasonkit.distill.student import Device, load_model, trainer_args
from reasonkit.errors import UserError
from reasonkit.recipes import preflight
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import validate
from reasonkit.recipes.tasks.train_sets import sft_table, write_stage

CPU = Device(kind="cpu", bf16=False, gradient_checkpointing=False, threads=1, world_size=1)
CUDA = Device(kind="cuda", bf16=True, gradient_checkpointing=True, threads=1, world_size=1)
RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def flash_attn_importable(monkeypatch, present: bool) -> None:
    """find_spec("flash_attn") answers as on a node where flash-attn built (or did not); nothing is imported."""
    real = importlib.util.find_spec
    spec = real("json") if present else None  # any spec stands for flash-attn's
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "flash_attn" else real(name, *a))


def captured_from_pretrained(monkeypatch, cls) -> dict:
    """The keyword arguments ``cls.from_pretrained`` is called with (no weights load)."""
    seen = {}
    monkeypatch.setattr(cls, "from_pretrained", classmethod(lambda _c, ref, **kw: seen.update(kw, ref=ref) or "model"))
    return seen


@pytest.mark.parametrize(
    "present, device, expected", [(True, CUDA, "flash_attention_2"), (False, CUDA, "sdpa"), (True, CPU, "sdpa")]
)
def test_the_student_and_a_reward_head_load_with_auto_resolved(monkeypatch, present, device, expected):
    import transformers

    flash_attn_importable(monkeypatch, present)
    student = captured_from_pretrained(monkeypatch, transformers.AutoModelForCausalLM)
    load_model(TrainConfig(method="sft", student="m", data="d", out="o", attn_implementation="auto"), device)
    head = captured_from_pretrained(monkeypatch, transformers.AutoModelForSequenceClassification)
    rm = TrainConfig(method="rm", student="m", data="d", out="o", attn_implementation="auto")
    heads.load_head_model(rm, device, 0)
    assert (student["attn_implementation"], head["attn_implementation"]) == (expected, expected)
    load_model(TrainConfig(method="sft", student="m", data="d", out="o", attn_implementation="flash_attention_2"), CPU)
    assert student["attn_implementation"] == "flash_attention_2", "a name other than auto is passed as given"


def test_padding_free_under_auto_holds_with_flash_attention_and_is_turned_off_under_sdpa(monkeypatch, tmp_path):
    c = TrainConfig(
        method="sft", student="m", data="d", out="o", packing=True, padding_free=True, attn_implementation="auto"
    )
    with pytest.warns(UserWarning, match="padding_free is off for this run: .* auto resolved to sdpa"):
        assert sft_arguments(c, trainer_args(c, CPU, tmp_path, 512)).padding_free is False
    flash_attn_importable(monkeypatch, True)
    gpu = Device(kind="cuda", bf16=False, gradient_checkpointing=False, threads=1, world_size=1)  # bf16: a real GPU
    assert sft_arguments(c, trainer_args(c, gpu, tmp_path, 512)).padding_free is True
    with pytest.raises(UserError, match="padding_free: needs a FlashAttention attn_implementation .* found 'sdpa'"):
        TrainConfig(method="sft", student="m", data="d", out="o", packing=True, padding_free=True)


def test_a_packed_auto_run_trains_on_sdpa_row_by_row_and_the_report_says_so(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from reasonkit.distill.data import load_tokenizer, to_dataset
    from reasonkit.distill.train import train

    c = TrainConfig(
        method="sft",
        student=tiny_model_dir,
        data="d",
        out="o",
        full=True,
        packing=True,
        padding_free=True,
        attn_implementation="auto",
    )
    with pytest.warns(UserWarning, match="padding_free is off"):
        trainer = build_sft_trainer(
            c,
            AutoModelForCausalLM.from_pretrained(tiny_model_dir),
            load_tokenizer(c),
            to_dataset(sft_table(8), "sft"),
            trainer_args(c, CPU, tmp_path, 256),
            None,
            [],
        )
    assert isinstance(trainer.data_collator, RowPackedCollator)
    data = write_stage(tmp_path / "sft", "sft", sft_table(8))
    report = train(
        TrainConfig(
            method="sft",
            student=tiny_model_dir,
            data=str(data),
            out=str(tmp_path / "out"),
            max_steps=1,
            batch_size=4,
            warmup=0,
            threads=1,
            device="cpu",
            attn_implementation="auto",
        )
    )
    assert report["attn_implementation"] == "sdpa" and report["config"]["attn_implementation"] == "auto"


@pytest.mark.parametrize("name", ["r1-distill-qwen-1.5b.yaml", "r1-api-teacher-7b.yaml"])
def test_the_shipped_gpu_recipes_train_without_flash_attn_installed(name, tmp_path, monkeypatch):
    """They ask for auto: flash-attn is used where it built, and its absence is no missing package."""
    monkeypatch.setattr(preflight, "installed", lambda module: module != "flash_attn")
    planned = validate(parse_recipe(load_yaml(RECIPES / name), str(RECIPES / name), out=str(tmp_path / "run")))
    trains = [p for p in planned if p.step.stage == "train"]
    assert trains and all(p.config.attn_implementation == "auto" for p in trains)
    assert not [line for line in preflight.missing(planned, cuda=lambda: False) if "flash_attn" in line]
    assert preflight.needs_of("train", {"attn_implementation": "flash_attention_2"})[0].module == "flash_attn"


def test_no_shipped_recipe_names_flash_attention_2():
    named = [r.name for r in RECIPES.glob("*.yaml") if "attn_implementation: flash_attention_2" in r.read_text()]
    assert not named, f"{named}: use attn_implementation auto (flash-attn is a source build that may be absent)"
