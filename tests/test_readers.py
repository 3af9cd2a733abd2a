import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.readers import ColumnMap, read_prompts, stable_id

PROBLEMS = [("What is 12 * 34?", "408"), ("What is 99 * 10?", "990")]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_parquet_jsonl_and_csv_read_the_same(tmp_path):
    rows = [{"problem": p, "answer": a} for p, a in PROBLEMS]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p.parquet")
    write_jsonl(tmp_path / "p.jsonl", rows)
    (tmp_path / "p.csv").write_text("problem,answer\n" + "".join(f'"{p}",{a}\n' for p, a in PROBLEMS))
    tables = [read_prompts(tmp_path / f"p.{ext}") for ext in ("parquet", "jsonl", "csv")]
    for t in tables:
        assert t.column("id").to_pylist() == [stable_id(p) for p, _ in PROBLEMS]
        assert t.column("answer").to_pylist() == ["408", "990"]
        assert t.column("messages").to_pylist()[1] == [{"role": "user", "content": PROBLEMS[1][0]}]


def test_csv_keeps_leading_zeros_in_answers(tmp_path):
    (tmp_path / "p.csv").write_text('problem,answer\n"AIME 1",042\n')
    assert read_prompts(tmp_path / "p.csv").column("answer").to_pylist() == ["042"]


def test_column_mapping_and_extras_pass_through(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"uid": 7, "q": "1+1?", "gold": 2, "level": "easy"}])
    t = read_prompts(path, ColumnMap(id="uid", problem="q", answer="gold"))
    assert t.to_pylist()[0] | {"messages": None} == {
        "id": "7",
        "messages": None,
        "answer": "2",
        "source": None,
        "problem": "1+1?",
        "level": "easy",
    }


def test_messages_column_is_used_as_is(tmp_path):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    path = write_jsonl(tmp_path / "p.jsonl", [{"messages": msgs}])
    t = read_prompts(path)
    assert t.column("messages").to_pylist() == [msgs] and t.column("id").to_pylist() == [stable_id("2+2?")]


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: d / "missing.parquet", "missing.parquet: no such file"),
        (
            lambda d: (d / "x.parquet").write_bytes(b"not parquet") and d / "x.parquet",
            "x.parquet: cannot read as parquet",
        ),
        (lambda d: (d / "e.jsonl").write_text("") * 0 or d / "e.jsonl", "e.jsonl: empty input"),
        (
            lambda d: write_jsonl(d / "c.jsonl", [{"question": "x"}]),
            "no 'messages' or 'problem' column; found ['question']",
        ),
        (
            lambda d: write_jsonl(d / "d.jsonl", [{"id": "a", "problem": "x"}, {"id": "a", "problem": "y"}]),
            "duplicate ids 'a'",
        ),
        (lambda d: write_jsonl(d / "n.jsonl", [{"problem": ""}]), "row 0: column 'problem' is empty"),
        (lambda d: (d / "t.txt").write_text("x") and d / "t.txt", "unsupported file type '.txt'"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, setup, message):
    path = setup(tmp_path)
    with pytest.raises(UserError) as e:
        read_prompts(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_hub_ids_are_refused_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="Hugging Face dataset id, but HF_HUB_OFFLINE=1"):
        read_prompts("HuggingFaceH4/aime_2024")
