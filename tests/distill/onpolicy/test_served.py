"""`distill train --method distill --teacher-url`: the teacher behind vLLM's real OpenAI-compatible server on
loopback (tests/helpers/gen.py serve_vllm), scored through TRL's ServerDistillationTrainer (vLLM's
prompt_logprobs, top-1 with beta > 0): two CPU steps write the adapter, the rollouts with the server's log-prob
sums and the report, which names the served model; the vocabulary is probed through the server's /tokenize."""

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import train
from reasonkit.errors import UserError
from reasonkit.store import read_stage

from ...helpers.gen import serve_vllm
from .test_trainer import BATCH, settings, write_prompts


@pytest.mark.slow
def test_a_served_teacher_scores_the_students_samples(student, teacher_dir, tmp_path):
    with serve_vllm(teacher_dir, tmp_path / "server.log", max_model_len=512) as url:
        s = settings(student, teacher_dir, write_prompts(tmp_path / "p.jsonl"), tmp_path / "run") | {"max_steps": 2}
        s.pop("teacher")
        report = train(TrainConfig(**s, teacher_url=url))  # the OpenAI base URL (.../v1) is taken as given
        d = report["distill"]
        assert report["steps"] == 2 and d["teacher_url"] == url and d["loss_top_k"] == 1
        assert d["teacher"] == teacher_dir  # the served model's name: vLLM serves it under its path
        assert all(r["loss"] >= 0 and r["teacher_tokens"] > 0 and r["teacher_s"] > 0 for r in report["history"])
        rows = read_stage(tmp_path / "run" / "rollouts").to_pylist()
        assert len(rows) == 2 * BATCH
        assert all(r["teacher_tokens"] == r["completion_tokens"] and r["teacher_logprob"] < 0 for r in rows)

        other = tmp_path / "other"  # a student whose tokenizer differs: refused before anything loads
        from reasonkit.recipes.teachers.tiny import build_tokenizer

        build_tokenizer(["the quick brown fox jumps over the lazy dog"] * 20, other, vocab_size=300)
        with pytest.raises(UserError, match="differ: a probe text tokenizes to different ids"):
            train(TrainConfig(**{**s, "student": str(other), "out": str(tmp_path / "run2")}, teacher_url=url))
