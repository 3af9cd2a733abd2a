"""Progress and accounting of a generate run: a rich bar while it runs, one summary line after.

The bar counts prompts (the unit of resume), and shows samples and completion tokens/s. It draws
on a terminal; where stderr is a file or a pipe (a batch job's log) the same figures go out as plain
lines at a steady interval instead (reasonkit/ticker.py), and the summary line is always printed.
"""

from __future__ import annotations

import sys
import time

from reasonkit.ticker import Ticker, is_terminal


def fmt_count(x: float) -> str:
    """
    >>> fmt_count(950), fmt_count(12_345), fmt_count(3_400_000)
    ('950', '12.3K', '3.40M')
    """
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.1f}K"
    return f"{x:.0f}"


def fmt_time(seconds: float) -> str:
    """
    >>> fmt_time(3725.2)
    '1:02:05'
    """
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    """Counts one run. ``total``/``done`` are prompts in the whole input / committed earlier."""

    def __init__(self, total: int, done: int, *, n: int, enabled: bool = True, stream=None):
        self.total, self.done_before, self.n = total, done, n
        self.prompts = self.samples = self.tokens = 0
        self.start = time.perf_counter()
        self.setup_s = 0.0
        self._bar = self._ticker = None
        stream = stream or sys.stderr
        if enabled and total > done and not is_terminal(stream):
            self._ticker = Ticker("generate", total, "prompts", done=done, stream=stream)
        elif enabled and total > done:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            console = Console(file=stream)
            if console.is_terminal:
                self._bar = Bar(
                    TextColumn("generate"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("prompts"),
                    TextColumn("{task.fields[samples]} samples  {task.fields[speed]} tok/s"),
                    TimeRemainingColumn(),
                    console=console,
                    transient=True,
                )
                self._task = self._bar.add_task("generate", total=total, completed=done, samples=0, speed="-")
                self._bar.start()

    def restart(self) -> None:
        """Start the clock now (after the backend is loaded): tokens/s measures generation alone."""
        self.setup_s = time.perf_counter() - self.start
        self.start = time.perf_counter()
        if self._ticker is not None:
            self._ticker.restart()

    def update(self, *, prompts: int = 0, samples: int = 0, tokens: int = 0) -> None:
        self.prompts += prompts
        self.samples += samples
        self.tokens += tokens
        if self._bar is not None:
            self._bar.update(
                self._task, advance=prompts, samples=fmt_count(self.samples), speed=fmt_count(self.tokens_per_s)
            )
        if self._ticker is not None:
            self._ticker.update(self.done_before + self.prompts, figures=self._figures)

    def _figures(self) -> str:
        return f"{fmt_count(self.samples)} samples, {fmt_count(self.tokens_per_s)} tok/s"

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed if self.elapsed > 0 else 0.0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self._ticker is not None:
            self._ticker.close(figures=self._figures)


def summary_line(totals: dict, *, run_tokens: int, run_s: float, setup_s: float = 0.0) -> str:
    """
    >>> summary_line({"rows": 16, "prompts": 8, "prompt_tokens": 800, "completion_tokens": 3200,
    ...               "truncated": 4, "errors": 0}, run_tokens=3200, run_s=2.0)
    'generate: 16 rows (8 prompts), 800 prompt + 3200 completion tokens, 1600 tok/s, wall 0:00:02, truncated 25.0%'

    ``run_s`` is the generation time (tokens/s is measured over it), ``setup_s`` the model load.
    """
    rows = totals["rows"]
    share = 100 * totals["truncated"] / rows if rows else 0.0
    speed = run_tokens / run_s if run_s > 0 else 0.0
    line = (
        f"generate: {rows} rows ({totals['prompts']} prompts), {fmt_count(totals['prompt_tokens'])} prompt + "
        f"{fmt_count(totals['completion_tokens'])} completion tokens, {fmt_count(speed)} tok/s, "
        f"wall {fmt_time(run_s + setup_s)}, truncated {share:.1f}%"
    )
    if totals.get("errors"):
        line += f", {totals['errors']} error rows"
    return line
