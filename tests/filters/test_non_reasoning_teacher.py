"""A teacher that does not reason (no think block at all) keeps its correct rows through `distill filter`;
`think: required` drops them as `no_think`, and a block opened by the prompt and never closed is
`unclosed_think` either way."""

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.store import read_stage

from ..helpers.synthetic import trace, write_traces

ANSWER = "12 * 34 = 408, so the answer is \\boxed{408}."


def plain_traces(path, n=4):
    rows = [
        trace(f"p{i}", problem="What is 12 * 34?", reasoning=None, response=ANSWER, answer="408") for i in range(n)
    ]
    return write_traces(path, rows)


def funnel(report):
    return {(s["filter"], s["reason"]): s["dropped"] for s in report["funnel"] if s["dropped"]}


def test_plain_answers_are_kept_by_default(tmp_path):
    traces = plain_traces(tmp_path / "traces")
    report = run_filter(
        FilterConfig(traces=str(traces), out=str(tmp_path / "f"), lang="none", dedup="none", workers=1)
    )
    assert report["rows_in"] == report["rows_out"] == 4 and funnel(report) == {}


def test_think_required_drops_them_as_no_think():
    from reasonkit.filters.base import apply
    from reasonkit.filters.format import FormatFilter

    from ..helpers.synthetic import traces_table

    rows = [
        trace("p0", reasoning=None, response=ANSWER),
        trace("p1", reasoning="12 * 34 = 408", response="\\boxed{408}"),
    ]
    out = apply([FormatFilter(think="required")], traces_table(rows))
    assert out.column("drop_reason").to_pylist() == ["no_think", None]


def test_sft_row_of_a_plain_answer_is_the_answer_alone(tmp_path):
    traces = plain_traces(tmp_path / "traces", n=1)
    run_filter(FilterConfig(traces=str(traces), out=str(tmp_path / "f"), lang="none", workers=1))
    sft = read_stage(tmp_path / "f" / "sft").to_pylist()
    assert [m["content"] for m in sft[0]["messages"] if m["role"] == "assistant"] == [ANSWER]


def test_think_required_on_the_command_line_reaches_the_funnel(tmp_path):
    """`distill filter --think required` drops the plain answers as no_think (the config field alone
    did nothing while the stage built its format filter without it)."""
    import json

    from click.testing import CliRunner

    from reasonkit.cli import cli

    traces = plain_traces(tmp_path / "traces", n=3)
    out = tmp_path / "f"
    result = CliRunner().invoke(
        cli,
        ["filter", str(traces), "--out", str(out), "--lang", "none", "--workers", "1", "--think", "required", "-q"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["rows_out"] == 0 and funnel(report) == {("format", "no_think"): 3}
