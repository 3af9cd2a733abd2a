"""Student and teacher must share a vocabulary: `distill train --method distill` with two different tokenizers
stops in one line naming both and the first differing ids, exit 2, before any weight loads or OUT is written."""

from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.onpolicy.vocab import vocabulary_mismatch


def test_a_vocabulary_mismatch_names_both_tokenizers_and_the_first_differing_ids():
    why = vocabulary_mismatch({0: "<pad>", 1: "a", 2: "b"}, {0: "<pad>", 1: "x", 2: "b", 5: "z"}, "S", "T")
    assert why.startswith("the student S's tokenizer (3 tokens) and the teacher T's (4 tokens) differ")
    assert "first differing ids 1 ('a' vs 'x'), 5 (none vs 'z')" in why
    assert vocabulary_mismatch({0: "a"}, {0: "a"}, "S", "T") is None


def test_train_refuses_a_teacher_with_another_vocabulary_in_one_line(teacher_dir, tmp_path, monkeypatch):
    """A student whose tokenizer was trained on other text (its merges, so its ids, differ from the teacher's)."""
    import transformers

    from reasonkit.recipes.teachers.tiny import build_tokenizer

    student = tmp_path / "student"
    build_tokenizer(["the quick brown fox jumps over the lazy dog"] * 20, student, vocab_size=300)
    loaded = []
    monkeypatch.setattr(  # no weight may load: the check reads tokenizers (and configs) only
        transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: loaded.append(a) or 1 / 0
    )
    (tmp_path / "p.jsonl").write_text('{"problem": "1 + 1?"}\n')
    out = tmp_path / "run"
    args = ["train", "--method", "distill", "--student", str(student), "--teacher", teacher_dir]
    result = CliRunner().invoke(cli, [*args, "--data", str(tmp_path / "p.jsonl"), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert f"the student {student}'s tokenizer" in lines[0] and f"the teacher {teacher_dir}'s" in lines[0]
    assert "first differing ids" in lines[0] and "must share a vocabulary" in lines[0]
    assert not out.exists() and not loaded
