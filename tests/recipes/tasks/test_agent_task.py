"""The synthetic tool-use task: a deterministic world, a Search-R1 corpus, prompts split by book, reference trajectories."""  # noqa: E501

import json

import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.recipes.tasks.agent import (
    corpus,
    make_world,
    questions,
    reference_messages,
    write_corpus,
    write_prompts,
)


def test_world_is_deterministic_per_seed_and_consistent():
    a, b = make_world.__wrapped__(0), make_world.__wrapped__(0)  # not the cached object: built twice
    assert a == b and a != make_world.__wrapped__(1)
    authors = {name for name, _ in a.authors}
    assert len(authors) == len(a.authors) and len({t for t, _, _ in a.books}) == len(a.books)
    assert all(author in authors for _, author, _ in a.books) and all(p in a.prizes for _, p, _ in a.wins)
    # One year per (author, prize): the question has a single answer.
    assert len({(w[0], w[1]) for w in a.wins}) == len(a.wins)


def test_names_are_the_worlds_own_and_short():
    from reasonkit.recipes.tasks.agent import N_AUTHORS

    w = make_world()
    words = {word for name, _ in w.authors for word in name.split()} | {
        word for t, _, _ in w.books for word in t.split()
    }
    assert all(word.isalpha() and len(word) <= 5 for word in words)
    assert len(w.authors) == N_AUTHORS


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_corpus_has_the_search_r1_columns_and_every_fact(tmp_path, suffix):
    w = make_world(0, 30)
    path = write_corpus(tmp_path / f"c.{suffix}", w)
    rows = [json.loads(line) for line in open(path)] if suffix == "jsonl" else pq.read_table(path).to_pylist()
    assert rows and all(sorted(r) == ["contents", "id"] for r in rows)
    assert len({r["id"] for r in rows}) == len(rows)
    texts = {r["contents"] for r in rows}
    assert all(f"{t} is a novel by {a}." in texts for t, a, _ in w.books)
    assert all(f"{a} won the {p} in {y}." in texts for a, p, y in w.wins)
    with pytest.raises(UserError, match="jsonl or .parquet"):
        write_corpus(tmp_path / "c.csv", w)


def test_splits_are_disjoint_by_book_and_ids_unique():
    w = make_world()
    train, test = questions(w, "train"), questions(w, "test")
    assert len(test) > 200 and len(train) > 5 * len(test)
    assert not {q["book"] for q in train} & {q["book"] for q in test}
    ids = [q["id"] for q in train + test]
    assert len(set(ids)) == len(ids)
    with pytest.raises(UserError, match="unknown split"):
        questions(w, "dev")


def test_prompts_table_is_the_contract(tmp_path):
    from reasonkit.schema import validate

    table = pq.read_table(write_prompts(tmp_path / "p.parquet", 20, split="test"))
    validate(table, "prompts")
    row = table.to_pylist()[0]
    assert row["messages"][0]["role"] == "user" and row["book"] in row["messages"][0]["content"]
    assert row["answer"].isdigit() and len(row["answer"]) == 4
    again = pq.read_table(write_prompts(tmp_path / "q.parquet", 20, split="test"))
    assert again.column("id").to_pylist() == table.column("id").to_pylist()  # seeded sample
    with pytest.raises(UserError, match="n=100000"):
        write_prompts(tmp_path / "r.parquet", 100000)


def test_reference_trajectory_renders_parses_back_and_the_filter_reads_its_answer(tmp_path):
    from trl.chat_template_utils import add_response_schema, parse_response

    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    row = questions(make_world(), "test")[0]
    msgs = reference_messages(row, lambda query: f"passages for {query}")
    tok = build_tool_tokenizer(["x"], vocab_size=300)

    def search(query: str) -> str:
        """Search.

        Args:
            query: words.
        """

    text = tok.apply_chat_template(msgs, tools=[search], tokenize=False)
    assert f"<tool_response>\npassages for {row['book']}\n</tool_response>" in text
    add_response_schema(tok)
    parsed = []
    for end in (2, 4, 6):  # each assistant turn parsed back from its tokens, as TRL reads a generation
        prefix = tok.apply_chat_template(
            msgs[: end - 1], tools=[search], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        full = tok.apply_chat_template(msgs[:end], tools=[search], tokenize=True, return_dict=False)
        parsed.append(parse_response(tok, full[len(prefix) :], prefix=prefix))
    first, second, final = parsed
    assert first["tool_calls"] == msgs[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in first["tool_calls"]] == [{"query": row["book"]}]
    assert second["tool_calls"][0]["function"]["arguments"] == {"query": f"{row['author']} {row['prize']}"}
    assert "tool_calls" not in final and extract_answer(final["content"]) == (row["answer"], None)


def test_bm25_finds_each_hop_and_a_careless_query_does_not():
    """The real search tool (gen/tools/search.py, k=3 as the teacher reads it) over the whole corpus."""
    from reasonkit.gen.tools.search import make_search
    from reasonkit.recipes.teachers.agent import SEARCH_K

    w = make_world()
    search = make_search(corpus(w), k=SEARCH_K)
    rows = questions(w, "test")
    misses, careless_hits = 0, 0
    for q in rows:
        novel = f"{q['book']} is a novel by {q['author']}."
        won = f"{q['author']} won the {q['prize']} in {q['answer']}."
        misses += novel not in search(q["book"]) or won not in search(f"{q['author']} {q['prize']}").split("\n")[0]
        careless_hits += won in search(q["prize"])
    assert misses == 0
    assert careless_hits < 0.05 * len(rows)  # the prize alone finds someone else's win
