"""Rejection sampling: at most M surviving samples per prompt, deterministic."""

import pytest

from reasonkit.filters.base import apply
from reasonkit.filters.math.verify import VerifyFilter
from reasonkit.filters.select import SelectFilter, select

from ..helpers.synthetic import trace, traces_table

IDS, SAMPLES, TOKENS = ["p", "p", "p", "q", "q"], [0, 1, 2, 0, 1], [30, 10, 10, 5, 50]


def test_shortest_with_ties_by_sample():
    assert select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "shortest") == [
        "not_selected",
        None,
        "not_selected",
        None,
        "not_selected",
    ]
    assert select(IDS, SAMPLES, TOKENS, [True] * 5, 2, "shortest") == ["not_selected", None, None, None, None]


def test_random_is_seeded_and_stable():
    a = select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "random", seed=0)
    assert a == select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "random", seed=0)
    assert sum(r is None for r in a) == 2
    seeds = {tuple(select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "random", seed=s)) for s in range(10)}
    assert len(seeds) > 1


def test_all_and_no_limit_keep_everything():
    assert select(IDS, SAMPLES, TOKENS, [True] * 5, None, "shortest") == [None] * 5
    assert select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "all") == [None] * 5
    with pytest.raises(ValueError):
        select(IDS, SAMPLES, TOKENS, [True] * 5, 1, "longest")


def test_only_correct_samples_compete():
    rows = [
        trace("p", 0, response=r"\boxed{5}", answer="4", tokens=1),  # shortest, but wrong
        trace("p", 1, response=r"\boxed{4}", answer="4", tokens=50),
        trace("p", 2, response=r"\boxed{4}", answer="4", tokens=20),
    ]
    out = apply([VerifyFilter("int"), SelectFilter(1, "shortest")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == ["wrong", "not_selected", None]
