import json
import os
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

from reasonkit.errors import UserError
from reasonkit.store import MANIFEST, StageWriter, fingerprint, read_stage, shard_paths

CONFIG = {"n": 2, "temperature": 0.6}


def rows(start: int, stop: int) -> pa.Table:
    return pa.table(
        {"id": [f"p{i}" for i in range(start, stop)], "sample": pa.array([0] * (stop - start), pa.int32())}
    )


def writer(path, config=CONFIG, **kw) -> StageWriter:
    return StageWriter(
        path, stage="demo", kind=None, config=config, keys=("id", "sample"), input_fingerprint="in1", **kw
    )


def test_commit_finish_and_read_back(tmp_path):
    w = writer(tmp_path)
    w.commit(rows(0, 3))
    w.commit(rows(3, 5))
    m = w.finish(note="x")
    assert m["complete"] and m["rows"] == 5 and m["note"] == "x"
    assert [p.name for p in shard_paths(tmp_path)] == ["part-00000.parquet", "part-00001.parquet"]
    assert read_stage(tmp_path).column("id").to_pylist() == [f"p{i}" for i in range(5)]
    on_disk = json.loads((tmp_path / MANIFEST).read_text())
    assert on_disk["config_fingerprint"] == fingerprint(CONFIG) and on_disk["input_fingerprint"] == "in1"


def test_reopen_yields_committed_keys(tmp_path):
    writer(tmp_path).commit(rows(0, 3))
    assert writer(tmp_path).done_keys() == {("p0", 0), ("p1", 0), ("p2", 0)}


def test_incomplete_directory_is_refused_unless_allowed(tmp_path):
    writer(tmp_path).commit(rows(0, 2))
    with pytest.raises(UserError, match="incomplete .*--allow-incomplete"):
        read_stage(tmp_path)
    assert read_stage(tmp_path, allow_incomplete=True).num_rows == 2


def test_fingerprint_mismatch_is_refused_then_overwritten(tmp_path):
    writer(tmp_path).commit(rows(0, 2))
    with pytest.raises(UserError, match="different config fingerprint.*--overwrite"):
        writer(tmp_path, config={"n": 4})
    w = writer(tmp_path, config={"n": 4}, overwrite=True)
    assert w.done_keys() == set() and not list(tmp_path.glob("part-*"))


def test_shards_validate_against_their_kind(tmp_path):
    w = StageWriter(tmp_path, stage="generate", kind="traces", config={}, keys=("id", "sample"))
    with pytest.raises(UserError, match="missing required column 'messages'"):
        w.commit(rows(0, 1))
    assert w.manifest["shards"] == []


def test_manifest_is_not_a_stage_dir_error(tmp_path):
    with pytest.raises(UserError, match="not a stage directory"):
        read_stage(tmp_path)


# -- crash safety: a real writer process killed with SIGKILL -----------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time, os
    import pyarrow as pa, pyarrow.parquet as pq
    import reasonkit.store as store
    out, mode = sys.argv[1], sys.argv[2]
    w = store.StageWriter(out, stage="demo", kind=None, config={"n": 2, "temperature": 0.6},
                          keys=("id", "sample"), input_fingerprint="in1")
    def rows(a, b):
        return pa.table({"id": [f"p{i}" for i in range(a, b)], "sample": pa.array([0] * (b - a), pa.int32())})
    w.commit(rows(0, 3)); w.commit(rows(3, 6))
    if mode == "torn":
        real = pq.write_table
        def torn(table, where, **kw):       # the third shard dies half-written
            real(table, where, **kw)
            size = os.path.getsize(where)
            os.truncate(where, size // 2)
            print("WRITING", flush=True); time.sleep(60)
        store.pq.write_table = torn
    else:                                    # renamed into place, but the manifest update is lost
        def stuck(*a, **k):
            print("WRITING", flush=True); time.sleep(60)
        w._record = stuck
    w.commit(rows(6, 9))
    """
)


@pytest.mark.parametrize("mode", ["torn", "orphan"])
def test_sigkill_mid_shard_keeps_committed_shards_and_right_resume_keys(tmp_path, mode):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(out), mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "WRITING"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)

    w = writer(out)
    expected = {(f"p{i}", 0) for i in range(6)}
    if mode == "orphan":  # a shard that reached its final name was fsync'd whole: it is adopted
        expected |= {(f"p{i}", 0) for i in range(6, 9)}
    assert w.done_keys() == expected
    assert not list(out.glob(".part-*")), "torn temp files are cleaned up"
    table = read_stage(out, allow_incomplete=True)
    assert sorted(table.column("id").to_pylist()) == sorted(k for k, _ in expected)
    # resuming writes only what is missing, and the result has every key exactly once
    w.commit(rows(0, 9).filter(pa.array([(f"p{i}", 0) not in expected for i in range(9)])))
    w.finish()
    ids = read_stage(out).column("id").to_pylist()
    assert sorted(ids) == sorted(f"p{i}" for i in range(9)) and len(ids) == 9


def test_free_text_is_written_without_a_dictionary_and_short_values_with_one(tmp_path):
    import pyarrow.parquet as pq

    n = 200
    table = (
        rows(0, n)
        .append_column("teacher", pa.array(["deepseek-r1"] * n))
        .append_column(
            "completion",
            pa.array([f"<think>step {i} " + "let me check this again. " * 8 + "</think>" for i in range(n)]),
        )
        .append_column("messages", pa.array([[{"role": "user", "content": f"q{i}"}] for i in range(n)]))
    )
    w = writer(tmp_path)
    path = w.commit(table)
    w.finish()
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in encodings["teacher"] and "RLE_DICTIONARY" in encodings["id"]
    assert "RLE_DICTIONARY" not in encodings["completion"]
    assert not any("RLE_DICTIONARY" in e for p, e in encodings.items() if p.startswith("messages"))
    assert read_stage(tmp_path).equals(table)  # the encoding changes nothing read back
