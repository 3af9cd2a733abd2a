"""Answer extraction on literal strings: the last balanced box, then "the answer is" phrases."""

import pytest

from reasonkit.filters.extract import MAX_ANSWER, extract_answer, last_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The answer is \boxed{42}.", "42"),
        (r"\boxed{1} first, then finally \boxed{2}", "2"),  # several boxes: the last
        (r"\fbox{7}", "7"),
        (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{\left\{1, 2\right\}}", r"\left\{1, 2\right\}"),  # escaped braces do not count
        (r"\boxed{x^{2^{3}}} done", "x^{2^{3}}"),
        (r"\boxed{3} and a torn \boxed{4", "3"),  # unbalanced last box: the one before it
        (r"\boxed {  5 }", "5"),
        (r"\boxed 9.", "9"),
        ("So the final answer is 17.", "17"),
        ("Answer: $-3$", "-3"),
        ("Thus, the answer is \\(\\sqrt{2}\\).\nDone.", r"\sqrt{2}"),
    ],
)
def test_extracts(text, expected):
    assert extract_answer(text) == (expected, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no_answer"),
        (None, "no_answer"),
        ("I could not solve it.", "no_answer"),
        (r"\boxed{}", "empty_box"),
        (r"\boxed{" + "1" * (MAX_ANSWER + 10) + "}", "answer_too_long"),
        ("\\boxed{" + "{" * 10_000 + "}" * 10_000 + "}", "answer_too_long"),
        (r"\boxed{12", "unbalanced_box"),
    ],
)
def test_no_answer_says_why(text, reason):
    assert extract_answer(text) == (None, reason)


def test_box_beats_phrase_and_last_box_wins():
    assert extract_answer(r"The answer is 3. Actually \boxed{4}.") == ("4", None)
    assert last_boxed(r"\boxed{a}\boxed{b}\boxed{c}") == ("c", None)


def test_a_megabyte_is_fast():
    import time

    text = "x" * 1_000_000 + r"\boxed{5}" + "y" * 1_000_000
    start = time.perf_counter()
    assert extract_answer(text) == ("5", None)
    assert extract_answer("\\boxed{" * 200_000) == (None, "unbalanced_box")
    assert time.perf_counter() - start < 1.0
