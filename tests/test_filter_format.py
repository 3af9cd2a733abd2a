"""Format checks on literal strings, each with its reason, in order."""

import pytest

from reasonkit.filters.base import apply
from reasonkit.filters.format import FormatFilter, format_reason, repetition_score
from reasonkit.filters.synthetic import trace, traces_table

GOOD = ("<think>2 + 2 = 4.</think>The answer is \\boxed{4}.", "The answer is \\boxed{4}.", "stop", 12)


@pytest.mark.parametrize(
    ("args", "options", "reason"),
    [
        (GOOD, {}, None),
        (("<think>2 + 2", "", "error", 3), {}, "gen_error"),
        (("<think>2 + 2 = 4, 4, 4", "", "length", 4096), {}, "truncated"),
        (("<think>2 + 2 = 4, 4, 4", "", "length", 4096), {"drop_truncated": False}, "unclosed_think"),
        (("<think>2 + 2 = 4. The answer is 4.", "", "stop", 10), {}, "unclosed_think"),
        (("<think>2 + 2 = 4.</think>  \n", "  \n", "stop", 10), {}, "empty_response"),
        (("<think>ok</think>The answer is 4.", "The answer is 4.", "stop", 10), {"require_boxed": True}, "no_boxed"),
        (GOOD, {"require_boxed": True}, None),
        (GOOD, {"min_tokens": 13}, "too_short"),
        (GOOD, {"max_tokens": 11}, "too_long"),
        (GOOD, {"min_tokens": 12, "max_tokens": 12}, None),
    ],
)
def test_format_reason(args, options, reason):
    assert format_reason(*args, **options) == reason


def test_repetition():
    loop = "<think>" + "Wait, let me recompute the sum of the digits again. " * 30 + "</think>\\boxed{4}"
    assert repetition_score(loop) > 0.9
    assert repetition_score(GOOD[0]) == 0.0
    assert format_reason(loop, "\\boxed{4}", "stop", 300, max_repetition=0.5) == "repetitive"
    assert format_reason(loop, "\\boxed{4}", "stop", 300) is None  # off unless asked


def test_first_failing_check_names_the_drop():
    # truncated *and* unclosed *and* empty: the first check in order wins.
    assert format_reason("<think>...", "", "length", 9, min_tokens=100) == "truncated"


def test_filter_on_a_table():
    rows = [trace("a"), trace("b", finish_reason="length"), trace("c", response=" ", completion="<think>x</think> ")]
    out = apply([FormatFilter(max_repetition=0.5)], traces_table(rows))
    assert out.column("keep").to_pylist() == [True, False, False]
    assert out.column("drop_reason").to_pylist() == [None, "truncated", "empty_response"]
