"""Shards committed from a background thread while a stage's loop builds the next ones.

The filter stage writes a work shard per batch in pass 1 and three outputs per work shard in pass 3;
Parquet's encoding and the fsyncs release the GIL, so handing the commits to one thread overlaps
them with the loop's Python. Order and failure behave as direct :meth:`StageWriter.commit` calls:
shards land in the order given, nothing after a failed commit is written, and the error is raised
to the caller. (Its own module, not store.py: when a commit runs is the loop's business, not the
stage directory's format.)
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from reasonkit.store import StageWriter


class Committer:
    """Commits tables to stage writers from one background thread, in the order given: Parquet's
    encoding and the fsyncs release the GIL, so a shard is written while the caller builds the next.
    At most ``ahead`` commits wait; :meth:`wait` (and leaving the ``with`` block) waits for every one
    and raises the first commit's error, as a direct call would have.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> w = StageWriter(d, stage="demo", kind=None, config={}, keys=("id",))
    >>> with Committer() as c:
    ...     c.commit(w, pa.table({"id": ["a", "b"]}))
    >>> w.finish()["rows"]
    2
    """

    def __init__(self, ahead: int = 2):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="reasonkit-commit")
        self._pending: deque = deque()
        self._failed = False
        self.ahead = ahead

    def _commit(self, writer: StageWriter, table: pa.Table) -> None:
        if self._failed:  # nothing after a failed commit is written, as with direct calls
            return
        try:
            writer.commit(table)
        except BaseException:
            self._failed = True
            raise

    def commit(self, writer: StageWriter, table: pa.Table) -> None:
        self._pending.append(self._pool.submit(self._commit, writer, table))
        while len(self._pending) > self.ahead:
            self._pending.popleft().result()

    def wait(self) -> None:
        while self._pending:
            self._pending.popleft().result()

    def __enter__(self) -> Committer:
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        try:
            if exc_type is None:
                self.wait()
            else:  # let the commits in flight end; the error on its way wins over theirs
                for future in self._pending:
                    future.exception()
        finally:
            self._pool.shutdown(wait=True)
