"""The synthetic tool-use task: "What year did the author of <book> win the <prize>?"

A seeded world of fictional authors, books and prizes, with names built from syllables so no
pretrained model knows any of it: the answer is only in the corpus, and two searches find it
(the book's passage names the author; the author's prize passage names the year).

- :func:`make_world`: authors (each born in a year), books (each by one author, published in a
  year), prizes, and who won which prize in which year.
- :func:`corpus`: passages in the Search-R1 layout ``{"id", "contents"}``: the two facts the
  answer needs (``"<Book> is a novel by <Author>."``, ``"<Author> won the <Prize> in <Year>."``)
  beside distractors that a careless query or a careless reader falls for: other years of the same
  book and author (published, born), the author's other prizes, the prize's other winners, titles and
  names sharing a word.
- :func:`questions` and :func:`write_prompts`: the prompts table (``id``, ``messages``, ``answer`` =
  the year, ``source``; ``book``, ``author``, ``prize`` pass through), split by book: a held-out book's
  questions are all in ``test``.
- :func:`reference_messages`: the two-search trajectory a good agent writes, with the real search
  tool's observations (the tool is passed in; gen/tools/search.py builds it).

>>> w = make_world(seed=0)
>>> q = questions(w, "train")[0]
>>> q["question"]
'What year did the author of "Rode Luke" win the Kuge Prize?'
>>> q["answer"], q["author"]
('1983', 'Favi Guges')
>>> [p["contents"] for p in corpus(w) if q["author"] in p["contents"] and "Kuge" in p["contents"]]
['Favi Guges won the Kuge Prize in 1983.']
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from reasonkit.errors import UserError

SOURCE = "reasonkit/agent"
SPLITS = ("train", "test")
#: About one book in ten is held out (by a hash of its title), with every question about it.
HELD_OUT_PER_TEN = 1
INSTRUCTION = "Use the search tool, and put your final answer within \\boxed{}."
QUESTION = 'What year did the author of "{book}" win the {prize}?'
FINAL = "The answer is \\boxed{{{year}}}."
N_AUTHORS = 1000

_ONSETS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_CODAS = ("", "", "", "n", "r", "s", "l")


@dataclass(frozen=True)
class World:
    """Everything true in the task; tuples so a world is hashable and cached."""

    authors: tuple[tuple[str, int], ...]  # (name, born)
    books: tuple[tuple[str, str, int], ...]  # (title, author, published)
    prizes: tuple[str, ...]  # "the Rute Prize" is written "the " + prize
    wins: tuple[tuple[str, str, int], ...]  # (author, prize, year)


def _words(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    """``n`` new capitalised two-syllable words (CV + CV + optional coda), none in ``taken``."""
    out: list[str] = []
    while len(out) < n:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(2)) + rng.choice(_CODAS)
        word = word.capitalize()
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


@cache
def make_world(seed: int = 0, n_authors: int = N_AUTHORS) -> World:
    """The world of ``seed``: ``n_authors`` authors with two books each and one to three prizes.

    Deterministic: the same seed always gives the same world (names, years, facts).

    >>> make_world(1, 20) == make_world(1, 20), make_world(1, 20) == make_world(2, 20)
    (True, False)
    >>> w = make_world(0, 20)
    >>> len(w.authors), len(w.books), len(w.prizes)
    (20, 40, 8)
    """
    if n_authors < 1:
        raise UserError(f"n_authors={n_authors}: the world needs at least one author")
    rng = random.Random(f"reasonkit-agent/{seed}")
    taken: set[str] = set()
    # Small pools of first names and title words on purpose: names and titles share words, so a query
    # for half a name or half a title retrieves someone else's passage.
    first = _words(rng, 30, taken)
    title_words = _words(rng, max(20, n_authors // 8), taken)
    prizes = tuple(f"{w} Prize" for w in _words(rng, 8, taken))
    surnames = _words(rng, n_authors, taken)
    authors, books, wins = [], [], []
    # A title's word set is unique ("Pogo Toten" never beside "Toten Pogo"): BM25 ignores word order, and
    # four passages matching both words would push the book's own out of a top-3 search.
    titles: set[frozenset[str]] = set()
    for surname in surnames:
        name = f"{rng.choice(first)} {surname}"
        authors.append((name, rng.randint(1850, 1960)))
        for _ in range(2):
            title = f"{rng.choice(title_words)} {rng.choice(title_words)}"
            while frozenset(title.split()) in titles or len(set(title.split())) < 2:
                title = f"{rng.choice(title_words)} {rng.choice(title_words)}"
            titles.add(frozenset(title.split()))
            books.append((title, name, rng.randint(1880, 2020)))
        for prize in rng.sample(prizes, rng.randint(1, 3)):
            wins.append((name, prize, rng.randint(1900, 2020)))
    return World(tuple(authors), tuple(books), prizes, tuple(wins))


def corpus(world: World) -> list[dict]:
    """The passages, ``{"id", "contents"}``, in a fixed shuffled order (the kind of a fact is not its place).

    >>> rows = corpus(make_world(0, 5))
    >>> sorted(rows[0]), len(rows)
    (['contents', 'id'], 32)
    """
    # The publication passage is worded longer than the novel passage on purpose: both match a title query
    # on the same two words, and BM25's length normalisation then ranks the novel passage (the one naming
    # the author) first, so even a top-1 search for the title finds the author.
    texts = [f"{name} was born in {born}." for name, born in world.authors]
    for title, author, published in world.books:
        texts += [f"{title} is a novel by {author}.", f"{title} was first published in the year {published}."]
    texts += [f"{a} won the {p} in {y}." for a, p, y in world.wins]
    random.Random(0).shuffle(texts)
    return [{"id": passage_id(i), "contents": text} for i, text in enumerate(texts)]


def passage_id(i: int) -> str:
    """A short id of letters only: the search tool shows ids, and a digit in one could pass for part of a year.

    >>> passage_id(0), passage_id(27), passage_id(26 ** 3)
    ('aaa', 'abb', 'baaa')
    """
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters = chr(ord("a") + r) + letters
        if i == 0:
            return letters.rjust(3, "a")


def write_corpus(path: str | os.PathLike, world: World | None = None) -> str:
    """Write the corpus as JSONL (``.jsonl``) or Parquet (``.parquet``) and return the path.

    >>> import tempfile, os
    >>> p = write_corpus(os.path.join(tempfile.mkdtemp(), "c.jsonl"), make_world(0, 3))
    >>> open(p).readline()
    '{"id": "aaa", "contents": "Nadul Kamil won the Gemi Prize in 1951."}\\n'
    """
    rows = corpus(world or make_world())
    path = str(path)
    if path.endswith(".jsonl"):
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    elif path.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        raise UserError(f"{path}: a corpus is written as .jsonl or .parquet")
    return path


def is_held_out(title: str) -> bool:
    """Whether the book ``title`` (and so every question about it) is in the test split.

    >>> is_held_out("Rode Luke")
    False
    """
    return hashlib.sha256(title.encode()).digest()[0] % 10 < HELD_OUT_PER_TEN


def questions(world: World, split: str = "train") -> list[dict]:
    """One question per (book of ``split``, prize its author won), in the world's order.

    ``id`` is stable (``agent-<seed-free slug of book and prize>``): the same question has the same id
    in every world that holds it.
    """
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; expected one of {SPLITS}")
    won: dict[str, list[tuple[str, int]]] = {}
    for author, prize, year in world.wins:
        won.setdefault(author, []).append((prize, year))
    rows = []
    for title, author, _ in world.books:
        if is_held_out(title) != (split == "test"):
            continue
        for prize, year in won[author]:
            rows.append(
                {
                    "id": "agent-" + f"{title} {prize.split()[0]}".lower().replace(" ", "-"),
                    "question": QUESTION.format(book=title, prize=prize),
                    "answer": str(year),
                    "book": title,
                    "author": author,
                    "prize": prize,
                    "source": SOURCE,
                }
            )
    return rows


def user_content(question: str) -> str:
    """The user turn: the question, a blank line, the instruction."""
    return f"{question}\n\n{INSTRUCTION}"


def write_prompts(
    path: str | os.PathLike, n: int | None = None, seed: int = 0, *, split: str = "train", world: World | None = None
) -> str:
    """Write ``n`` questions of ``split`` (all when None; a seeded sample otherwise) as a Parquet prompts table.

    >>> import tempfile, os, pyarrow.parquet as pq
    >>> t = pq.read_table(write_prompts(os.path.join(tempfile.mkdtemp(), "p.parquet"), 3, split="test"))
    >>> t.column_names, t.num_rows
    (['id', 'messages', 'answer', 'source', 'book', 'author', 'prize'], 3)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reasonkit.schema import validate

    rows = questions(world or make_world(seed), split)
    if n is not None:
        if not 0 <= n <= len(rows):
            raise UserError(f"n={n}: the {split} split has {len(rows)} questions")
        rows = random.Random(f"{seed}/{split}").sample(rows, n)
    table = pa.table(
        {
            "id": [r["id"] for r in rows],
            "messages": [[{"role": "user", "content": user_content(r["question"])}] for r in rows],
            "answer": [r["answer"] for r in rows],
            "source": [r["source"] for r in rows],
            "book": [r["book"] for r in rows],
            "author": [r["author"] for r in rows],
            "prize": [r["prize"] for r in rows],
        }
    )
    table = validate(table, "prompts", str(path))
    pq.write_table(table, path)
    return str(path)


