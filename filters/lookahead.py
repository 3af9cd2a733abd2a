"""A filter's work on the next batch, done by a helper process while this one works on the current batch.

The filter stage's loop runs in one process, on one core. A filter whose answer for a row is a pure
function of the row (the language filter's ``lang_ratio``) can be asked early: the loop hands a
batch to :meth:`Lookahead.submit`, goes on with the next ones, and the filter :meth:`Lookahead.take`\\ s
the answer when the batch's turn comes (filters/pass1.py). On a machine with two cores this takes
the language filter off the loop's path, and the helper's start-up (lingua loading its models,
~1 CPU-second) overlaps the loop's own.

The helper only ever saves time: an answer is used only for the very inputs it was computed from
(compared by value), and when the helper is missing (one core), dead or failing, :meth:`take`
returns None and the filter computes the answer itself, with the same result.

A command can :func:`start` the helper before it imports the filters (the warm-up is named by a
``"module:function"`` string so that nothing heavy is imported to name it); the filter's
:class:`Lookahead` then adopts it.

>>> ahead = Lookahead("json:dumps", workers=0)  # no helper: nothing is ever taken
>>> ahead.submit(["a text"], len)
>>> ahead.take(["a text"]) is None
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor

from reasonkit.engine import usable_cores

#: Answers submitted and not yet taken that are kept; older ones are dropped (the filter never asked:
#: the loop decided otherwise). More than the batches filters/pass1.py lets wait.
MAX_PENDING = 256
#: Helpers started by :func:`start`, by warm-up and arguments, until a Lookahead adopts one.
_started: dict[tuple, ProcessPoolExecutor] = {}


def _warm(warm_up: str, *args) -> None:
    """The helper's initializer: import ``"module:function"`` and call it."""
    import importlib
    import signal

    # Ctrl-C reaches the whole process group: the command handles it and stops the helper, which
    # would otherwise print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    module, name = warm_up.split(":")
    getattr(importlib.import_module(module), name)(*args)


def _launch(warm_up: str, args: tuple, workers: int) -> ProcessPoolExecutor | None:
    if not workers or usable_cores() < workers:
        return None
    import multiprocessing

    # spawn, not fork: the loop's process holds Arrow's and lingua's threads.
    pool = ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=_warm, initargs=(warm_up, *args)
    )
    pool.submit(int)  # a pool starts its process at the first task: start it (and the warm-up) now
    return pool


def start(warm_up: str, *args, workers: int = 2) -> None:
    """Start the helper a ``Lookahead(warm_up, *args)`` built later will adopt (see the module doc)."""
    if (warm_up, args) not in _started:
        pool = _launch(warm_up, args, workers)
        if pool is not None:
            _started[(warm_up, args)] = pool


def stop_started() -> None:
    """Stop the helpers :func:`start` began that nothing adopted (the command failed before)."""
    while _started:
        _started.popitem()[1].shutdown(wait=False, cancel_futures=True)


class Lookahead:
    """One helper process (started now, or adopted from :func:`start`), when this process may use
    ``workers`` cores or more (default 2): one for the loop, one for the helper.

    ``warm_up`` (``"module:function"``, called with ``args``) runs first in the helper (loading
    models); the functions given to :meth:`submit` must be importable (module-level), as for any
    process pool.
    """

    def __init__(self, warm_up: str, *args, workers: int = 2):
        #: Answers the helper gave (the rest the filter computed itself).
        self.taken = 0
        self._pending: deque[tuple[list, Future]] = deque()
        self._pool = (_started.pop((warm_up, args), None) or _launch(warm_up, args, workers)) if workers else None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def submit(self, inputs: list, fn: Callable, *args) -> None:
        """Start ``fn(inputs, *args)`` in the helper; its answer is for :meth:`take` with these inputs."""
        if self._pool is None:
            return
        try:
            future = self._pool.submit(fn, inputs, *args)
        except RuntimeError:  # a broken or shut pool: the filter computes in its own process
            self.close()
            return
        self._pending.append((inputs, future))
        while len(self._pending) > MAX_PENDING:
            self._pending.popleft()[1].cancel()

    def ready(self) -> bool:
        """Whether the oldest answer not yet taken is done (True when none is pending)."""
        return not self._pending or self._pending[0][1].done()

    def take(self, inputs: list):
        """The helper's answer for exactly ``inputs``, or None (never submitted, or the helper failed)."""
        while self._pending:
            submitted, future = self._pending.popleft()
            if submitted != inputs:
                future.cancel()
                continue
            try:
                answer = future.result()
                self.taken += 1
                return answer
            except Exception:  # noqa: BLE001 - a dead helper (BrokenProcessPool) or its error: compute here
                self.close()
                return None
        return None

    def close(self) -> None:
        """Stop the helper (idempotent); later :meth:`take` calls return None."""
        pool, self._pool = self._pool, None
        for _, future in self._pending:
            future.cancel()
        self._pending.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
