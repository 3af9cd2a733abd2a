"""The embedded teacher: the command still trains, and the shipped asset still solves the task."""

import json
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from click.testing import CliRunner

from reasonkit.recipes.tasks import math as task
from reasonkit.recipes.teachers.command import make_teacher_command
from reasonkit.recipes.teachers.math import DEFAULT_DIR, REPORT, accuracy, complete, make_teacher


def test_importing_the_module_imports_no_torch():
    code = "import sys, reasonkit.recipes.teachers.math; sys.exit('torch' in sys.modules or 'transformers' in sys.modules)"  # noqa: E501
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_make_teacher_for_a_few_steps_writes_a_loadable_model_and_a_report(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report = make_teacher(tmp_path, n_train=32, max_steps=3, n_eval=2, temperatures=(1.0,), log=None)
    assert report["steps"] == 3 and report["n_train"] == 32 and report["parameters"] > 1_000_000
    assert json.loads((tmp_path / REPORT).read_text()) == report
    assert set(report["greedy_accuracy"]) == set(task.VARIANTS)
    assert set(report["sampled_accuracy"]["1.0"]) == set(task.VARIANTS)
    model, tok = AutoModelForCausalLM.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    assert model.config.model_type == "llama" and tok.chat_template


def test_make_teacher_command(tmp_path):
    runner = CliRunner()
    assert "--max-steps" in runner.invoke(make_teacher_command, ["--help"]).output
    result = runner.invoke(
        make_teacher_command, ["--out", str(tmp_path), "--n-train", "16", "--max-steps", "2", "--n-eval", "1"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "model.safetensors").is_file() and (tmp_path / REPORT).is_file()
    assert '"steps": 2' in result.output


# The shipped asset: read-only, never retrained by tests.


@pytest.fixture(scope="module")
def shipped():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not (DEFAULT_DIR / "model.safetensors").is_file():
        pytest.fail(f"the shipped teacher is missing: {DEFAULT_DIR} (run `distill make-teacher`)")
    return AutoModelForCausalLM.from_pretrained(DEFAULT_DIR).eval(), AutoTokenizer.from_pretrained(DEFAULT_DIR)


def test_shipped_teacher_is_small_and_has_its_report():
    size = sum(f.stat().st_size for f in DEFAULT_DIR.iterdir() if f.is_file())
    assert size < 10 * 2**20
    report = json.loads((DEFAULT_DIR / REPORT).read_text())
    assert set(report["greedy_accuracy"]) == set(task.VARIANTS)  # its figures are measured below, not read here


def test_shipped_teacher_renders_the_task_chat_template(shipped):
    _, tok = shipped
    messages = [{"role": "user", "content": task.user_content("What is 37 * 48?")}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == f"<|user|>What is 37 * 48?\n\n{task.INSTRUCTION}<|end|><|assistant|>"


def held_out(variant):
    return task.make_problems(50, seed=123, variant=variant, split="test")


@pytest.mark.parametrize("variant", task.VARIANTS)
def test_shipped_teacher_solves_held_out_problems_greedily(shipped, variant):
    model, tok = shipped
    problems = held_out(variant)
    texts = complete(model, tok, problems[:3])
    for text in texts:
        assert text.startswith("<think>\n") and "</think>" in text and "\\boxed{" in text
    # Measured here, greedy (deterministic): 50 of 50 in both variants (96% mul / 93% aime on 200 in its
    # report). The bar is a few points under: 3 misses of 50 pass, a teacher that slipped does not.
    assert accuracy(model, tok, problems) >= 0.94


def test_shipped_teacher_sampled_at_temperature_1_still_errs(shipped):
    """The quickstart samples the teacher at temperature 1.0; its errors are what the filters and the DPO
    pairs work on. Measured here: 0.96 mul, 0.94 aime on the same 50 problems each (seed 0)."""
    model, tok = shipped
    scores = [accuracy(model, tok, held_out(v), temperature=1.0, seed=0) for v in task.VARIANTS]
    assert all(s >= 0.88 for s in scores), scores  # good enough to teach
    assert min(scores) < 1.0, scores  # and wrong sometimes: 100 samples, about 5 errors measured
