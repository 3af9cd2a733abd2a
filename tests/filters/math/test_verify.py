"""Verification on literal strings: integer fast path, math-verify, None never "wrong"."""

import pytest

from reasonkit.filters.base import apply
from reasonkit.filters.math.check import check_math
from reasonkit.filters.math.verify import Verifier, VerifyFilter, check_int, parse_int

from ...helpers.synthetic import trace, traces_table


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("042", 42),
        ("1,000", 1000),
        ("1{,}000", 1000),
        (r"1\,000", 1000),
        ("42.0", 42),
        ("-7", -7),
        ("+7", 7),
        ("$12$", 12),
        (" 5 ", 5),
        ("1,00", None),
        ("4.5", None),
        ("x", None),
        ("1e3", None),
        (r"\frac{4}{2}", None),
        ("", None),
        (None, None),
        ("9" * 100, None),
        # Only canonical thousands separators (issue 14 item 11); anything else is for math-verify.
        ("12,345,678", 12345678),
        (r"1\,234", 1234),
        ("1{,}234", 1234),
        (r"\!1{,}000", 1000),
        ("1, 234", None),
        ("2 3", None),
        ("12,34", None),
        ("1,2345", None),
        ("1 000", None),
        (r"1\,234,567", None),
        ("- 7", None),
    ],
)
def test_parse_int(text, value):
    assert parse_int(text) == value


def test_check_int():
    assert check_int("042", "42") == (True, None)
    assert check_int("43", "42") == (False, None)
    assert check_int("4.5", "42") == (None, "pred_not_integer")
    assert check_int("42", r"\frac{1}{2}") == (None, "gold_not_integer")


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        (r"\frac{2}{4}", r"\frac{1}{2}", True),
        ("0.5", r"\frac{1}{2}", True),
        (r"\sqrt{8}", r"2\sqrt{2}", True),  # bare LaTeX gold is wrapped in $...$ before parsing
        ("(1,2]", "(1, 2]", True),
        ("[1,2]", "(1, 2]", False),
        (r"\{2, 1\}", r"\{1,2\}", True),
        ("3", "x = 3", True),
        (r"\frac{1}{3}", r"\frac{1}{2}", False),
    ],
)
def test_check_math(pred, gold, expected):
    assert check_math(pred, gold) == (expected, None)


def test_unparseable_is_none_with_reason_not_false():
    assert check_math("", "3") == (None, "unparseable_pred")
    assert check_math("4\x002", "3") == (None, "unparseable_pred")
    assert check_math("3", "") == (None, "unparseable_gold")


def test_integer_fast_path_never_starts_the_pool():
    v = Verifier("math", timeout=1, workers=1)
    assert v.check([("042", "42"), ("1,000", "1000"), ("7", "8")]) == [(True, None), (True, None), (False, None)]
    assert v._pool is None and v.fast == 3
    assert v.check([("3", None)]) == [(None, "no_gold")]


def test_int_verifier_does_not_guess():
    v = Verifier("int", workers=1)
    assert v.check([(r"\frac{4}{2}", "2"), ("2", r"\frac{1}{2}")]) == [
        (None, "pred_not_integer"),
        (None, "gold_not_integer"),
    ]
    assert v._pool is None


def test_spaced_digits_are_not_an_integer_but_math_verifys_call():
    assert Verifier("int", workers=1).check([("1, 234", "1234"), ("2 3", "23")]) == [
        (None, "pred_not_integer"),
        (None, "pred_not_integer"),
    ]
    v = Verifier("math", timeout=5, workers=1)
    try:
        assert v.check([("1, 234", "1234"), ("2 3", "23"), ("1{,}234", "1234")]) == [
            (False, None),
            (False, None),
            (True, None),
        ]
        assert v.fast == 1 and v.pooled == 2
    finally:
        v.close()


