"""Decontamination by word n-grams against evaluation files."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.filters.base import apply
from reasonkit.filters.decontam import DecontamFilter, EvalSet, contaminated_by, load_eval_sets, parse_spec

from ..helpers.synthetic import trace, traces_table

AIME = "Find the number of ordered pairs (m, n) of positive integers such that m^2 n = 20^20."


def test_shared_8gram_matches_case_and_whitespace_insensitive():
    s = EvalSet.from_problems("aime24", [AIME])
    assert (
        contaminated_by("Please solve.\nFIND THE NUMBER OF ORDERED PAIRS   (m, n) of positive numbers", [s])
        == "aime24"
    )
    assert contaminated_by("Find the number of ordered pairs of cats", [s]) is None  # 7 shared words
    assert (
        contaminated_by("Find the number of ordered pairs of cats", [EvalSet.from_problems("aime24", [AIME], n=4)])
        == "aime24"
    )


def test_short_problems_match_only_whole():
    s = EvalSet.from_problems("tiny", ["What is 2 + 2?"])
    assert contaminated_by("what is  2 + 2?", [s]) == "tiny"
    assert contaminated_by("What is 2 + 2? Explain.", [s]) is None


def test_files_and_names(tmp_path):
    (tmp_path / "aime24.jsonl").write_text(json.dumps({"problem": AIME, "answer": "1"}) + "\n")
    pq.write_table(
        pa.table({"question": ["What is the sum of the first one hundred positive odd integers?"]}),
        tmp_path / "odd.parquet",
    )
    assert parse_spec(str(tmp_path / "aime24.jsonl"))[0] == "aime24"
    assert parse_spec("math=x.jsonl") == ("math", "x.jsonl")
    sets = load_eval_sets([str(tmp_path / "aime24.jsonl")])
    assert sets[0].name == "aime24" and sets[0].problems == 1
    with pytest.raises(UserError, match="no 'problem' column"):
        load_eval_sets([str(tmp_path / "odd.parquet")])
    sets = load_eval_sets([f"odd={tmp_path / 'odd.parquet'}"], column="question")
    assert sets[0].name == "odd"
    with pytest.raises(UserError, match="no such file"):
        load_eval_sets([str(tmp_path / "missing.jsonl")])


def test_filter_names_the_benchmark_and_checks_each_prompt_once():
    s1, s2 = EvalSet.from_problems("aime24", [AIME]), EvalSet.from_problems("tiny", ["What is 2 + 2?"])
    rows = [
        trace("a", 0, problem=AIME),
        trace("a", 1, problem=AIME),
        trace("b", problem="What is 2 + 2?"),
        trace("c", problem="What is 3 * 5?"),
    ]
    f = DecontamFilter([s1, s2])
    out = apply([f], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == [
        "contaminated:aime24",
        "contaminated:aime24",
        "contaminated:tiny",
        None,
    ]
    assert f.reasons == ("contaminated:aime24", "contaminated:tiny")
