r"""The exact fast path (filters/math/exact.py) against math-verify itself: wherever it decides, its
verdict is ``check_math``'s; where it could differ, it must not decide."""

import random

import pytest

from reasonkit.filters.math.check import check_math
from reasonkit.filters.math.exact import exact_verdict
from reasonkit.filters.math.verify import Verifier

from ...helpers.exact_cases import random_pairs

# (pred, gold, the fast path's verdict); None: math-verify's call.
CASES = [
    # Fractions, every spelling, signs outside and inside.
    (r"\frac{2}{4}", r"\frac{1}{2}", True),
    (r"\dfrac{56}{212}", r"\frac{14}{53}", True),
    (r"\tfrac{120}{368}", r"\frac{30}{92}", True),
    (r"\frac{91}{29}", r"\frac{29}{91}", False),
    ("29/91", r"\frac{29}{91}", True),
    ("-29/91", r"-\frac{29}{91}", True),
    (r"\frac{-3}{4}", r"-\frac{3}{4}", True),
    (r"\frac{3}{-4}", "-3/4", True),
    (r"-\frac{-3}{4}", r"\frac34", True),
    (r"\frac {3} {4}", r"\frac{3}{4}", True),
    (r"\frac{4}{2}", "2", True),
    (r"\frac{0}{7}", "0", True),
    (r"\frac12", "0.5", True),
    (r"\frac{1}{3}", r"\frac{1}{2}", False),
    (r"\frac{5}{0}", "5", None),  # zoo
    ("3/0", "3", None),
    (r"2\frac{1}{2}", r"\frac{5}{2}", None),  # a mixed number: math-verify reads 5/2, LaTeX 1
    (r"\frac123", r"\frac{1}{23}", None),  # math-verify's own reading of \frac + 3 digits
    (r"\frac{{1}}{2}", r"\frac{1}{2}", None),  # nested braces
    (r"\frac{1.5}{3}", "0.5", None),
    ("1/2/3", r"\frac{1}{6}", None),
    (r"\frac{1}{2}\sqrt{3}", r"\frac{\sqrt{3}}{2}", None),
    # Decimals: a float rounded to 6 places by math-verify.
    ("0.25", r"\frac{1}{4}", True),
    ("-0.125", r"-\frac{1}{8}", True),
    ("1.50", "1.5", True),
    ("12345678.123456", r"\frac{12345678123456}{1000000}", True),
    ("0.3333", r"\frac{1}{3}", False),
    ("0.3334", r"\frac{1}{3}", False),
    ("0.33334", r"\frac{1}{3}", None),  # under 1e-5 away
    ("0.333333", r"\frac{1}{3}", None),  # equal to 6 places: math-verify says True
    ("0.3333333", r"\frac{1}{3}", None),
    ("0.333334", r"\frac{1}{3}", None),
    ("0.1000000", "0.1", None),  # equal, but 7 places
    ("1.414", r"\sqrt{2}", False),
    ("1.41421", r"\sqrt{2}", None),
    ("1234567890.123456789", "1234567890.123456789", None),  # more digits than a sympy Float keeps
    (".5", "0.5", None),
    ("5.", "5", None),
    # Radicals.
    (r"\sqrt{24}", r"2\sqrt{6}", True),
    (r"2\sqrt{6}", r"2\sqrt{5}", False),
    (r"5\sqrt{10}", r"5 \sqrt {10}", True),
    (r"2\sqrt3", r"2\sqrt{3}", True),
    (r"\sqrt 3", r"\sqrt{3}", True),
    (r"5 \sqrt 10", r"5\sqrt{10}", None),  # math-verify reads \sqrt{1}0
    (r"\sqrt 10", "0", None),
    (r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}", True),
    (r"\frac{2\sqrt{3}}{4}", r"\frac{\sqrt{3}}{2}", True),
    (r"\frac{-\sqrt{3}}{2}", r"-\frac{\sqrt{3}}{2}", True),
    (r"-\sqrt{3}", r"\sqrt{3}", False),
    (r"\sqrt{4}", "2", True),
    (r"\sqrt{0}", "0", True),
    (r"\sqrt{1000000000001}", "1000000", False),  # 5e-7 apart
    (r"\sqrt{1000000000000000000000001}", r"\sqrt{1000000000000000000000000}", None),  # 5e-13 apart
    (r"\sqrt[3]{8}", "2", None),
    (r"\sqrt{x}", r"\sqrt{x}", None),
    # Intervals and tuples, as latex2sympy builds them.
    ("(-15, 18]", "[-15, 18]", False),
    ("[-15,18]", "[-15, 18]", True),
    ("[-12, -1]", "(-12, -1]", False),
    ("(2,3)", "(2, 3)", True),
    (r"\left(2, 3\right]", "(2,3]", True),
    (r"\left[ \frac{1}{2}, 2\sqrt{2} \right)", r"[0.5, \sqrt{8})", True),
    ("(0.5, 1)", r"(\frac{1}{2}, 1)", True),
    ("(3, 2)", "(2, 3)", False),  # a tuple against an open interval: item by item
    ("(3,2)", "[3, 2]", True),  # both tuples
    ("(2,2)", "(2, 2)", True),
    ("[2,2]", "[2, 2]", None),  # {2}
    ("(3,2]", "(3, 2]", None),  # empty
    ("(1, 2, 3)", "[1,2,3]", True),
    ("(1,2,3)", "(1,3,2)", False),
    ("(1, 2, 3]", "(1,2,3)", None),  # math-verify reads 3
    ("(1, 2)", "(1, 2, 3)", False),
    ("(1, 2)", "1", False),
    ("[1, 2]", "2", False),
    ("(1,000)", "(1, 0)", True),  # math-verify: the tuple (1, 0)
    (r"(-\infty, 3)", r"[-\infty, 3)", True),  # infinite ends are open
    (r"(-\infty, 3)", r"(-\infty, 3]", False),
    (r"(1, +\infty)", r"(1,\infty)", True),
    (r"(-\infty, \infty)", r"(-\infty,\infty)", None),
    (r"(\infty, 1)", r"(\infty, 1)", None),
    ("(0.3, 0.3000001)", "(0.3, 0.3000001)", None),  # ends too close to order for sure
    # Big numbers.
    ("123456789012345678901234567890", "123456789012345678901234567891", False),
    ("1234567890123456789012345678901", "1234567890123456789012345678901", None),
    # Outside the grammar.
    ("", "3", None),
    ("3", "", None),
    ("x = 3", "3", None),
    (r"50\%", "50", None),
    (r"5\text{ cm}", "5", None),
    (r"\{1, 2\}", r"\{1,2\}", None),
    ("1, 2", "1,2", None),
    ("--3", "3", None),
    ("-", "3", None),
    ("(5)", "5", None),
    ("2 3", "23", None),
    ("1,000", "1000", None),
    (r"\$5", "5", None),
    ("3\n", "3", None),
]