def test_an_answer_written_as_its_gold_needs_no_parse():
    """Exact spelling (up to \\dfrac and \\left/\\right) is correct in this process; any other
    spelling of an answer the exact reader cannot read (tests/filters/math/test_exact.py), a space moved
    included, still goes to math-verify."""
    v = Verifier("math", timeout=5, workers=1)
    try:
        written = [
            (r"\frac{3}{7}", r"\frac{3}{7}"),
            (r"\dfrac{3}{7}", r"\frac{3}{7}"),
            (r"\left[-2, 5\right)", "[-2, 5)"),
            (r"2\sqrt{3}", r"2\sqrt{3}"),
        ]
        assert v.check(written) == [(True, None)] * 4 and v._pool is None
        assert v.check(
            [("x^2+1", "x^2 + 1"), (r"\frac{6x}{14}", r"\frac{3x}{7}"), (r"\frac{3x}{8}", r"\frac{3x}{7}")]
        ) == [(True, None), (True, None), (False, None)]
        assert v.pooled == 3
    finally:
        v.close()


def test_math_through_the_pool():
    v = Verifier("math", timeout=5, workers=1)
    try:
        assert v.check([(r"\frac{2x}{4}", r"\frac{x}{2}"), ("42", "42"), (r"\frac{\pi}{3}", r"\frac{\pi}{2}")]) == [
            (True, None),
            (True, None),
            (False, None),
        ]
        assert v.pooled == 2
    finally:
        v.close()


def _table():
    return traces_table(
        [
            trace("a", 0, response=r"So \boxed{4}.", answer="4"),
            trace("a", 1, response=r"So \boxed{5}.", answer="4"),
            trace("b", 0, response="I give up.", answer="4"),
            trace("c", 0, response=r"\boxed{4}", answer=None),
            trace("d", 0, response=r"\boxed{4.5}", answer="4"),  # the int verifier cannot tell
            trace("e", 0, response=r"\boxed{4} so far, then \boxed{", answer="4"),  # torn last box
            trace("f", 0, response="I give up.", answer=" "),  # no gold beats no answer
        ]
    )


def test_filter_drops_wrong_and_unverifiable_with_reasons():
    out = apply([VerifyFilter("int")], _table())
    assert out.column("pred").to_pylist() == ["4", "5", None, "4", "4.5", None, None]
    assert out.column("correct").to_pylist() == [True, False, None, None, None, None, None]
    assert out.column("drop_reason").to_pylist() == [
        None,
        "wrong",
        "no_answer",
        "no_gold",
        "unverifiable",
        "no_answer",
        "no_gold",
    ]
    assert out.column("verify_reason").to_pylist() == [
        None,
        None,
        "no_answer",
        "no_gold",
        "pred_not_integer",
        "unbalanced_box",
        "no_gold",
    ]


def test_unverifiable_keep_keeps_only_what_the_verifier_could_not_tell():
    # Issue 14 item 7: a row with no answer, or no gold, is never kept as "unverifiable".
    out = apply([VerifyFilter("int", unverifiable="keep")], _table())
    assert out.column("keep").to_pylist() == [True, False, False, False, True, False, False]
    assert out.column("drop_reason").to_pylist() == [
        None,
        "wrong",
        "no_answer",
        "no_gold",
        None,
        "no_answer",
        "no_gold",
    ]


def test_unverifiable_keep_keeps_a_timeout():
    rows = [trace("t", 0, response=r"\boxed{9^{9^{9}}}", answer="5"), trace("t", 1, response=r"\boxed{5}", answer="5")]
    out = apply([VerifyFilter("math", unverifiable="keep", timeout=1.0, workers=1)], traces_table(rows))
    assert out.column("verify_reason").to_pylist() == ["timeout", None]
    assert out.column("keep").to_pylist() == [True, True]


def test_none_only_extracts():
    out = apply([VerifyFilter("none")], _table())
    assert out.column("keep").to_pylist() == [True] * 7
    assert out.column("correct").to_pylist() == [None] * 7
    assert out.column("pred").to_pylist() == ["4", "5", None, "4", "4.5", None, None]


def test_synthetic_latex_answers_meant_right_are_right():
    """The bench's LaTeX traces: every spelling made as an equivalent of the gold is one math-verify
    accepts (``5 \\sqrt 10`` was not: unbraced, LaTeX reads it as sqrt(1) followed by 0)."""
    import random

    from reasonkit.filters.math.check import check_math

    from ...helpers.synthetic import latex_case

    rng = random.Random(0)
    cases = [latex_case(rng) for _ in range(60)]
    assert {(pred, gold): check_math(pred, gold)[0] for gold, right, _ in cases for pred in right} == {
        (pred, gold): True for gold, right, _ in cases for pred in right
    }
