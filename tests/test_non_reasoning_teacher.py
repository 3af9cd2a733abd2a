"""A teacher that does not reason (no think block at all) keeps its correct rows through `distill filter`;
`think: required` drops them as `no_think`, and a block opened by the prompt and never closed is
`unclosed_think` either way."""

import pytest

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.stage import run_filter
from reasonkit.filters.synthetic import trace, write_traces
from reasonkit.store import read_stage

ANSWER = "12 * 34 = 408, so the answer is \\boxed{408}."


def plain_traces(path, n=4):
    rows = [trace(f"p{i}", problem="What is 12 * 34?", reasoning=None, response=ANSWER, answer="408") for i in range(n)]
    return write_traces(path, rows)


def funnel(report):
    return {(s["filter"], s["reason"]): s["dropped"] for s in report["funnel"] if s["dropped"]}


def test_plain_answers_are_kept_by_default(tmp_path):
    traces = plain_traces(tmp_path / "traces")
    report = run_filter(FilterConfig(traces=str(traces), out=str(tmp_path / "f"), lang="none", dedup="none", workers=1))
    assert report["rows_in"] == report["rows_out"] == 4 and funnel(report) == {}


def test_think_required_drops_them_as_no_think():
    from reasonkit.filters.format import FormatFilter
    from reasonkit.filters.base import apply
    from reasonkit.filters.synthetic import traces_table

    rows = [trace("p0", reasoning=None, response=ANSWER), trace("p1", reasoning="12 * 34 = 408", response="\\boxed{408}")]
    out = apply([FormatFilter(think="required")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == ["no_think", None]


@pytest.mark.xfail(strict=True, reason="filters/stage.py sft_rows wraps a response that had no think block in "
                   "<think>{completion}</think> (the whole answer twice); it should build the turn with "
                   "filters.format.assistant_turn(reasoning, response). Remove this mark with that change.")
def test_sft_row_of_a_plain_answer_is_the_answer_alone(tmp_path):
    traces = plain_traces(tmp_path / "traces", n=1)
    run_filter(FilterConfig(traces=str(traces), out=str(tmp_path / "f"), lang="none", workers=1))
    sft = read_stage(tmp_path / "f" / "sft").to_pylist()
    assert [m["content"] for m in sft[0]["messages"] if m["role"] == "assistant"] == [ANSWER]