@pytest.mark.parametrize(("pred", "gold", "verdict"), CASES)
def test_exact_verdict_is_math_verifys(pred, gold, verdict):
    assert exact_verdict(pred, gold) is verdict
    if verdict is not None:
        assert check_math(pred, gold) == (verdict, None)


def test_random_pairs_agree_with_math_verify():
    """Pairs of spellings of one value or of near values (tests/helpers/exact_cases.py): every decided
    verdict is math-verify's, and the fast path decides most of them."""
    pairs = random_pairs(random.Random(14), 300)
    decided = [(p, g, v) for p, g in pairs if (v := exact_verdict(p, g)) is not None]
    assert len(decided) > 0.6 * len(pairs)
    assert {v for _, _, v in decided} == {True, False}
    wrong = [(p, g, v) for p, g, v in decided if check_math(p, g) != (v, None)]
    assert wrong == []


def test_verifier_decides_exact_answers_without_the_pool():
    v = Verifier("math", timeout=5, workers=1)
    try:
        assert v.check(
            [
                (r"\frac{91}{29}", r"\frac{29}{91}"),
                ("29/91", r"\frac{29}{91}"),
                ("(-15, 18]", "[-15, 18]"),
                ("0.25", r"\frac14"),
            ]
        ) == [(False, None), (True, None), (False, None), (True, None)]
        assert v._pool is None and v.fast == 4
        assert v.check([(r"5 \sqrt 10", r"5\sqrt{10}")]) == [(False, None)]  # math-verify's reading
        assert v.pooled == 1
    finally:
        v.close()
