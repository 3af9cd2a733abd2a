"""Training on a table that a stage emptied says so: 0 rows, which stage wrote it, from how many
rows, and why they went (issue 14, "Also": it used to say "needs an sft table with columns
messages; found []"). Made with the real filter and pairs stages, through the real CLI."""

import pyarrow as pa
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.judges.config import PairsConfig
from reasonkit.judges.pairs import run_pairs
from reasonkit.store import StageWriter


def all_wrong_traces(path, n=4):
    """Traces whose every boxed answer is wrong: the verify filter keeps none of them."""
    rows = [
        {
            "id": f"p{i}",
            "sample": 0,
            "messages": [{"role": "user", "content": f"What is {i} * 3?"}],
            "completion": f"<think>{i} * 3 is {3 * i + 1}</think>The answer is \\boxed{{{3 * i + 1}}}.",
            "reasoning": f"{i} * 3 is {3 * i + 1}",
            "response": f"The answer is \\boxed{{{3 * i + 1}}}.",
            "finish_reason": "stop",
            "prompt_tokens": 3,
            "completion_tokens": 12,
            "teacher": "t",
            "gen_config": "g",
            "answer": str(3 * i),
            "source": "demo",
        }
        for i in range(n)
    ]
    w = StageWriter(path, stage="generate", kind="traces", config={}, keys=("id", "sample"))
    w.commit(pa.Table.from_pylist(rows))
    w.finish()
    return path


def train(tmp_path, method, data):
    return CliRunner().invoke(
        cli,
        [
            "train",
            "--method",
            method,
            "--student",
            str(tmp_path / "no-model-needed"),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "student"),
        ],
    )


def test_sft_on_a_filter_that_kept_nothing_names_the_filter(tmp_path):
    traces = all_wrong_traces(tmp_path / "traces")
    verified = tmp_path / "verified"
    report = run_filter(FilterConfig(traces=str(traces), out=str(verified), verifier="int", lang=None))
    assert report["rows_in"] == 4 and report["rows_out"] == 0
    result = train(tmp_path, "sft", verified / "sft")
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "found []" not in line
    assert line.startswith(f"error: {verified / 'sft'}: 0 rows to train on: stage 'filter' kept 0 of 4 rows")
    assert "dropped: wrong 4" in line and str(verified / "report.json") in line, line


def test_dpo_on_pairs_that_made_none_names_the_pairs_stage(tmp_path):
    traces = all_wrong_traces(tmp_path / "traces")
    verified = tmp_path / "verified"
    run_filter(FilterConfig(traces=str(traces), out=str(verified), verifier="int", lang=None))
    pairs = tmp_path / "pairs"
    assert run_pairs(PairsConfig(verdicts=str(verified), out=str(pairs)))["pairs"] == 0
    result = train(tmp_path, "dpo", pairs)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: {pairs}: 0 rows to train on: stage 'pairs' made 0 pairs from 4 rows"), line
    assert str(pairs / "report.json") in line
