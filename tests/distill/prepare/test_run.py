"""`distill prepare-student` on a Qwen2.5-Math-1.5B in miniature (tests/helpers/prepare.py): the lint
finds the student's three problems before preparation and none after; the prepared directory has the
new context, RoPE theta, EOS and marked template, shares the weights' bytes, loads in transformers,
and trains with assistant-only loss."""

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reasonkit.distill import data
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.lint import checks as lint
from reasonkit.distill.prepare.run import PrepareConfig, prepare_student
from reasonkit.distill.train import train
from reasonkit.errors import UserError
from reasonkit.recipes.tasks import math as task
from reasonkit.recipes.tasks.train_sets import sft_table, write_stage

from ...helpers.prepare import build_qwen_math_like


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    return build_qwen_math_like(tmp_path_factory.mktemp("qwen-math") / "base", task.corpus(n=200, seed=0))


@pytest.fixture(scope="module")
def prepared(base, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("prepared") / "student"
    return prepare_student(
        PrepareConfig(model=base, out=str(out), max_positions=32768, rope_theta=300000, template="chatml")
    )


def lint_checks(student: str, max_length: int) -> list[str]:
    cfg = TrainConfig(method="sft", student=student, data="unused", out="unused", max_length=max_length)
    tok = data.load_tokenizer(cfg)
    data.resolve_template(tok, cfg)
    found, _ = lint.lint(
        tok,
        data.load_rows(sft_table(8), "sft", "t"),
        cfg,
        max_length=max_length,
        stops=data.stop_ids(tok, student),
        max_positions=data.max_positions(student),
    )
    return [f.check for f in found]


def test_the_lint_finds_the_three_problems_before_and_none_after(base, prepared):
    before = lint_checks(base, 16384)
    assert {"context", "eos_turn_end", "generation_markers"} <= set(before), before
    assert lint_checks(prepared["model"], 16384) == []


def test_train_on_the_base_stops_at_the_lint_naming_the_prepare_command(base, tmp_path):
    sft = write_stage(tmp_path / "sft", "sft", sft_table(8))
    cfg = TrainConfig(method="sft", student=base, data=str(sft), out=str(tmp_path / "out"), max_length=16384)
    with pytest.raises(
        UserError,
        match=r"lint \(context\): --max-length 16384 exceeds the student's context length \(4096 "
        r"positions\).*distill prepare-student .*base --out base-prepared --max-positions 16384 --template chatml",
    ):
        train(cfg)
    messages = {f["check"]: f["message"] for f in json.loads((tmp_path / "out" / "lint.json").read_text())["findings"]}
    assert "ends turns with '<|im_end|>' but generation stops at '<|endoftext|>'" in messages["eos_turn_end"]
    assert "prepare-student" in messages["generation_markers"]


def test_the_prepared_directory(base, prepared):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = Path(prepared["model"])
    config = AutoConfig.from_pretrained(out)
    assert config.max_position_embeddings == 32768 and config.rope_parameters["rope_theta"] == 300000.0
    tok = AutoTokenizer.from_pretrained(out)
    im_end, endoftext = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert (tok.eos_token, tok.pad_token, config.eos_token_id) == ("<|im_end|>", "<|endoftext|>", im_end)
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == [im_end, endoftext]
    assert prepared["renders_like_original"] is True  # the model's own default system prompt is kept
    # the weights are the base's bytes, linked, not rewritten
    assert os.stat(out / "model.safetensors").st_ino == os.stat(Path(base) / "model.safetensors").st_ino
    model, original = AutoModelForCausalLM.from_pretrained(out), AutoModelForCausalLM.from_pretrained(base)
    assert all(
        (a == b).all() for a, b in zip(model.state_dict().values(), original.state_dict().values(), strict=True)
    )
    assert model.generation_config.eos_token_id == [im_end, endoftext]
    # assistant-only loss: the mask covers the answer and its turn end, nothing of the prompt
    messages = [{"role": "user", "content": "What is 2 * 3?"}, {"role": "assistant", "content": "6"}]
    enc = tok.apply_chat_template(messages, return_dict=True, return_assistant_tokens_mask=True)
    assert tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]) == "6<|im_end|>"


def test_a_rerun_returns_and_a_clash_is_refused(base, prepared, tmp_path):
    same = PrepareConfig(model=base, out=prepared["model"], max_positions=32768, rope_theta=300000, template="chatml")
    assert prepare_student(same) == prepared
    with pytest.raises(UserError, match="was prepared with other settings or from another model; pass --overwrite"):
        prepare_student(PrepareConfig(model=base, out=prepared["model"], max_positions=8192, template="chatml"))
    with pytest.raises(UserError, match=r"--template llama3: .*vocabulary lacks <\|start_header_id\|>, <\|eot_id\|>"):
        prepare_student(PrepareConfig(model=base, out=str(tmp_path / "x"), template="llama3"))
    scaled = prepare_student(PrepareConfig(model=base, out=str(tmp_path / "yarn"), rope_scaling="yarn:4"))
    assert scaled["rope_scaling"][1] == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    assert not (tmp_path / "x").exists()


def test_sft_with_assistant_only_loss_runs_on_the_prepared_student(prepared, tmp_path):
    sft = write_stage(tmp_path / "sft", "sft", sft_table(8))
    report = train(
        TrainConfig(
            method="sft",
            student=prepared["model"],
            data=str(sft),
            out=str(tmp_path / "out"),
            max_length=16384,
            max_steps=2,
            batch_size=4,
            threads=1,
            lr=1e-3,
        )
    )
    assert report["steps"] == 2 and report["lint"] == [] and report["chat_template_note"] is None
    assert report["loss_first"] > 0


def test_the_command_and_the_recipe_stage(base, tmp_path):
    from reasonkit.cli import cli
    from reasonkit.stages import STAGES

    result = CliRunner().invoke(
        cli, ["prepare-student", base, "--out", str(tmp_path / "s"), "--max-positions", "8192"]
    )
    assert result.exit_code == 0, result.output
    assert (
        "max_position_embeddings: 4096 -> 8192" in result.output
        and "eos: <|endoftext|> -> <|im_end|>" in result.output
    )
    result = CliRunner().invoke(cli, ["prepare-student", base, "--out", str(tmp_path / "t"), "--rope-scaling", "yarn"])
    assert result.exit_code == 2 and "rope_scaling: expected TYPE:FACTOR" in result.output
    assert STAGES["prepare-student"].config_class() is PrepareConfig


def test_template_keep_copies_a_reasonkit_student_as_it_is(teacher_dir, tmp_path):
    """`--template keep` (recipes/step-dpo.yaml's first step): a model whose template already has
    {% generation %} markers keeps it and its EOS; a model without such a template is refused in one line."""
    from transformers import AutoTokenizer

    from reasonkit.distill.prepare.run import PrepareConfig, prepare_student

    prepare_student(PrepareConfig(model=teacher_dir, out=str(tmp_path / "kept"), template="keep"))
    before, after = AutoTokenizer.from_pretrained(teacher_dir), AutoTokenizer.from_pretrained(tmp_path / "kept")
    assert after.chat_template == before.chat_template and after.eos_token == before.eos_token == "<|end|>"

    plain = tmp_path / "plain"
    shutil.copytree(teacher_dir, plain)
    (plain / "chat_template.jinja").write_text(
        before.chat_template.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    )
    with pytest.raises(UserError, match="--template keep: .* no chat template with \\{% generation %\\}"):
        prepare_student(PrepareConfig(model=str(plain), out=str(tmp_path / "refused"), template="keep"))
    assert not (tmp_path / "refused" / "config.json").exists()
