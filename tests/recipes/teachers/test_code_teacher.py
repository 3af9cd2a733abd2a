"""The embedded code teacher writes programs that pass the real code verifier; the synth stage writes code problems."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json

import pyarrow.parquet as pq
import pytest

from reasonkit.recipes.tasks import code as code_task
from reasonkit.recipes.teachers.code import DEFAULT_DIR, INSTRUCTION, REPORT, complete, encode, pass_at_1, prompt_text

#: Held-out problems per variant the shipped teacher is run on here (greedy: the figure is exact for these).
N_PROBLEMS = 12


@pytest.fixture(scope="module")
def teacher():
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    return AutoModelForCausalLM.from_pretrained(DEFAULT_DIR).eval(), AutoTokenizer.from_pretrained(DEFAULT_DIR)


def test_shipped_code_teacher_is_small_and_its_report_says_it_writes_working_programs():
    assert (DEFAULT_DIR / "model.safetensors").is_file(), "run `distill make-teacher --task code`"
    assert sum(f.stat().st_size for f in DEFAULT_DIR.iterdir() if f.is_file()) < 10 * 2**20
    report = json.loads((DEFAULT_DIR / REPORT).read_text())
    assert report["instruction"] == INSTRUCTION
    assert min(report["greedy_pass_at_1"].values()) >= 0.9


def test_prompt_is_what_generate_builds_from_the_chat_template(teacher):
    from reasonkit.gen.render import build_messages

    _, tok = teacher
    p = code_task.make_problems(1, 0, "aime", split="test")[0]
    messages = build_messages(
        [{"role": "user", "content": p["problem"]}], problem=p["problem"], instruction=INSTRUCTION
    )
    assert tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == prompt_text(p)
    ids, n_prompt = encode(tok, p)
    assert tok.decode(ids[n_prompt:]) == code_task.solution(p) + "<|end|>"


@pytest.mark.parametrize("variant", ["mul", "aime"])
def test_shipped_teacher_programs_pass_the_code_verifier_on_held_out_problems(teacher, variant):
    from reasonkit.filters.code.verify import extract_code

    model, tok = teacher
    problems = code_task.make_problems(N_PROBLEMS, 0, variant, split="test")
    answers = complete(model, tok, problems)
    assert pass_at_1(answers, problems) >= 0.9, answers
    code, _ = extract_code(answers[0])
    assert "input()" in code and ("% 1000" in code) == (variant == "aime")
    # the verifier is not fooled: the same answers against the other variant's tests mostly fail
    other = code_task.make_problems(N_PROBLEMS, 0, "mul" if variant == "aime" else "aime", split="test")
    assert pass_at_1(answers, other) <= 0.2


def test_make_teacher_task_code_writes_a_loadable_teacher_and_report(tmp_path):
    from click.testing import CliRunner
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from reasonkit.cli import cli

    out = tmp_path / "t"
    result = CliRunner().invoke(
        cli,
        ["make-teacher", "--task", "code", "--out", str(out), "--n-train", "64", "--max-steps", "2", "--n-eval", "2"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["steps"] == 2 and set(summary["greedy_pass_at_1"]) == {"mul", "aime"}
    model, tok = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert len(tok) == model.config.vocab_size and json.loads((out / REPORT).read_text())["n_train"] == 64


def test_synth_stage_writes_code_problems_with_tests(tmp_path):
    from reasonkit.recipes.tasks.synth import SynthConfig, run_synth

    run_synth(SynthConfig(out=str(tmp_path / "p"), n=4, variant="aime", split="test", task="code"))
    table = pq.read_table(next((tmp_path / "p").glob("*.parquet")))
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [p["id"] for p in code_task.make_problems(4, 0, "aime", split="test")]
    assert all(len(json.loads(r["tests"])["inputs"]) == code_task.TESTS_PER_PROBLEM for r in rows)
    # the math set is unchanged; its fingerprint is its whole config, task included
    from reasonkit.store import fingerprint

    run_synth(SynthConfig(out=str(tmp_path / "m"), n=4, split="test"))
    manifest = json.loads((tmp_path / "m" / "_manifest.json").read_text())
    config = {"out": str(tmp_path / "m"), "n": 4, "seed": 0, "variant": "mul", "split": "test", "task": "math"}
    assert manifest["config_fingerprint"] == fingerprint({**config, "overwrite": False})
    assert "tests" not in pq.read_table(next((tmp_path / "m").glob("*.parquet"))).column_names
