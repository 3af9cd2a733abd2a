"""Progress as plain lines, for a step whose stderr is a file or a pipe (a Slurm job's output, nohup, CI).

On a terminal each long step draws its rich bar; rich draws nothing into a file, so a step redirected
to one wrote no line for minutes (issue 36: an SFT step ran 11 minutes in silence). There a
:class:`Ticker` writes one line when the step starts, one at most every ``REASONKIT_PROGRESS_EVERY``
seconds while it runs, and one when it ends::

    [sft] 0/910 steps (0%), starting
    [sft] 120/910 steps (13%), 0.41 steps/s, loss 0.4123, 1,234 tok/s, ~32m07s left
    [sft] done: 910/910 steps (100%), 0.40 steps/s, loss 0.0310, 1,198 tok/s, in 37m55s

The rate counts what this run did since it started (a resumed run does not count the work done
before it), and the time left is what remains at that rate. Nothing here imports rich or any
stage, so every stage may use it (pyproject's layers: a piece that knows no stage).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from reasonkit.errors import UserError

#: Seconds between two progress lines. An environment variable, not a stage setting: it is where the
#: run's output goes (a log read by a person, a CI page), not what the step writes, and every step shares it.
EVERY_ENV = "REASONKIT_PROGRESS_EVERY"
#: 30 s: a 10-minute step writes about 20 lines, often enough to see it move, few enough to read the log.
DEFAULT_EVERY_S = 30.0
#: A step's own figures for a line: the text, or a function that makes it (a hot loop formats nothing
#: between two lines).
Figures = str | Callable[[], str]


def interval() -> float:
    """Seconds between two lines: ``REASONKIT_PROGRESS_EVERY`` (0: a line at every update), else 30."""
    raw = os.environ.get(EVERY_ENV, "").strip()
    if not raw:
        return DEFAULT_EVERY_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also refuses nan
        raise UserError(f"{EVERY_ENV}={raw!r}: expected a number of seconds >= 0 between progress lines")
    return seconds


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (where a rich bar draws); a closed or odd stream is not."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def plain_ticker(
    step: str, total: int | None, unit: str, *, done: int = 0, stream=None, write: Callable[[str], None] | None = None
) -> Ticker | None:
    """A :class:`Ticker` when ``stream`` (stderr by default) is not a terminal; None on a terminal,
    where the step draws its bar (or prints its own lines) instead."""
    stream = stream or sys.stderr
    return None if is_terminal(stream) else Ticker(step, total, unit, done=done, stream=stream, write=write)


def fmt_duration(seconds: float) -> str:
    """
    >>> fmt_duration(45.2), fmt_duration(376), fmt_duration(3725)
    ('45s', '6m16s', '1h02m')
    """
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def fmt_rate(per_s: float) -> str:
    """
    >>> fmt_rate(1234.5), fmt_rate(31.24), fmt_rate(0.4123), fmt_rate(0.00123)
    ('1,234', '31.2', '0.41', '0.0012')
    """
    if per_s >= 100:
        return f"{per_s:,.0f}"
    if per_s >= 10:
        return f"{per_s:.1f}"
    return f"{per_s:.2g}" if per_s < 0.1 else f"{per_s:.2f}"


class Ticker:
    """Plain progress lines of one step: ``step`` names it, ``total`` counts its ``unit`` (None when
    unknown), ``done`` of them were done before this run. ``write`` takes each line (default: print it
    to ``stream``, stderr); ``every`` seconds between lines (default: :func:`interval`); ``clock``: a
    monotonic clock (tests pass a fake one)."""

    def __init__(
        self,
        step: str,
        total: int | None,
        unit: str,
        *,
        done: int = 0,
        every: float | None = None,
        stream=None,
        write: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.step, self.total, self.unit = step, total, unit
        self.done = self.done_at_start = done
        self.every = interval() if every is None else every
        self.stream = stream or sys.stderr
        self._write = write or self._print
        self.clock = clock
        self.started = self.last = clock()
        self.figures: Figures = ""
        self.closed = False
        self._write(f"[{step}] {self._count()}, starting")

    def restart(self) -> None:
        """Count the rate from now (after a model has loaded: the rate is the work's alone)."""
        self.started = self.last = self.clock()
        self.done_at_start = self.done

    def update(self, done: int | None = None, *, advance: int = 0, figures: Figures | None = None) -> None:
        """``done`` so far (or ``advance`` by that many) and the step's own ``figures`` (``"loss 0.41"``, or a
        function that returns them, called only for a line): a line when ``every`` seconds have passed
        since the last one."""
        self.done = done if done is not None else self.done + advance
        if figures is not None:
            self.figures = figures
        now = self.clock()
        if now - self.last >= self.every and not self.closed:
            self.last = now
            left = self.left_s(now)
            self._write(self._line(now) + (f", ~{fmt_duration(left)} left" if left is not None else ""))

    def close(self, *, figures: Figures | None = None) -> None:
        """The last line (once): ``done`` when the total was reached, ``stopped`` when it was not."""
        if self.closed:
            return
        if figures is not None:
            self.figures = figures
        self.closed = True
        now = self.clock()
        finished = self.total is None or self.done >= self.total
        word = "done: " if finished else "stopped: "
        self._write(self._line(now, word) + f", in {fmt_duration(now - self.started)}")

    def rate(self, now: float | None = None) -> float | None:
        """Units per second this run (None before any time has passed)."""
        elapsed = (self.clock() if now is None else now) - self.started
        return (self.done - self.done_at_start) / elapsed if elapsed > 0 else None

    def left_s(self, now: float | None = None) -> float | None:
        """Seconds to the total at this run's rate (None with no total or no progress yet)."""
        rate = self.rate(now)
        if self.total is None or not rate or rate <= 0:
            return None
        return max(0, self.total - self.done) / rate

    def _count(self) -> str:
        if not self.total:
            return f"{self.done:,} {self.unit}"
        return f"{self.done:,}/{self.total:,} {self.unit} ({100 * self.done // self.total}%)"

    def _line(self, now: float, word: str = "") -> str:
        rate = self.rate(now)
        parts = [f"[{self.step}] {word}{self._count()}"]
        if rate is not None:
            parts.append(f"{fmt_rate(rate)} {self.unit}/s")
        figures = self.figures() if callable(self.figures) else self.figures
        if figures:
            parts.append(figures)
        return ", ".join(parts)

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
