"""A damaged stage directory is one line naming the directory and what is wrong, exit 2, for every
reader: ``distill inspect``, ``distill filter`` (which reads the traces), read_stage, iter_stage,
shard_paths and a StageWriter reopening it to resume. Never a traceback, never an output directory
that looks complete."""

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.errors import UserError
from reasonkit.store import (
    MANIFEST,
    StageWriter,
    fingerprint_path,
    iter_stage,
    load_manifest,
    read_stage,
    shard_paths,
)


def healthy(path: Path) -> Path:
    """A finished two-shard directory that `distill filter` would accept as traces if it were whole."""
    w = StageWriter(path, stage="generate", kind=None, config={"n": 1}, keys=("id",))
    w.commit(pa.table({"id": ["a", "b"]}))
    w.commit(pa.table({"id": ["c"]}))
    w.finish()
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["kind"] = "traces"
    (path / MANIFEST).write_text(json.dumps(manifest))
    return path


def _edit(key, value):
    def damage(path: Path) -> None:
        m = json.loads((path / MANIFEST).read_text())
        m[key] = value
        (path / MANIFEST).write_text(json.dumps(m))

    return damage


def _torn(path: Path) -> None:
    text = (path / MANIFEST).read_text()
    (path / MANIFEST).write_text(text[: len(text) // 2])


def _missing_shard(path: Path) -> None:
    (path / "part-00001.parquet").unlink()


def _torn_shard(path: Path) -> None:
    shard = path / "part-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:20])


def _shard_entry(**entry):
    def damage(path: Path) -> None:
        m = json.loads((path / MANIFEST).read_text())
        m["shards"][0] = entry
        (path / MANIFEST).write_text(json.dumps(m))

    return damage


# (name, damage, what the one line must say after "error: <dir>")
DAMAGE = [
    (
        "shards-of-strings",
        _edit("shards", ["part-00000.parquet", "part-00001.parquet"]),
        "shards[0] is 'part-00000.parquet', expected an object with file and rows",
    ),
    ("shards-not-a-list", _edit("shards", "part-00000.parquet"), "shards is 'part-00000.parquet', expected a list"),
    ("torn-manifest", _torn, "unreadable manifest"),
    ("manifest-a-list", lambda p: (p / MANIFEST).write_text("[1, 2]"), "expected a JSON object, found a list"),
    ("listed-shard-missing", _missing_shard, "part-00001.parquet: listed in"),
    ("rows-a-string", _edit("rows", "3"), "rows is '3', expected an integer"),
    (
        "shard-rows-a-float",
        _shard_entry(file="part-00000.parquet", rows=2.5),
        "shards[0].rows is 2.5, expected an integer",
    ),
    (
        "shard-outside-the-dir",
        _shard_entry(file="../elsewhere.parquet", rows=2),
        "shards[0].file is '../elsewhere.parquet', expected a file name in the directory",
    ),
    ("unknown-kind", _edit("kind", "tracez"), "kind is 'tracez', expected one of"),
    ("complete-a-string", _edit("complete", "yes"), "complete is 'yes', expected true or false"),
]
TORN_SHARD = ("torn-shard", _torn_shard, "part-00000.parquet: unreadable Parquet shard")
IDS = [d[0] for d in DAMAGE]


def damaged(tmp_path, damage) -> Path:
    path = healthy(tmp_path / "traces")
    damage(path)
    return path


def one_line_error(result, path: Path, says: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}"), lines[0]
    assert says in lines[0], lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name, damage, says", DAMAGE, ids=IDS)
def test_inspect_says_what_is_damaged(tmp_path, name, damage, says):
    path = damaged(tmp_path, damage)
    one_line_error(CliRunner().invoke(cli, ["inspect", str(path)]), path, says)


@pytest.mark.parametrize("name, damage, says", DAMAGE + [TORN_SHARD], ids=IDS + ["torn-shard"])
def test_filter_refuses_damaged_traces_and_leaves_no_output(tmp_path, name, damage, says):
    path = damaged(tmp_path, damage)
    out = tmp_path / "verified"
    result = CliRunner().invoke(cli, ["filter", str(path), "--out", str(out), "--lang", "none"])
    one_line_error(result, path, says)
    assert not (out / MANIFEST).exists() or not load_manifest(out)["complete"]


@pytest.mark.parametrize("name, damage, says", DAMAGE, ids=IDS)
@pytest.mark.parametrize(
    "reader",
    [
        read_stage,
        lambda p: list(iter_stage(p)),
        shard_paths,
        lambda p: StageWriter(p, stage="generate", kind=None, config={"n": 1}, keys=("id",)),
        fingerprint_path,  # how a later stage names its input
    ],
    ids=["read_stage", "iter_stage", "shard_paths", "resume", "fingerprint_path"],
)
def test_every_reader_raises_one_user_error(tmp_path, reader, name, damage, says):
    path = damaged(tmp_path, damage)
    with pytest.raises(UserError) as e:
        reader(path)
    message = str(e.value)
    assert message.startswith(str(path)) and says in message and "\n" not in message


def test_a_torn_shard_is_named_by_read_stage(tmp_path):
    path = damaged(tmp_path, _torn_shard)
    with pytest.raises(UserError, match="part-00000.parquet: unreadable Parquet shard"):
        read_stage(path)


def test_resuming_a_damaged_directory_points_at_overwrite(tmp_path):
    path = damaged(tmp_path, _missing_shard)
    with pytest.raises(UserError, match="--overwrite"):
        StageWriter(path, stage="generate", kind=None, config={"n": 1}, keys=("id",))
    w = StageWriter(path, stage="generate", kind=None, config={"n": 1}, keys=("id",), overwrite=True)
    assert w.done_keys() == set()
