"""filters/committer.py: shards committed from a background thread land as direct commits would."""

import json

import pyarrow as pa
import pytest

from reasonkit.filters.committer import Committer
from reasonkit.store import MANIFEST, StageWriter, read_stage, shard_paths


def rows(start: int, stop: int) -> pa.Table:
    return pa.table(
        {"id": [f"p{i}" for i in range(start, stop)], "sample": pa.array([0] * (stop - start), pa.int32())}
    )


def writer(path) -> StageWriter:
    return StageWriter(path, stage="demo", kind=None, config={"n": 2}, keys=("id", "sample"), input_fingerprint="in1")


def test_background_commits_keep_their_order_and_raise_the_first_error(tmp_path, monkeypatch):
    w = writer(tmp_path / "ok")
    with Committer(ahead=1) as c:
        for start in range(0, 10, 2):
            c.commit(w, rows(start, start + 2))
    w.finish()
    assert read_stage(tmp_path / "ok").column("id").to_pylist() == [f"p{i}" for i in range(10)]
    assert [s["file"] for s in json.loads((tmp_path / "ok" / MANIFEST).read_text())["shards"]] == [
        f"part-{i:05d}.parquet" for i in range(5)
    ]

    real = StageWriter.commit
    calls = []

    def third_fails(self, table):
        calls.append(table.num_rows)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(self, table)

    monkeypatch.setattr(StageWriter, "commit", third_fails)
    w = writer(tmp_path / "bad")
    with pytest.raises(OSError, match="disk full"):
        with Committer() as c:
            for start in range(0, 10, 2):
                c.commit(w, rows(start, start + 2))
    assert len(shard_paths(tmp_path / "bad", allow_incomplete=True)) == 2  # what came before the error is committed
    with pytest.raises(KeyError):  # an error of the caller's own is not replaced by a commit's
        with Committer() as c:
            c.commit(w, rows(0, 2))
            raise KeyError("mine")
