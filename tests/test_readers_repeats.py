"""Hub tables that repeat a problem text (open-r1/OpenR1-Math-220k's `default` split holds the same problem from
several sources): the ids hashed from the text collide, and each problem is prompted once, the repeats counted."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.gen.run import GenerateConfig, generate
from reasonkit.readers import prompt_notes, read_prompts, stable_id

from .test_reference_prompts import RecordingTeacher, openr1_table

REPEATED = [
    ("What is 12 * 34?", "408"),
    ("What is 99 * 10?", "990"),
    ("What is 12 * 34?", "408"),
    ("  What is 12 * 34?\n", "408"),
    ("What is 7 * 8?", "56"),
    ("What is 99 * 10?", "990"),
]


def test_repeated_problem_texts_are_prompted_once_and_counted(tmp_path, capsys):
    path = tmp_path / "openr1.parquet"
    pq.write_table(openr1_table(REPEATED), path)
    t = read_prompts(path)  # before: UserError "duplicate ids ..." at the first step
    assert t.column("problem").to_pylist() == ["What is 12 * 34?", "What is 99 * 10?", "What is 7 * 8?"]
    assert t.column("id").to_pylist() == [
        stable_id(p) for p in ("What is 12 * 34?", "What is 99 * 10?", "What is 7 * 8?")
    ]
    assert t.column("uuid").to_pylist() == ["uuid-0", "uuid-1", "uuid-4"], "the first row of each problem is kept"
    assert prompt_notes(t) == {"reference_turns_dropped": 6, "duplicate_problems_dropped": 3}
    assert "3 rows repeat an earlier row's problem text" in capsys.readouterr().err


def test_limit_counts_distinct_problems(tmp_path):
    path = tmp_path / "openr1.parquet"
    pq.write_table(openr1_table(REPEATED), path)
    assert read_prompts(path, limit=2).column("problem").to_pylist() == ["What is 12 * 34?", "What is 99 * 10?"]


def test_ids_given_by_the_user_still_must_be_unique(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"id": ["a", "a"], "problem": ["x", "y"]}), path)
    with pytest.raises(UserError, match="duplicate ids 'a'"):
        read_prompts(path)


def test_generate_records_the_repeats_in_its_manifest(tmp_path, teacher_dir):
    from transformers import AutoTokenizer

    path = tmp_path / "openr1.parquet"
    pq.write_table(openr1_table(REPEATED), path)
    answers = {stable_id(p): a for p, a in REPEATED}
    teacher = RecordingTeacher(AutoTokenizer.from_pretrained(teacher_dir), answers)
    cfg = GenerateConfig(prompts=str(path), teacher="recording", out=str(tmp_path / "traces"), n=1, shard_size=2)
    manifest = generate(cfg, backend=teacher)
    assert manifest["prompt_notes"]["duplicate_problems_dropped"] == 3 and len(teacher.rendered) == 3
