"""A process pool whose per-item timeout belongs to the pool, not to the function it runs.

math-verify guards itself with ``signal.alarm``, which only works on a main thread and cannot
interrupt a long C-level computation (sympy evaluating ``9^{9^{9}}`` never returns to the
interpreter). So the workers here run with math-verify's own timeouts off, and the parent enforces
the deadline: a worker that spends longer than ``timeout`` seconds on one item is killed, that item
is answered with ``on_timeout``, and a fresh worker takes over the rest of its chunk. A worker that
dies (segfault, ``os._exit``) costs one item, answered with ``on_crash``.

Workers start from a ``forkserver`` that has already imported the ``preload`` modules, so
replacing a stuck worker costs milliseconds, not a fresh interpreter and a sympy import; and the
parent's threads (Arrow's pools) are never forked.

Why not pebble's ``ProcessPool``, which kills and replaces a worker on a per-task timeout too:
measured with bench/pool.py on 2 shared cores (math-verify on the distinct pairs of synthetic
LaTeX traces, 2 workers, pebble from the same preloading forkserver), pebble took 10.2-10.9 s
where this pool took 8.9-9.3 s on 2,197 items (~15% slower), and 8.6 vs 8.3-8.4 s with three
stuck items; the answers were identical. A per-item timeout forces pebble to one task per round
trip (its ``map`` timeout covers a whole chunk, and a stuck item would cost the chunk), while
this pool streams chunks of 16 and times each answer. That, not taste, is why it stays.

>>> with TimeoutPool("reasonkit.filters.math.pool:_echo", workers=1, timeout=5) as pool:
...     pool.map([("a",), ("b",)])
[('a', None), ('b', None)]
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import wait
from typing import Any


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _echo(x):
    """A trivial task for doctests."""
    return x, None


def _serve(conn, target: str) -> None:
    """Worker loop: receive chunks of ``(index, args)``, send back ``(index, result)`` one by one."""
    fn = _resolve(target)
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for i, args in chunk:
            try:
                result = fn(*args)
            except Exception as e:  # RecursionError, MemoryError, a parser bug: one bad item only
                result = (None, f"error:{type(e).__name__}")
            conn.send((i, result))


class _Worker:
    def __init__(self, ctx, target: str):
        self.conn, child = ctx.Pipe()
        # By its package path, so it unpickles in the worker even when this file ran as a script.
        serve = _resolve("reasonkit.filters.math.pool:_serve")
        self.proc = ctx.Process(target=serve, args=(child, target), daemon=True)
        self.proc.start()
        child.close()
        self.todo: deque[int] = deque()
        self.since = 0.0

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                self.proc.kill()
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


class TimeoutPool:
    """``workers`` processes running ``target`` ("module:function") with a per-item ``timeout``."""

    def __init__(
        self,
        target: str,
        *,
        workers: int,
        timeout: float,
        chunk: int = 16,
        preload: Sequence[str] = (),
        on_timeout: Any = (None, "timeout"),
        on_crash: Any = (None, "worker_died"),
    ):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.target, self.n, self.timeout, self.chunk = target, workers, float(timeout), chunk
        self.on_timeout, self.on_crash = on_timeout, on_crash
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(list(preload) + ["reasonkit.filters.math.pool"])
        self.workers: list[_Worker] = []
        self.restarts = 0

    def _start(self) -> None:
        while len(self.workers) < self.n:
            self.workers.append(_Worker(self.ctx, self.target))

    def _replace(self, w: _Worker) -> _Worker:
        w.stop(kill=True)
        self.restarts += 1
        new = _Worker(self.ctx, self.target)
        self.workers[self.workers.index(w)] = new
        return new

    def map(self, items: Sequence[tuple]) -> list:
        """``target(*item)`` for each item, in order; stuck or crashed items get the fallback."""
        results: list = [None] * len(items)
        if not items:
            return results
        self._start()
        queue = deque(list(range(i, min(i + self.chunk, len(items)))) for i in range(0, len(items), self.chunk))
        left = len(items)
        deaths = answered = 0

        def fail(w: _Worker, answer: Any) -> None:
            nonlocal left, deaths
            if answer is self.on_crash:
                deaths += 1
                if deaths >= 3 and not answered:
                    raise RuntimeError(f"pool workers for {self.target} die before answering anything")
            results[w.todo.popleft()] = answer
            left -= 1
            rest = list(w.todo)
            w.todo.clear()
            self._replace(w)
            if rest:
                queue.appendleft(rest)

        while left:
            for w in self.workers:
                if not w.todo and queue:
                    chunk = queue.popleft()
                    try:
                        w.conn.send([(i, items[i]) for i in chunk])
                    except (OSError, BrokenPipeError):  # died while idle: replace, retry later
                        queue.appendleft(chunk)
                        self._replace(w)
                        continue
                    w.todo.extend(chunk)
                    w.since = time.monotonic()
            busy = [w for w in self.workers if w.todo]
            if not busy:
                continue
            deadline = min(w.since for w in busy) + self.timeout
            ready = wait([w.conn for w in busy], timeout=max(0.0, deadline - time.monotonic()))
            for w in [w for w in busy if w.conn in ready]:
                try:
                    while w.todo and w.conn.poll():
                        i, result = w.conn.recv()
                        results[i] = result
                        w.todo.remove(i)
                        left -= 1
                        answered += 1
                        w.since = time.monotonic()
                except (EOFError, OSError):
                    if w.todo:
                        fail(w, self.on_crash)
                    else:
                        self._replace(w)
            now = time.monotonic()
            for w in list(self.workers):
                if w.todo and now - w.since > self.timeout:
                    fail(w, self.on_timeout)
        return results

    def close(self) -> None:
        for w in self.workers:
            w.stop(kill=bool(w.todo))
        self.workers = []

    def __enter__(self) -> TimeoutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a pool dropped without close() must not leave processes behind
        try:
            self.close()
        except Exception:
            pass