def _call(query: str) -> dict:
    return {"type": "function", "function": {"name": "search", "arguments": {"query": query}}}


def reference_messages(row: dict, search: Callable[[str], str]) -> list[dict]:
    """The reference trajectory of question ``row``, in the shape chat templates and TRL take.

    user question -> ``search`` the book's title -> its observation -> ``search`` "<author> <prize>"
    -> its observation -> the year in ``\\boxed{}``. ``search`` is the real tool (what the model will
    read back is what the tool returns, not a paraphrase).

    >>> row = questions(make_world(0, 20), "train")[0]
    >>> msgs = reference_messages(row, lambda query: f"results for {query}")
    >>> [m["role"] for m in msgs], msgs[3]["tool_calls"][0]["function"]["arguments"]
    (['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'], {'query': 'Rebas Nobu Gemi Prize'})
    >>> msgs[-1]["content"]
    'The answer is \\\\boxed{1946}.'
    """
    second = f"{row['author']} {row['prize']}"
    return [
        {"role": "user", "content": user_content(row["question"])},
        {"role": "assistant", "content": "", "tool_calls": [_call(row["book"])]},
        {"role": "tool", "name": "search", "content": search(row["book"])},
        {"role": "assistant", "content": "", "tool_calls": [_call(second)]},
        {"role": "tool", "name": "search", "content": search(second)},
        {"role": "assistant", "content": FINAL.format(year=row["answer"])},
    ]
