"""Answer extraction on literal strings: the last balanced box, then "the answer is" phrases."""

import pytest

from reasonkit.filters.math.extract import MAX_ANSWER, extract_answer, last_boxed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"The answer is \boxed{42}.", "42"),
        (r"\boxed{1} first, then finally \boxed{2}", "2"),  # several boxes: the last
        (r"\fbox{7}", "7"),
        (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),  # nested braces
        (r"\boxed{\left\{1, 2\right\}}", r"\left\{1, 2\right\}"),  # escaped braces do not count
        (r"\boxed{x^{2^{3}}} done", "x^{2^{3}}"),
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
        # A torn or empty last box is no answer: never the box before it (issue 14 item 12).
        (r"\boxed{3} and a torn \boxed{4", "unbalanced_box"),
        (r"So far \boxed{5}. Checking another way, the answer is \boxed{", "unbalanced_box"),
        (r"First \boxed{3}, and finally \boxed{}", "empty_box"),
        (r"First \boxed{3}, and finally \boxed{ }.", "empty_box"),
        (r"The answer is 5. Then \boxed{}", "empty_box"),  # an answer phrase before the empty box is not it either
    ],
)
def test_no_answer_says_why(text, reason):
    assert extract_answer(text) == (None, reason)


def test_box_beats_phrase_and_last_box_wins():
    assert extract_answer(r"The answer is 3. Actually \boxed{4}.") == ("4", None)
    assert last_boxed(r"\boxed{a}\boxed{b}\boxed{c}") == ("c", None)
    assert last_boxed(r"\boxed{a} then \boxed{b") == (None, "unbalanced_box")  # never the box before a torn one


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Boxes joined only by connectors (and, or, commas, spacing, math delimiters, part labels,
        # a "y_2 =" label) are one answer set, as math-verify reads them (issue 14 item 13).
        (r"$\boxed{(1, 2)}, \boxed{(2, 1)}, \boxed{(-1, -20)}$", "(1, 2), (2, 1), (-1, -20)"),
        (r"\boxed{1} and \boxed{2} and \boxed{3}", "1, 2, 3"),
        (r"$$\boxed{3} \quad \text{and} \quad \boxed{7}$$", "3, 7"),
        (r"So $x = \boxed{-3}$ or $x = \boxed{3}$.", "-3, 3"),
        (r"\( y_1 = \boxed{2x + 1} \) and \( y_2 = \boxed{3x - 4} \)", "2x + 1, 3x - 4"),
        (r"$\boxed{4} \text{ for part (a) and } \boxed{9}$", "4, 9"),
        (r"\boxed{5}, \boxed{5}", "5"),  # the same box twice is one answer
        # R1's rule: a box in the reasoning, followed by more work, is not part of the final answer.
        (r"We get $a = \boxed{3}$ and $b = \boxed{7}$, so $a + b = \boxed{10}$.", "10"),
        (r"First \boxed{5}. Wait, that ignores the carry; redoing it gives \boxed{7}.", "7"),
        (r"\boxed{8} \text{ is wrong; it should be } \boxed{9}", "9"),
        # A "final answer is" phrase after the last box is the final answer.
        (
            r"Interest: $\boxed{255}$. So $10,200 + 255 = 10,455$. The final answer is $10,455$. I hope it is correct.",  # noqa: E501
            "10,455",
        ),
        (r"\boxed{12}. I forgot the corners; adding 3, the final answer is 15.", "15"),
        (r"Final Answer: \boxed{40}. Checking again... Final Answer: The final answer is \(42\).", "42"),
        # ... but not a phrase that names no value, nor one before the box.
        (r"Thus \boxed{4}. I hope the answer is correct.", "4"),
        (r"Thus \boxed{4}. The final answer is above.", "4"),
        (r"The final answer is $6$. No: recomputing gives \boxed{8}.", "8"),
        ("**Final Answer**\n\\boxed{840}", "840"),
    ],
)
def test_final_answer_over_several_boxes_and_phrases(text, expected):
    assert extract_answer(text) == (expected, None)


def test_a_megabyte_is_fast():
    import time

    text = "x" * 1_000_000 + r"\boxed{5}" + "y" * 1_000_000
    start = time.perf_counter()
    assert extract_answer(text) == ("5", None)
    assert extract_answer("\\boxed{" * 200_000) == (None, "unbalanced_box")
    assert time.perf_counter() - start < 1.0
