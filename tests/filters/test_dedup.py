"""Exact and near-duplicate detection on literal strings; stable hashes; deterministic winners."""

import numpy as np

from reasonkit.filters.base import apply
from reasonkit.filters.dedup import Deduper, DedupFilter, MinHasher, lsh_params
from reasonkit.filters.text import ngram_hashes, normalize, stable_hash64

from ..helpers.synthetic import trace, traces_table

LONG = (
    "okay so we need the remainder when the product is divided by one thousand and I will first split "
    "the second factor into tens and units then multiply each part and add the partial products together "
)


def test_hashes_never_change():
    # Written down once: a change here silently breaks resumed runs and cross-version dedup.
    assert stable_hash64("hello world") == 5814608031911216775
    assert [int(h) for h in ngram_hashes("The quick brown fox", 2)] == [
        4961793149306689527,
        7862972133708403088,
        2098421477967378502,
    ]
    assert int(Deduper("exact").keys(["Hello  World"])["_exact"][0]) == 7557677740558965921
    assert int(ngram_hashes("The  quick brown\nfox", 2)[0]) == int(ngram_hashes("the quick brown fox", 2)[0])
    assert [int(h) for h in ngram_hashes("a b c", 2)] == [int(h) for h in ngram_hashes("A\tB C", 2)]


def test_exact_is_on_normalised_text():
    d = Deduper("exact")
    keys = d.keys(["Hello   World", "hello world", "hello world!"])
    assert d.decide(keys, [True, True, True]) == [None, "duplicate", None]
    assert normalize(" A\n b ") == "a b"


def test_first_alive_row_wins_and_dropped_rows_do_not_compete():
    d = Deduper("exact")
    keys = d.keys(["same", "same", "same"])
    assert d.decide(keys, [False, True, True]) == [None, None, "duplicate"]


def test_near_duplicates_and_chains():
    d = Deduper("minhash", threshold=0.7)
    a = LONG * 3
    b = a.replace("thousand", "hundred", 1)  # one word changed
    c = b.replace("tens", "dozens", 1)  # one more: near b, nearer a than the threshold
    other = "a completely different chain of thought about geometry and circles and their tangent lines " * 3
    keys = d.keys([a, b, c, other])
    assert d.decide(keys, [True] * 4) == [None, "near_duplicate", "near_duplicate", None]


def test_recall_on_planted_near_duplicates():
    import random

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)]
    docs = [" ".join(rng.choice(vocab) for _ in range(300)) for _ in range(200)]
    planted = []
    for src in range(100):
        words = docs[src].split()
        for _ in range(3):  # 1% of the words changed: Jaccard of 5-shingles ~0.9
            words[rng.randrange(300)] = rng.choice(vocab)
        docs.append(" ".join(words))
        planted.append(len(docs) - 1)
    d = Deduper("minhash", threshold=0.8)
    reasons = d.decide(d.keys(docs), [True] * len(docs))
    found = [i for i, r in enumerate(reasons) if r == "near_duplicate"]
    assert len(set(found) & set(planted)) >= 90  # recall >= 0.9
    assert len(set(found) - set(planted)) == 0  # and no random pair collides


def test_signatures_are_batch_independent():
    m = MinHasher(64)
    texts = [LONG, "short text", "", LONG * 50]
    together = m.signatures(texts)
    alone = np.vstack([m.signatures([t]) for t in texts])
    assert (together == alone).all()


def test_lsh_params_and_bands():
    assert lsh_params(0.8, 128) == (9, 13)
    d = Deduper("minhash", num_perm=64, bands=16)
    assert (d.n_bands, d.rows) == (16, 4) and len(d.columns) == 17


def test_filter_within_a_prompt_and_across_the_dataset():
    rows = [
        trace("p", 0, reasoning=LONG),
        trace("p", 1, reasoning=LONG),  # same prompt, same text
        trace("q", 0, reasoning=LONG.upper()),  # another prompt, same normalised text
        trace("q", 1, reasoning="something else entirely"),
    ]
    out = apply([DedupFilter("exact")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == [None, "duplicate", "duplicate", None]
