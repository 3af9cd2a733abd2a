"""Plain progress lines (reasonkit/ticker.py): the rate counts this run's work, the time left is what remains at
that rate, a line at most every ``every`` seconds, one at the start and one at the end (issue 36, item 4)."""

import io

import pytest

from reasonkit.errors import UserError
from reasonkit.ticker import EVERY_ENV, Ticker, interval, plain_ticker


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def ticker(clock, lines, **kw):
    settings = dict(step="generate", total=5000, unit="prompts", done=1000, every=30.0)
    settings.update(kw)
    return Ticker(
        settings.pop("step"), settings.pop("total"), settings.pop("unit"), write=lines.append, clock=clock, **settings
    )


def test_rate_and_time_left_count_this_runs_work_at_a_steady_interval():
    clock, lines = Clock(), []
    t = ticker(clock, lines)  # 1,000 prompts were done by an earlier run: they count in done, not in the rate
    assert lines == ["[generate] 1,000/5,000 prompts (20%), starting"]
    clock.now += 10
    t.update(1200, figures="400 samples")  # 10 s after the start line: too soon for another
    assert len(lines) == 1
    clock.now += 30
    t.update(2200, figures=lambda: "2.4K samples, 31 tok/s")  # 1,200 prompts in 40 s: 30/s; 2,800 left: 93 s
    assert lines[-1] == "[generate] 2,200/5,000 prompts (44%), 30.0 prompts/s, 2.4K samples, 31 tok/s, ~1m33s left"
    assert t.rate() == pytest.approx(30.0) and t.left_s() == pytest.approx(2800 / 30)
    clock.now += 29
    t.update(advance=100)  # 29 s after the last line: none
    assert len(lines) == 2 and t.done == 2300
    clock.now += 1
    t.update(advance=0)
    assert len(lines) == 3 and lines[-1].endswith("~2m25s left")  # 1,300 in 70 s; 2,700 left: 145 s
    clock.now += 150
    t.close(figures="12K samples")
    t.close()  # once only
    assert lines[-1] == "[generate] stopped: 2,300/5,000 prompts (46%), 5.91 prompts/s, 12K samples, in 3m40s"
    assert len(lines) == 4


def test_restart_counts_the_rate_from_after_the_model_loads():
    clock, lines = Clock(), []
    t = ticker(clock, lines, step="sft", total=100, unit="steps", done=0, every=0.0)
    clock.now += 600  # ten minutes of loading
    t.restart()
    clock.now += 20
    t.update(50, figures="loss 0.4123, 1,234 tok/s")
    assert lines[-1] == "[sft] 50/100 steps (50%), 2.50 steps/s, loss 0.4123, 1,234 tok/s, ~20s left"
    clock.now += 20
    t.update(100)
    t.close()
    assert lines[-1] == "[sft] done: 100/100 steps (100%), 2.50 steps/s, loss 0.4123, 1,234 tok/s, in 40s"


def test_no_total_and_no_progress_give_no_time_left():
    clock, lines = Clock(), []
    t = ticker(clock, lines, step="filter", total=None, unit="rows", done=0, every=0.0)
    t.update(0)  # no time has passed: no rate
    clock.now += 4
    t.update(2048)
    assert lines == ["[filter] 0 rows, starting", "[filter] 0 rows", "[filter] 2,048 rows, 512 rows/s"]
    t.close()
    assert lines[-1] == "[filter] done: 2,048 rows, 512 rows/s, in 4s"


def test_the_interval_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv(EVERY_ENV, raising=False)
    assert interval() == 30.0
    monkeypatch.setenv(EVERY_ENV, "0")
    assert interval() == 0.0
    monkeypatch.setenv(EVERY_ENV, "2.5")
    assert Ticker("x", 1, "rows", write=lambda line: None).every == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(EVERY_ENV, bad)
        with pytest.raises(UserError, match=f"{EVERY_ENV}='{bad}': expected a number of seconds >= 0"):
            interval()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_lines_only_where_the_stream_is_no_terminal():
    assert plain_ticker("score", 10, "rows", stream=Terminal()) is None
    log = io.StringIO()
    assert plain_ticker("score", 10, "rows", stream=log) is not None
    assert log.getvalue() == "[score] 0/10 rows (0%), starting\n"
