"""The prompt lint's checks of on-policy distillation (distill/lint/prompt.py): the teacher's context must hold the
longest prompt and completion, and the table one generation batch of prompts."""

from types import SimpleNamespace

from reasonkit.distill.lint.prompt import batch_finding, teacher_context_finding


def test_a_completion_past_the_teachers_context_is_a_finding(teacher_dir):
    cfg = SimpleNamespace(method="distill", teacher=teacher_dir, max_completion_length=1000)
    found = teacher_context_finding(cfg, longest=100)  # the embedded teacher has 1,024 positions
    assert found.check == "context" and "exceeds the teacher's context (1024 positions" in found.message
    assert "lower --max-completion-length to 924" in found.message
    assert teacher_context_finding(SimpleNamespace(**{**vars(cfg), "max_completion_length": 900}), 100) is None
    assert teacher_context_finding(SimpleNamespace(**{**vars(cfg), "teacher": None}), 100) is None  # served
    assert teacher_context_finding(SimpleNamespace(**{**vars(cfg), "method": "grpo"}), 100) is None


def test_distill_needs_a_generation_batch_of_prompts():
    cfg = SimpleNamespace(method="distill", batch_size=4, grad_accum=2)
    assert batch_finding(cfg, world_size=1, prompts=8) is None
    assert "TRL would train zero steps" in batch_finding(cfg, world_size=2, prompts=8).message
