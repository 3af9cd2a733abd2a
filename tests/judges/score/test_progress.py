"""`distill score` with stderr in a file: plain lines, rows committed of the input's rows, rows/s, rows scored this
run, time left, at a steady interval rather than a line per shard (issue 36, item 4)."""

from reasonkit.judges.score.config import ScoreConfig
from reasonkit.judges.score.run import run_score
from reasonkit.ticker import EVERY_ENV

from ...helpers.score import arithmetic_traces, build_reward_model
from ...helpers.synthetic import write_traces


def test_score_prints_rows_of_the_total_rate_and_time_left(tmp_path, monkeypatch, capsys):
    traces = str(write_traces(tmp_path / "traces", arithmetic_traces(4, 4), shard_rows=7))  # 16 rows
    model = build_reward_model(tmp_path / "rm")
    monkeypatch.setenv(EVERY_ENV, "0")
    run_score(ScoreConfig(input=traces, out=str(tmp_path / "s"), model=model, shard_size=4))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[score]")]
    assert lines[0] == "[score] 0/16 rows (0%), starting"
    assert lines[1].startswith("[score] 4/16 rows (25%), ") and " rows/s, 4 scored this run, ~" in lines[1]
    assert lines[1].endswith(" left")
    assert lines[-1].startswith("[score] done: 16/16 rows (100%), ") and "16 scored this run, in " in lines[-1]
    assert len(lines) == 6
