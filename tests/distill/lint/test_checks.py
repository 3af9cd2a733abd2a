"""The pre-training lint and the run-directory checks of `distill train`: each fires on crafted bad
input, before any weights load; clean input passes untouched. Tokenizer-only, so fast."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.distill import data
from reasonkit.distill.command import train as train_command
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.lint import checks as lint
from reasonkit.distill.train import RUN_FILE, last_checkpoint, train
from reasonkit.errors import UserError
from reasonkit.recipes.tasks.train_sets import prefs_table, sft_table, write_stage
from reasonkit.recipes.teachers.tiny import CHAT_TEMPLATE


def cfg(student, data_dir, out, method="sft", **kw):
    return TrainConfig(method=method, student=str(student), data=str(data_dir), out=str(out), **kw)


def student_with_template(src: str, dst: Path, template: str) -> str:
    """A copy of the tiny student whose chat template is ``template``."""
    shutil.copytree(src, dst)
    (dst / "chat_template.jinja").write_text(template)
    return str(dst)


def with_assistant(table: pa.Table, rewrite) -> pa.Table:
    rows = table.to_pylist()
    for r in rows:
        r["messages"][-1]["content"] = rewrite(r["messages"][-1]["content"])
    return pa.Table.from_pylist(rows)


@pytest.fixture(scope="module")
def sft_dir(tmp_path_factory):
    return write_stage(tmp_path_factory.mktemp("sft") / "sft", "sft", sft_table(24))


def findings_of(student, table, method="sft", **kw):
    c = cfg(student, "unused", "unused", method=method, **kw)
    tok = data.load_tokenizer(c)
    data.resolve_template(tok, c)
    found, _ = lint.lint(
        tok,
        data.load_rows(table, method, "t"),
        c,
        max_length=kw.get("max_length") or 1024,
        stops=data.stop_ids(tok, c.student),
        max_positions=data.max_positions(c.student),
    )
    return found


def test_clean_sft_and_prefs_pass_the_lint(tiny_model_dir):
    assert findings_of(tiny_model_dir, sft_table(24)) == []
    assert findings_of(tiny_model_dir, prefs_table(12), method="dpo") == []


def test_pad_token_equal_to_eos_fails(tiny_model_dir, sft_dir, tmp_path):
    with pytest.raises(
        UserError, match=r"lint \(pad_eos\).*pad token '<\|end\|>' is the EOS token.*candidates: <\|pad\|>"
    ):
        train(cfg(tiny_model_dir, sft_dir, tmp_path / "out", pad_token="<|end|>"))
    assert json.loads((tmp_path / "out" / "lint.json").read_text())["findings"][0]["check"] == "pad_eos"
    assert not (tmp_path / "out" / RUN_FILE).exists()  # a failed lint claims no run: the rerun needs no --overwrite


def test_examples_without_assistant_tokens_fail(tiny_model_dir, tmp_path):
    rows = sft_table(10).to_pylist()
    rows[3]["messages"] = rows[3]["messages"][:1]  # the prompt alone
    bad = write_stage(tmp_path / "sft", "sft", pa.Table.from_pylist(rows))
    with pytest.raises(
        UserError,
        match=r"no_assistant_tokens\): 1 of 10 examples have no assistant tokens.*row 3 \(id 'mul-.*no assistant turn",
    ):
        train(cfg(tiny_model_dir, bad, tmp_path / "out"))


def test_template_without_generation_markers_is_refused(tiny_model_dir, sft_dir, tmp_path):
    plain = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    student = student_with_template(tiny_model_dir, tmp_path / "student", plain)
    with pytest.raises(UserError, match=r"no \{% generation %\} markers.*--set chat_template=FILE.jinja"):
        train(cfg(student, sft_dir, tmp_path / "out"))


def test_truncation_share_above_threshold_fails(tiny_model_dir, sft_dir, tmp_path):
    with pytest.raises(
        UserError,
        match=r"truncation\): 24 of 24 examples \(100%\) are longer than --max-length 40 tokens \(longest \d+",
    ):
        train(cfg(tiny_model_dir, sft_dir, tmp_path / "out", max_length=40))
    with pytest.raises(UserError, match=r"--max-length 4096 exceeds the student's context length \(1024 positions\)"):
        train(cfg(tiny_model_dir, sft_dir, tmp_path / "out2", max_length=4096))


def test_assistant_turn_not_ending_in_eos_fails(tiny_model_dir, sft_dir, tmp_path):
    eos_outside = CHAT_TEMPLATE.replace("<|end|>{% endgeneration %}", "{% endgeneration %}<|end|>")
    student = student_with_template(tiny_model_dir, tmp_path / "student", eos_outside)
    with pytest.raises(
        UserError, match=r"no_eos_end\): 24 of 24 examples .* do not end in the end-of-turn token '<\|end\|>'"
    ):
        train(cfg(student, sft_dir, tmp_path / "out"))


def test_think_prefill_disagreements_fail(tiny_model_dir, tmp_path):
    # Traces written under a <think> prefill (the opening tag lives in the prompt) on a template without it.
    unopened = write_stage(tmp_path / "a", "sft", with_assistant(sft_table(8), lambda c: c.replace("<think>", "", 1)))
    with pytest.raises(
        UserError, match=r"think_prefill\): 8 of 8 examples: assistant turns close </think> without opening"
    ):
        train(cfg(tiny_model_dir, unopened, tmp_path / "out1"))
    # A template that prefills <think> at generation, over data that never opens it.
    prefill = CHAT_TEMPLATE.replace(
        "{%- if add_generation_prompt -%}<|assistant|>", "{%- if add_generation_prompt -%}<|assistant|><think>\n"
    )
    student = student_with_template(tiny_model_dir, tmp_path / "prefill", prefill)
    no_think = write_stage(tmp_path / "b", "sft", with_assistant(sft_table(8), lambda c: c.split("</think>")[-1]))
    with pytest.raises(
        UserError, match=r"think_prefill\).*prefills <think> at generation but the assistant turns do not start"
    ):
        train(cfg(student, no_think, tmp_path / "out2"))
    # A template that strips the reasoning from assistant turns (as DeepSeek-R1-Distill's does).
    strip = CHAT_TEMPLATE.replace(
        "{{ m['content'] }}<|end|>{% endgeneration %}",
        "{{ m['content'].split('</think>')[-1] }}<|end|>{% endgeneration %}",
    )
    student = student_with_template(tiny_model_dir, tmp_path / "strip", strip)
    with pytest.raises(UserError, match=r"think_prefill\).*strips the reasoning"):
        train(cfg(student, write_stage(tmp_path / "c", "sft", sft_table(8)), tmp_path / "out3"))


def test_dpo_pairs_are_linted_too(tiny_model_dir, tmp_path):
    rows = prefs_table(6).to_pylist()
    for r in rows:
        r["chosen"][0]["content"] = r["chosen"][0]["content"].replace("<think>", "", 1)
    found = findings_of(tiny_model_dir, pa.Table.from_pylist(rows), method="dpo")
    assert [f.check for f in found] == ["think_prefill"] and found[0].message.startswith("6 of 12 examples")
    lint.enforce(found, "warn", "x")  # warn and off let the run go on
    with pytest.raises(UserError, match="--set lint=warn trains anyway"):
        lint.enforce(found, "error", "x")


def test_wrong_table_for_the_method(tiny_model_dir, sft_dir, tmp_path):
    with pytest.raises(UserError, match=r"--method dpo needs a prefs table .* \(an sft table: use --method sft\)"):
        train(cfg(tiny_model_dir, sft_dir, tmp_path / "out", method="dpo"))


def test_an_adapter_is_not_a_student(tiny_model_dir, sft_dir, tmp_path):
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text("{}")
    with pytest.raises(UserError, match="is a LoRA adapter, not a model.*--merge"):
        train(cfg(tmp_path / "adapter", sft_dir, tmp_path / "out"))


def test_out_with_a_run_needs_resume_or_overwrite_and_the_same_settings(tiny_model_dir, sft_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / RUN_FILE).write_text(
        json.dumps(
            {
                "fingerprint": "other",
                "data_fingerprint": "d",
                "config": {**cfg(tiny_model_dir, sft_dir, out).fingerprinted(), "lr": 0.5},
            }
        )
    )
    with pytest.raises(UserError, match="holds a training run already; pass --resume to continue it, --overwrite"):
        train(cfg(tiny_model_dir, sft_dir, out))
    with pytest.raises(
        UserError,
        match=r"was started with different settings \(lr, the data's contents, the student's weights \(unrecorded",
    ):
        train(cfg(tiny_model_dir, sft_dir, out, resume=True))


def test_torn_checkpoints_are_skipped(tmp_path):
    for step, state in ((2, "{}"), (4, "{"), (6, None)):  # 4: trainer_state.json cut short; 6: not written yet
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        for name in ("adapter_model.safetensors", "optimizer.pt"):
            (d / name).write_bytes(b"x")
        if state is not None:
            (d / "trainer_state.json").write_text(state)
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2"]


def test_command_help_and_config_errors(tiny_model_dir, sft_dir, tmp_path):
    runner = CliRunner()
    assert "--precompute-ref" in runner.invoke(train_command, ["--help"]).output
    result = runner.invoke(
        train_command,
        [
            "--method",
            "sft",
            "--student",
            tiny_model_dir,
            "--data",
            sft_dir,
            "--out",
            str(tmp_path),
            "--set",
            "lora_rr=8",
        ],
    )
    # the command itself turns a UserError into one line and exit 2 (options.Command), as `distill train` does
    assert result.exit_code == 2 and "error: train.lora_rr: unknown key; did you mean lora_r?" in result.output
    result = runner.invoke(
        train_command,
        ["--method", "dpo", "--student", tiny_model_dir, "--data", sft_dir, "--out", str(tmp_path), "--packing"],
    )
    assert result.exit_code == 2 and "train.packing: applies to --method sft only" in result.output
    result = runner.invoke(
        train_command,
        [
            "--method",
            "dpo",
            "--student",
            tiny_model_dir,
            "--data",
            sft_dir,
            "--out",
            str(tmp_path),
            "--set",
            "rpo_alpha=-1",
        ],
    )
    assert result.exit_code == 2 and "train.rpo_alpha: must be >= 0, found -1" in result.output


def test_command_module_imports_nothing_heavy():
    probe = "import sys, reasonkit.distill.command; print([m for m in ('torch', 'transformers', 'trl', 'peft', 'datasets') if m in sys.modules])"  # noqa: E501
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
        == "[]"
    )


def test_resume_onto_a_student_whose_weights_changed_is_refused(tiny_model_dir, sft_dir, tmp_path):
    """The student is part of the run's identity by content: a base model re-saved under the same
    path (here its config edited) cannot continue checkpoints of the old one."""
    student = tmp_path / "student"
    shutil.copytree(tiny_model_dir, student)
    out = tmp_path / "out"
    first = train(cfg(student, sft_dir, out, max_steps=1, batch_size=4, threads=1))
    assert first["student_identity"].startswith("sha256:")
    again = train(cfg(student, sft_dir, out, max_steps=1, batch_size=4, threads=1, resume=True))
    assert again["steps"] == first["steps"], "same student: the finished run is returned"
    config = json.loads((student / "config.json").read_text())
    (student / "config.json").write_text(json.dumps({**config, "rope_theta": config.get("rope_theta", 10000.0) * 2}))
    with pytest.raises(UserError, match=r"different settings \(the student's weights \(sha256:"):
        train(cfg(student, sft_dir, out, max_steps=1, batch_size=4, threads=1, resume=True))
