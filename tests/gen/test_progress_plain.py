"""`distill generate` with stderr in a file (a batch job's log): plain progress lines, prompts done of the total,
the rate, samples and tokens/s, time left (issue 36, item 4); on a terminal the rich bar, and no line."""

import io

import pytest

from reasonkit.gen.progress import Progress
from reasonkit.gen.run import generate
from reasonkit.ticker import EVERY_ENV

from .test_units import FakeBackend, config


def test_generate_prints_plain_progress_lines_when_stderr_is_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "0")  # a line at every update
    generate(config(tmp_path), backend=FakeBackend())  # 10 prompts, 2 samples each, 5 tokens a sample
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[generate]")]
    assert lines[0] == "[generate] 0/10 prompts (0%), starting"
    middle = [line for line in lines if line.startswith("[generate] 5/10 prompts (50%), ")]
    # the fifth prompt's second sample finishes it: 10 samples so far
    assert middle and "10 samples, " in middle[0] and " tok/s" in middle[0] and " prompts/s" in middle[0]
    assert middle[0].endswith(" left")
    assert lines[-1].startswith("[generate] done: 10/10 prompts (100%), ") and "20 samples" in lines[-1]


def test_a_resumed_run_counts_from_what_was_done(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "3600")  # the start and end lines only
    cfg = config(tmp_path)
    with pytest.raises(RuntimeError, match="simulated crash"):
        generate(cfg, backend=FakeBackend(fail_after=9))  # 3 prompts committed (a shard of 3), then a crash
    generate(cfg, backend=FakeBackend())
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[generate]")]
    assert lines[0] == "[generate] 0/10 prompts (0%), starting" and lines[1].startswith("[generate] stopped: ")
    assert lines[2] == "[generate] 3/10 prompts (30%), starting"
    assert lines[3].startswith("[generate] done: 10/10 prompts (100%)") and len(lines) == 4


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_the_bar_and_no_plain_line():
    screen = Terminal()
    progress = Progress(10, 0, n=2, stream=screen)
    assert progress._bar is not None
    progress.update(prompts=5, samples=10, tokens=50)
    progress.close()
    assert "[generate]" not in screen.getvalue()
