import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.schema import MESSAGES, TABLES, empty, schema, validate

MSG = [{"role": "user", "content": "What is 2 * 3?"}]


def traces_row(**over):
    row = dict(
        id="p1",
        sample=0,
        messages=MSG,
        completion="<think>2*3=6</think>\\boxed{6}",
        reasoning="2*3=6",
        response="\\boxed{6}",
        finish_reason="stop",
        prompt_tokens=9,
        completion_tokens=12,
        teacher="tiny",
        gen_config="abc",
    )
    row.update(over)
    return row


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_every_table_round_trips_through_parquet(kind, tmp_path):
    table = empty(kind)
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(table, path)
    back = validate(pq.read_table(path), kind, str(path))
    assert back.schema.equals(schema(kind))


def test_traces_round_trip_keeps_values_and_extra_columns(tmp_path):
    t = pa.Table.from_pylist([traces_row(difficulty="easy")])
    conformed = validate(t, "traces", "t")
    path = tmp_path / "t.parquet"
    pq.write_table(conformed, path)
    back = validate(pq.read_table(path), "traces", str(path))
    assert back.schema.field("sample").type == pa.int32()  # int64 from Python was cast losslessly
    assert back.column("difficulty").to_pylist() == ["easy"]  # extras pass through, after the contract
    assert back.column_names[-1] == "difficulty"
    assert back.to_pylist()[0]["messages"] == MSG


def test_missing_column_names_file_column_and_expected_type():
    t = pa.Table.from_pylist([{k: v for k, v in traces_row().items() if k != "finish_reason"}])
    with pytest.raises(UserError) as e:
        validate(t, "traces", "out/part-00000.parquet")
    msg = str(e.value)
    assert msg.startswith("out/part-00000.parquet: missing required column 'finish_reason'")
    assert "expected string" in msg


def test_mistyped_column_names_expected_found_and_first_bad_row():
    t = pa.Table.from_pylist([traces_row(), traces_row()])
    t = t.set_column(t.column_names.index("sample"), "sample", pa.array(["0", "x"]))
    with pytest.raises(UserError) as e:
        validate(t, "traces", "traces.jsonl")
    msg = str(e.value)
    assert "traces.jsonl: column 'sample' has type string, expected int32" in msg
    assert "first bad row 1: 'x'" in msg


def test_null_in_required_column_names_first_null_row():
    t = pa.table({"id": ["a", "b", None], "messages": pa.array([MSG] * 3, MESSAGES)})
    with pytest.raises(UserError, match=r"p.csv: column 'id' must not be null .* first null at row 2"):
        validate(t, "prompts", "p.csv")


def test_optional_columns_are_added_as_nulls():
    t = validate(pa.table({"id": ["a"], "messages": pa.array([MSG], MESSAGES)}), "prompts")
    assert t.column("answer").to_pylist() == [None]
    assert t.schema.field("answer").type == pa.string()


def test_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown table kind"):
        validate(pa.table({}), "nope")
