"""Helpers shared by the Ray tests: stage directories compared row for row, and a worker that
kills itself once."""

import os
import signal
import sys
from pathlib import Path

import pyarrow as pa

from reasonkit.store import read_stage


def stage_rows(path, sort=("id", "sample")) -> list[dict]:
    """Every committed row of a stage directory, as dicts, sorted by ``sort`` (None: as committed)."""
    rows = read_stage(path, allow_incomplete=True).to_pylist()
    return sorted(rows, key=lambda r: tuple(r[k] for k in sort)) if sort else rows


def shard_stamps(path) -> dict[str, tuple[int, int]]:
    """``file -> (inode, mtime_ns)`` of each committed shard: unchanged means never rewritten."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(Path(path).glob("part-*.parquet"))}


def distill(command: str, args: list[str]) -> list[str]:
    """The command line of ``distill COMMAND ARGS`` as a user runs it."""
    script = Path(sys.executable).parent / "distill"
    return (
        [str(script), command, *args] if script.exists() else [sys.executable, "-m", "reasonkit.cli", command, *args]
    )


class KillOnce:
    """A filter that passes every batch, except that the first replica to reach its second batch
    SIGKILLs its own process, once per ``marker`` file: a worker lost in the middle of a shard."""

    name, reasons = "kill_once", ()

    def __init__(self, marker: str):
        self.marker, self.calls = marker, 0

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.calls += 1
        if self.calls == 2:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # one killer, ever
            except FileExistsError:
                return batch
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
        return batch


def filters_that_kill_once(marker: str):
    """A ``make_filters`` for FilterReplica: the stage's filters plus :class:`KillOnce`."""

    def make(config, eval_sets):
        from reasonkit.filters.pass1 import build_filters

        return build_filters(config, eval_sets) + [KillOnce(marker)]

    return make


def ship_to_workers() -> None:
    """Ray workers cannot import this tests folder: send this module's code along by value."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
