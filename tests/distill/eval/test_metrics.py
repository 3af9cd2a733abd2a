import random
from fractions import Fraction
from math import comb

import pytest

from reasonkit.distill.eval.metrics import ks_for, majority, pass1_stats, pass_at_k
from reasonkit.distill.eval.vote import verifier_same, vote_groups
from reasonkit.filters.math.extract import extract_answer
from reasonkit.filters.math.verify import Verifier
from reasonkit.think import split


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def test_pass_at_k_matches_exact_combinatorics_on_many_random_cases():
    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(1, 64)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), abs=1e-12), (n, c, k)


@pytest.mark.parametrize("n, c, k, expected", [(8, 0, 1, 0.0), (8, 8, 1, 1.0), (8, 1, 1, 0.125), (8, 7, 2, 1.0)])
def test_pass_at_k_edges(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_ks_for():
    assert ks_for(1) == [1] and ks_for(64) == [1, 2, 4, 8, 16, 32, 64] and ks_for(10) == [1, 2, 4, 8, 10]


def test_majority_votes_on_extracted_answers_not_raw_text():
    # Five long traces: every raw completion is distinct, so a raw-text vote has no majority and
    # falls to the first sample ("12"). Through the real split, extractor and verifier, the answers
    # are 12, 42, 042, 42.0 and 84/2: one group of four (integers by value, the fraction by math-verify).
    completions = [
        "<think>6*2</think> \\boxed{12}",
        "<think>6*7 = 42</think> so \\boxed{42}",
        "<think>7*6 = 42, check</think> \\boxed{042}",
        "<think>42 again</think> The answer is \\boxed{42.0}",
        "<think>84/2</think> The answer is $\\boxed{\\frac{84}{2}}$.",
    ]
    raw_vote = majority(completions)
    extracted = [extract_answer(split(c)[1])[0] for c in completions]
    verifier = Verifier("math", timeout=10)
    try:
        [groups] = vote_groups([extracted], verifier_same(verifier))
    finally:
        verifier.close()
    assert extracted == ["12", "42", "042", "42.0", "\\frac{84}{2}"]
    assert groups == [0, 1, 1, 1, 1]
    assert raw_vote == completions[0] and extracted[majority(groups)] == "42"


def test_majority_ignores_missing_and_breaks_ties_by_sample_order():
    assert majority([None, None]) is None
    assert majority(["5", "6", "6", "5"]) == "5"
    assert majority([None, 1, 2, 2, 1, 0]) == 1, "a 2-2 tie: the group seen first in sample order"


def test_pass1_stats_mean_std_and_ci():
    correct = [[True, True, False, True], [False, False, False, None], [True, True, True, True]]
    s = pass1_stats(correct, bootstrap=500, seed=1)
    assert s["pass@1"] == pytest.approx((0.75 + 0 + 1) / 3)
    rounds = [2 / 3, 2 / 3, 1 / 3, 2 / 3]
    mean = sum(rounds) / 4
    assert s["pass@1_std"] == pytest.approx((sum((r - mean) ** 2 for r in rounds) / 3) ** 0.5)
    lo, hi = s["pass@1_ci95"]
    assert 0 <= lo <= s["pass@1"] <= hi <= 1
    assert pass1_stats(correct, bootstrap=500, seed=1) == s, "seeded bootstrap is reproducible"
