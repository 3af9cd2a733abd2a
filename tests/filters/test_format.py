"""Format checks on literal strings, each with its reason, in order."""

import pytest

from reasonkit.filters.base import apply
from reasonkit.filters.format import FormatFilter, format_reason, repetition_score

from ..helpers.synthetic import trace, traces_table

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


# A teacher that does not reason (gpt-4o-mini, Llama-Instruct) writes no think block at all.
PLAIN = ("2 + 2 = 4, so the answer is \\boxed{4}.", "2 + 2 = 4, so the answer is \\boxed{4}.", "stop", 12)


@pytest.mark.parametrize(
    ("args", "options", "reason"),
    [
        (PLAIN, {}, None),  # think: optional by default
        (PLAIN, {"think": "optional"}, None),
        (PLAIN, {"think": "required"}, "no_think"),
        (GOOD, {"think": "required"}, None),
        (("<think>2 + 2 = 4, and", "", "stop", 6), {"think": "optional"}, "unclosed_think"),  # opened in the text
        # the prompt opened <think> (prefill): the completion holds no tag at all, and the block never closed
        (("2 + 2 = 4, and then", "", "stop", 6), {"opened": True}, "unclosed_think"),
        (("2 + 2 = 4, and then", "", "stop", 6), {"opened": True, "think": "required"}, "unclosed_think"),
        (("2 + 2 = 4.</think>\\boxed{4}", "\\boxed{4}", "stop", 6), {"opened": True, "think": "required"}, None),
        (("", "", "stop", 0), {}, "empty_response"),
    ],
)
def test_think_block_required_or_optional(args, options, reason):
    assert format_reason(*args, **options) == reason


def test_unknown_think_option_fails_at_construction():
    with pytest.raises(ValueError, match="think must be 'required' or 'optional'"):
        FormatFilter(think="always")


def test_filter_reads_an_opened_block_from_the_reasoning_column():
    # reasoning None: no block at all (think.py's split); reasoning set without </think> in the
    # completion: the prompt prefilled <think> and the block never closed.
    rows = [
        trace("plain", reasoning=None, response="So \\boxed{4}."),
        trace("prefilled-open", reasoning="2 + 2 = 4, and", response="", completion="2 + 2 = 4, and"),
        trace(
            "prefilled-closed",
            reasoning="2 + 2 = 4.",
            response="\\boxed{4}",
            completion="2 + 2 = 4.</think>\\boxed{4}",
        ),
    ]
    out = apply([FormatFilter()], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == [None, "unclosed_think", None]
    out = apply([FormatFilter(think="required")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == ["no_think", "unclosed_think", None]


def test_filter_config_think_option():
    from reasonkit.config import from_dict
    from reasonkit.errors import UserError
    from reasonkit.filters.config import FilterConfig

    assert from_dict(FilterConfig, {"traces": "t", "out": "o"}, "filter").think == "optional"
    assert from_dict(FilterConfig, {"traces": "t", "out": "o", "think": "required"}, "filter").think == "required"
    with pytest.raises(UserError, match="think"):
        from_dict(FilterConfig, {"traces": "t", "out": "o", "think": "sometimes"}, "filter")


def test_first_failing_check_names_the_drop():
    # truncated *and* unclosed *and* empty: the first check in order wins.
    assert format_reason("<think>...", "", "length", 9, min_tokens=100) == "truncated"


def test_filter_on_a_table():
    rows = [trace("a"), trace("b", finish_reason="length"), trace("c", response=" ", completion="<think>x</think> ")]
    out = apply([FormatFilter(max_repetition=0.5)], traces_table(rows))
    assert out.column("keep").to_pylist() == [True, False, False]
    assert out.column("drop_reason").to_pylist() == [None, "truncated", "empty_response"]
