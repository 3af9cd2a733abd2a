"""Batched n-gram statistics in filters/text.py agree with their one-text forms."""

import pytest

from reasonkit.filters.format import repetition_score
from reasonkit.filters.text import repetition_scores

from ..helpers.synthetic import synthetic_rows


def test_repetition_scores_equal_the_one_by_one_scores():
    texts = [r["completion"] for r in synthetic_rows(20, "int", seed=1)]
    texts += [
        "",
        "one",
        "la la la la la la la la la la la la",
        "Wait, wait. " * 40,
        "数学 数学 数学 数学 数学 数学 数学 数学 数学",
        "a b c d e f g h i j k l",
    ]
    for n in (2, 8):
        assert repetition_scores(texts, n).tolist() == pytest.approx([repetition_score(t, n) for t in texts])
    assert repetition_scores(["Wait, wait. " * 40], 8)[0] > 0.9


def test_one_text_hashes_equal_the_batched_ones():
    from reasonkit.filters.text import ngram_hashes, ngram_hashes_many

    texts = [r["completion"] for r in synthetic_rows(5, "latex", seed=2)]
    texts += ["", " ", "x", "  a  b ", "a b c d e f g h i", "\tA\nB  c", "数学 数学\u00a0x"]
    for n in (1, 2, 8):
        for text in texts:
            assert ngram_hashes(text, n).tolist() == ngram_hashes_many([text], n)[0].tolist(), (text, n)
