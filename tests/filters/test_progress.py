"""`distill filter` with stderr in a file: plain lines of pass 1, rows filtered of the input's rows, rows/s, rows kept,
time left; none under --quiet (issue 36, item 4)."""

from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.ticker import EVERY_ENV

from ..helpers.score import arithmetic_traces
from ..helpers.synthetic import write_traces


def config(tmp_path) -> FilterConfig:
    return FilterConfig(
        traces=str(tmp_path / "traces"), out=str(tmp_path / "out"), verifier="int", workers=1, lang=None, batch_rows=8
    )


def test_pass_one_prints_rows_of_the_total_rate_and_rows_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "0")
    write_traces(tmp_path / "traces", arithmetic_traces(6, 4), shard_rows=10)  # 24 rows
    report = run_filter(config(tmp_path))  # as `distill run` calls it: no log function
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[filter]")]
    assert lines[0] == "[filter] 0/24 rows (0%), starting"
    counted = [line for line in lines[1:-1] if line.startswith("[filter] 8/24 rows (33%), ")]
    assert counted and " rows/s, " in counted[0] and " kept, ~" in counted[0] and counted[0].endswith(" left")
    assert lines[-1].startswith("[filter] done: 24/24 rows (100%), ")
    kept = [s["remaining"] for s in report["funnel"] if s["filter"] != "dedup"][-1]  # what pass 1's filters kept
    assert 0 < kept < 24 and f", {kept} kept, in " in lines[-1]


def test_quiet_prints_no_progress_line(tmp_path, monkeypatch):
    monkeypatch.setenv(EVERY_ENV, "0")
    write_traces(tmp_path / "traces", arithmetic_traces(2, 2), shard_rows=10)
    args = ["filter", str(tmp_path / "traces"), "--out", str(tmp_path / "out"), "--verifier", "int", "--dedup", "none"]
    loud = CliRunner().invoke(cli, args)
    assert loud.exit_code == 0, loud.output
    assert "[filter] done: 4/4 rows (100%)" in loud.output
    quiet = CliRunner().invoke(cli, [*args[:3], str(tmp_path / "quiet"), *args[4:], "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert "[filter]" not in quiet.output
