"""The search tool: a real bm25s index over small corpus files (JSONL, gzipped JSONL, Parquet), the
observation a model reads, the call through ToolBox and load_tools, and every bad corpus as one
UserError naming the file."""

import gzip
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.gen.tools.base import ToolBox, load_tools
from reasonkit.gen.tools.search import PASSAGE_CHARS, index_for, make_search, read_corpus

ROWS = [
    {"id": "novel-0", "contents": "The Glass Orchard is a novel by Vell Ardo."},
    {"id": "novel-1", "contents": "Salt and Lanterns is a novel by Mira Tosk."},
    {"id": "won-0", "contents": "Vell Ardo won the Kuge Prize in 1987."},
    {"id": "won-1", "contents": "Mira Tosk won the Kuge Prize in 1990."},
    {"id": "won-2", "contents": "Vell Ardo won the Orrin Medal in 1979."},
    {"id": "born-0", "contents": "Vell Ardo was born in 1941."},
    {"id": "born-1", "contents": "Mira Tosk was born in 1952."},
    {"id": 7, "contents": "Harbour towns of the northern coast\nkeep their lanterns lit all winter."},
]


def write(path, rows):
    if str(path).endswith(".parquet"):
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if str(path).endswith(".gz"):
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            path.write_text(text)
    return path


@pytest.fixture(params=["corpus.jsonl", "corpus.jsonl.gz", "corpus.parquet"])
def corpus_file(request, tmp_path):
    rows = [{**r, "id": str(r["id"])} for r in ROWS] if request.param.endswith(".parquet") else ROWS
    return write(tmp_path / request.param, rows)


def test_reads_every_passage_in_file_order(corpus_file):
    corpus = read_corpus(corpus_file)
    assert corpus.ids == [str(r["id"]) for r in ROWS]
    assert corpus.contents == [r["contents"] for r in ROWS]


@pytest.mark.parametrize(
    "query, first",
    [
        ("The Glass Orchard", "novel-0"),
        ("Salt and Lanterns", "novel-1"),
        ("Vell Ardo Kuge Prize", "won-0"),
        ("Mira Tosk Kuge Prize", "won-1"),
        ("Vell Ardo Orrin Medal", "won-2"),
        ("When was Mira Tosk born?", "born-1"),
        ("harbour towns", "7"),
    ],
)
def test_a_literal_query_finds_its_passage_first(corpus_file, query, first):
    lines = make_search(corpus_file)(query).splitlines()
    assert lines[0].startswith(f"[{first}] ")
    assert 1 <= len(lines) <= 3  # k=3 by default; only passages sharing a word with the query


def test_the_observation_is_one_short_line_a_passage_with_its_id(tmp_path):
    long = "Kuge " + "word " * 200
    path = write(tmp_path / "c.jsonl", [*ROWS, {"id": "long", "contents": long}])
    out = make_search(path, k=2)("harbour lanterns")
    assert out.splitlines() == [
        "[7] Harbour towns of the northern coast keep their lanterns lit all winter.",
        "[novel-1] Salt and Lanterns is a novel by Mira Tosk.",
    ]
    (line,) = [x for x in make_search(path, k=9)("kuge").splitlines() if x.startswith("[long]")]
    assert len(line) <= len("[long] ") + PASSAGE_CHARS and line.endswith("...")


def test_fewer_matches_than_k_and_no_match(tmp_path):
    path = write(tmp_path / "c.jsonl", ROWS)
    assert make_search(path, k=5)("Orrin") == "[won-2] Vell Ardo won the Orrin Medal in 1979."
    assert make_search(path)("zeppelin of the") == "no passage matches the query"


def test_through_toolbox_with_its_schema(corpus_file):
    box = ToolBox([make_search(corpus_file)])
    (schema,) = box.schemas()
    fn = schema["function"]
    assert fn["name"] == "search" and fn["parameters"]["required"] == ["query"]
    assert fn["parameters"]["properties"]["query"]["type"] == "string"
    assert fn["parameters"]["properties"]["query"]["description"]
    obs = box.call("search", '{"query": "Mira Tosk Kuge Prize"}')
    assert obs.error is None and obs.content.startswith("[won-1] Mira Tosk won the Kuge Prize in 1990.")
    for bad in ('{"query": ""}', '{"query": "   "}', "{}", '{"q": "x"}'):
        obs = box.call("search", bad)
        assert obs.error == "bad_arguments", bad


def test_load_tools_needs_the_corpus(tmp_path):
    path = write(tmp_path / "c.parquet", [{**r, "id": str(r["id"])} for r in ROWS])
    box = load_tools("search", corpus=str(path), timeout=5)
    assert box.call("search", {"query": "Salt and Lanterns"}).content.startswith("[novel-1]")
    with pytest.raises(UserError, match="--corpus"):
        load_tools("search")


def test_one_index_per_corpus_content(tmp_path):
    a = write(tmp_path / "a.jsonl", ROWS)
    b = tmp_path / "b.jsonl"
    shutil.copy(a, b)
    c = write(tmp_path / "c.jsonl", ROWS[:3])
    assert index_for(read_corpus(a)) is index_for(read_corpus(b))
    assert index_for(read_corpus(a)) is not index_for(read_corpus(c))


@pytest.mark.parametrize(
    "name, rows, expected",
    [
        ("nocontents.jsonl", [{"id": "a", "text": "x"}], r"nocontents\.jsonl:1: no 'contents' column"),
        ("noid.jsonl", [{"id": "a", "contents": "x"}, {"contents": "y"}], r"noid\.jsonl:2: no 'id' column"),
        ("nocontents.parquet", [{"id": "a", "text": "x"}], r"nocontents\.parquet: no 'contents' column"),
        ("noid.parquet", [{"doc": "a", "contents": "x"}], r"noid\.parquet: no 'id' column"),
        (
            "nullcontents.parquet",
            [{"id": "a", "contents": "x"}, {"id": "b", "contents": None}],
            r"nullcontents\.parquet: row 1: 'contents' is NoneType",
        ),
        ("empty.jsonl", [], r"empty\.jsonl: no passages"),
    ],
)
def test_a_bad_corpus_is_one_user_error_naming_the_file(tmp_path, name, rows, expected):
    path = write(tmp_path / name, rows)
    with pytest.raises(UserError, match=expected) as err:
        make_search(path)
    assert "\n" not in str(err.value) and err.value.exit_code == 2


def test_empty_parquet_missing_file_and_unreadable_files(tmp_path):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "contents": pa.array([], pa.string())}), empty)
    with pytest.raises(UserError, match=r"empty\.parquet: no passages"):
        read_corpus(empty)
    with pytest.raises(UserError, match=r"missing\.jsonl: no such file"):
        read_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(UserError, match=r"junk\.parquet: unreadable"):
        read_corpus(tmp_path / "junk.parquet")
    (tmp_path / "junk.jsonl").write_text('{"id": "a", "contents": "x"}\n{oops\n')
    with pytest.raises(UserError, match=r"junk\.jsonl:2: not a JSON line"):
        read_corpus(tmp_path / "junk.jsonl")
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "a", "contents": "caf\xe9"}\n')
    with pytest.raises(UserError, match=r"latin\.jsonl: unreadable"):
        read_corpus(tmp_path / "latin.jsonl")


def test_k_must_be_positive(tmp_path):
    with pytest.raises(UserError, match="k must be"):
        make_search(write(tmp_path / "c.jsonl", ROWS), k=0)
