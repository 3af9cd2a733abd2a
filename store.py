"""Stage directories: sharded Parquet committed atomically, a manifest, resume keys.

A stage writes ``OUT/part-00000.parquet ...``, ``OUT/_manifest.json`` and ``OUT/.huggingface.yaml``, the dataset
card that tells ``datasets.load_dataset(OUT)`` which files are which table (stage_card.py). Each shard is written
to a hidden temp name, fsync'd, then renamed into place, and only then listed in the manifest
(itself replaced atomically). So a crash at any instant leaves either a committed shard or a temp
file that no reader ever opens. Reopening the directory with the same fingerprints yields the keys
already committed so the stage can skip them; the same command rerun after a ``kill -9`` therefore
writes exactly the rows of a run that never stopped (datatrove's completion markers, per shard).

>>> import tempfile, pyarrow as pa
>>> d = tempfile.mkdtemp()
>>> with StageWriter(d, stage="demo", kind=None, config={"n": 1}, keys=("id",)) as w:
...     _ = w.commit(pa.table({"id": ["a", "b"]}))
...     _ = w.finish()
>>> read_stage(d).num_rows
2
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit import __version__
from reasonkit.errors import UserError
from reasonkit.schema import validate
from reasonkit.stage_card import CARD, Table, is_ours, layout_of, render

MANIFEST = "_manifest.json"
_SHARD = "part-{:05d}.parquet"


def fingerprint(obj: Any) -> str:
    """A stable 16-hex-digit hash of a config (dataclass, dict, list or scalar).

    >>> fingerprint({"b": 1, "a": [1, 2]}) == fingerprint({"a": [1, 2], "b": 1})
    True
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    text = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint_path(path: str | os.PathLike, split: str | None = None) -> str:
    """Fingerprint of an input by its content (identity.py, dataset_ref.py): a stage directory by its manifest, a
    file by its bytes, a folder of data files by theirs, a Hugging Face dataset (a Hub id at its
    revision SHA, or a Hub-layout folder) by the config and split it reads (``split``: as
    readers.read_table's). Only a name that resolves to nothing is fingerprinted by the name itself."""
    from reasonkit.dataset_ref import dataset_identity
    from reasonkit.identity import data_files, directory_identity, file_sha256

    path = Path(path)
    if (path / MANIFEST).is_file():
        m = load_manifest(path)  # a damaged input is one line naming it, not a traceback
        return fingerprint([m.get("stage"), m.get("config_fingerprint"), m.get("input_fingerprint"), m.get("rows")])
    if path.is_file():
        return file_sha256(path)[:16]
    pinned = dataset_identity(str(path), split)
    if pinned:
        return fingerprint(pinned)
    if path.is_dir():
        return fingerprint(directory_identity(path, select=data_files))
    return fingerprint(str(path))


def is_stage_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / MANIFEST).is_file()


#: What a reader of a damaged directory is told to do (appended to every damage message).
_REPAIR = "the directory is damaged: rerun the stage that wrote it with --overwrite"


def load_manifest(path: str | os.PathLike) -> dict:
    """The manifest of a stage directory, checked in shape and against the shard files it lists.

    This is the one place a manifest is validated, so every reader (read_stage, iter_stage,
    shard_paths, a StageWriter resuming, ``distill inspect``) fails on a damaged directory with
    the same one line (a UserError naming the directory and what is wrong), never a traceback.
    """
    file = Path(path) / MANIFEST
    try:
        manifest = json.loads(file.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: not a stage directory (no {MANIFEST})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{file}: unreadable manifest ({e}); {_REPAIR}") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise UserError(f"{file}: {problem}; {_REPAIR}")
    for s in manifest["shards"]:
        if not (Path(path) / s["file"]).is_file():
            raise UserError(f"{Path(path) / s['file']}: listed in {file} but missing; {_REPAIR}")
    return manifest


def _manifest_problem(m: Any) -> str | None:
    """What is wrong with a parsed manifest, in words, or None when it is sound."""
    from reasonkit.schema import TABLES

    if not isinstance(m, dict):
        return f"expected a JSON object, found {_json_type(m)}"
    for key in ("rows", "tokens"):
        if key in m and not _is_count(m[key]):
            return f"{key} is {m[key]!r}, expected an integer"
    if not isinstance(m.get("complete", False), bool):
        return f"complete is {m['complete']!r}, expected true or false"
    if m.get("kind") is not None and m["kind"] not in TABLES:
        return f"kind is {m['kind']!r}, expected one of {sorted(TABLES)} or null"
    if "shards" not in m:
        return "no shards list"
    shards = m["shards"]
    if not isinstance(shards, list):
        return f"shards is {shards!r}, expected a list of {{file, rows}} objects"
    for i, s in enumerate(shards):
        if not isinstance(s, dict) or "file" not in s or "rows" not in s:
            return f"shards[{i}] is {s!r}, expected an object with file and rows"
        name = s["file"]
        if not isinstance(name, str) or not name or Path(name).name != name or name in (".", ".."):
            return f"shards[{i}].file is {name!r}, expected a file name in the directory"
        if not _is_count(s["rows"]):
            return f"shards[{i}].rows is {s['rows']!r}, expected an integer"
    return None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _json_type(value: Any) -> str:
    return {list: "a list", str: "a string", type(None): "null"}.get(type(value), type(value).__name__)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: String columns whose values average more bytes than this are free text (a completion, a problem).
DICTIONARY_MAX_BYTES = 32


def dictionary_columns(table: pa.Table) -> list[str]:
    """The columns worth Parquet's dictionary encoding: all but free text and nested values.

    Dictionary-encoding text that never repeats costs the write twice its time for no size (a shard
    of 14,037 traces: 53 ms against 24 ms, 3,971 KB against 3,999 KB); short repeated values (a
    teacher's name, a finish reason) still shrink 15-30x with it.

    >>> dictionary_columns(pa.table({"teacher": ["r1"] * 3, "completion": ["<think>" + "x" * 40] * 3, "n": [1, 2, 3]}))
    ['teacher', 'n']
    """
    names = []
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_nested(field.type):
            continue
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_binary(field.type):
            lengths = pc.sum(pc.binary_length(column)).as_py() or 0
            if lengths > DICTIONARY_MAX_BYTES * max(1, len(column) - column.null_count):
                continue
        names.append(field.name)
    return names


class StageWriter:
    """Writes one stage directory; reopening it resumes.

    ``kind`` names the schema.py table every shard is validated against (None: no contract).
    ``config`` is the resolved stage config; its fingerprint, with ``input_fingerprint``, must
    match a directory being resumed, or the writer refuses unless ``overwrite``. ``input_path``
    (one path or several) is recorded so a reader can walk the chain of stages back to its source
    (the Hub card does, to find the teacher's sampling parameters).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        stage: str,
        kind: str | None,
        config: Any,
        keys: Sequence[str],
        input_fingerprint: str | None = None,
        input_path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
        overwrite: bool = False,
    ):
        self.dir = Path(out_dir)
        self.stage, self.kind, self.keys = stage, kind, tuple(keys)
        self.config_fingerprint = fingerprint(config)
        self.input_fingerprint = input_fingerprint
        config_dict = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
        if overwrite and self.dir.exists():
            self._clear()
        self.dir.mkdir(parents=True, exist_ok=True)
        if (self.dir / MANIFEST).exists():
            self.manifest = load_manifest(self.dir)
            self._check_resumable()
            self._adopt_orphans()
        else:
            if any(self.dir.glob("part-*.parquet")):
                raise UserError(f"{self.dir}: holds shards but no {MANIFEST}; pass --overwrite to replace them")
            self.manifest = {
                "stage": stage,
                "kind": kind,
                "config_fingerprint": self.config_fingerprint,
                "input_fingerprint": input_fingerprint,
                "input_path": _paths(input_path),
                "config": json.loads(json.dumps(config_dict, default=str)),
                "reasonkit_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "shards": [],
                "rows": 0,
                "tokens": 0,
                "complete": False,
            }
            self._save_manifest()

    # -- resume -----------------------------------------------------------------------------
    def _check_resumable(self) -> None:
        m = self.manifest
        for what, mine, theirs in (
            ("stage", self.stage, m.get("stage")),
            ("config fingerprint", self.config_fingerprint, m.get("config_fingerprint")),
            ("input fingerprint", self.input_fingerprint, m.get("input_fingerprint")),
        ):
            if mine != theirs:
                raise UserError(
                    f"{self.dir}: written by a different {what} ({theirs}, this run {mine}); "
                    "pass --overwrite to replace it, or choose another --out"
                )

    def _adopt_orphans(self) -> None:
        """A shard renamed into place whose manifest update was lost to a crash.

        It was fsync'd before the rename, so if it reads back it is whole: adopt it rather than
        throw the work away. Temp files are torn by definition and are removed.
        """
        listed = {s["file"] for s in self.manifest["shards"]}
        for tmp in self.dir.glob(".part-*.tmp-*"):
            tmp.unlink(missing_ok=True)
        for path in sorted(self.dir.glob("part-*.parquet")):
            if path.name in listed:
                continue
            try:
                table = pq.read_table(path)
            except Exception:
                path.unlink()
                continue
            self._record(path.name, table)
        self._save_manifest()

    def done_keys(self) -> set[tuple]:
        """Keys of every committed row, as tuples in the order of ``keys``."""
        done: set[tuple] = set()
        for s in self.manifest["shards"]:
            t = read_shard(self.dir / s["file"], columns=list(self.keys))
            done.update(zip(*(t.column(k).to_pylist() for k in self.keys)))
        return done

    # -- writing ----------------------------------------------------------------------------
    def commit(self, table: pa.Table) -> Path | None:
        """Validate and atomically commit one shard; returns its path (None for an empty table)."""
        if table.num_rows == 0:
            return None
        if self.manifest.get("complete"):
            self.manifest["complete"] = False  # more rows arrived: no longer the finished set
        if self.kind is not None:
            table = validate(table, self.kind, source=f"{self.stage} output")
        name = _SHARD.format(self._next_index())
        path = self.dir / name
        tmp = self.dir / f".{name}.tmp-{os.getpid()}"
        pq.write_table(table, tmp, use_dictionary=dictionary_columns(table))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.dir)
        self._record(name, table)
        self._save_manifest()
        return path

    def finish(self, **extra: Any) -> dict:
        """Mark the directory complete; ``extra`` keys are stored in the manifest."""
        self.manifest.update(extra)
        self.manifest["complete"] = True
        self._save_manifest()
        return self.manifest

    def _record(self, name: str, table: pa.Table) -> None:
        tokens = 0
        if "completion_tokens" in table.column_names:
            tokens = int(pc.sum(table.column("completion_tokens")).as_py() or 0)
        self.manifest["shards"].append({"file": name, "rows": table.num_rows, "tokens": tokens})
        self.manifest["rows"] = sum(s["rows"] for s in self.manifest["shards"])
        self.manifest["tokens"] = sum(s.get("tokens", 0) for s in self.manifest["shards"])

    def _next_index(self) -> int:
        used = [int(p.name[5:10]) for p in self.dir.glob("part-*.parquet")]
        return max(used, default=-1) + 1

    def _save_manifest(self) -> None:
        """The manifest, then the cards it changes: this directory's, and its parent's where this table is
        one of the parent's (a filter's ``sft/``, an eval's ``samples/``), so no card lags a commit."""
        self.manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        _write_atomic(self.dir / MANIFEST, json.dumps(self.manifest, indent=2).encode())
        write_card(self.dir, manifest=self.manifest)
        parent = self.dir.parent
        if self.kind is not None and ((parent / MANIFEST).is_file() or is_ours(parent)):
            write_card(parent)

    def _clear(self) -> None:
        for path in list(self.dir.glob("part-*.parquet")) + list(self.dir.glob(".part-*")):
            path.unlink()
        for name in (MANIFEST, "report.json"):
            (self.dir / name).unlink(missing_ok=True)
        for sub in self.dir.iterdir():  # rejected/, sft/, record/ ...: every sub-stage goes too
            if sub.is_dir() and (sub / MANIFEST).exists():
                shutil.rmtree(sub)

    def __enter__(self) -> StageWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


# -- the dataset card (stage_card.py renders it) -------------------------------------------------------
def sub_stages(directory: str | os.PathLike) -> list[Path]:
    """The sub-stage folders of a stage directory (``rejected/``, ``sft/``, ``record/`` ...), by name:
    visible folders holding a manifest. The card and `distill push` name a sub-stage's config after it."""
    d = Path(directory)
    return sorted(
        p for p in d.iterdir() if p.is_dir() and not p.name.startswith((".", "_")) and (p / MANIFEST).is_file()
    )


def card_tables(
    directory: str | os.PathLike, *, manifest: dict | None = None, layout: Sequence[str] | None = None
) -> list[Table]:
    """The tables of a directory, the main one first, as its card names them.

    A stage directory: its own table (config ``default``), then each sub-stage with a table kind (a work
    record without one, like the judges' ``record/``, holds no table of the contract). A directory that
    holds stages but no table of its own (an eval's, a GRPO run's): the tables its stage declared in
    ``layout``, sub-stage folders or files (``problems.parquet``), listed whether written yet or not.
    Manifests are read as they are, not checked shard by shard: this runs at every commit.
    """
    d = Path(directory)
    if layout is not None:
        return [_declared_table(d, entry) for entry in layout]
    own = manifest if manifest is not None else _raw_manifest(d) or {}
    tables = [_stage_table("default", "", own)]
    for sub in sub_stages(d):
        m = _raw_manifest(sub)
        if m is not None and m.get("kind") is not None and sub.name != "default":
            tables.append(_stage_table(sub.name, f"{sub.name}/", m))
    return tables


def write_card(
    directory: str | os.PathLike,
    *,
    manifest: dict | None = None,
    layout: Sequence[str] | None = None,
    stage: str | None = None,
) -> None:
    """Write (or rewrite) the card of ``directory``: a stage directory's from its manifests; a directory
    of stages from the ``layout`` its stage declares (later calls may omit it: the card keeps it). A card
    that reasonkit did not write is left as it is, and so is a stage's scratch folder (``.work/``)."""
    d = Path(directory)
    if not d.is_dir() or d.name.startswith(".") or ((d / CARD).exists() and not is_ours(d)):
        return
    if manifest is None and (d / MANIFEST).is_file():
        manifest = _raw_manifest(d)
        if manifest is None:  # damaged: its readers say so; a card would only guess
            return
    if manifest is not None:
        stage, layout = manifest.get("stage"), None
    elif layout is None:
        found = layout_of(d)
        if found is None:
            return
        stage, layout = stage or found[0], found[1]
    tables = card_tables(d, manifest=manifest, layout=layout)
    where = str(d) if d.name else str(d.resolve())  # as the stage was given it (the user's --out)
    text = render(where, tables, stage=stage, layout=list(layout) if layout else None)
    # Replaced whole (a reader never sees half a card) but not fsync'd: it is derived from the manifests and
    # rewritten at the next commit or resume, and two more fsyncs a commit doubled a small shard's commit time.
    tmp = d / f".{CARD}.tmp-{os.getpid()}"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, d / CARD)


def _raw_manifest(directory: Path) -> dict | None:
    try:
        found = json.loads((directory / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    # its shape only: load_manifest checks every shard, too slow for each commit of a large stage
    return found if isinstance(found, dict) and isinstance(found.get("shards"), list) else None


def _stage_table(name: str, prefix: str, m: dict) -> Table:
    return Table(
        name,
        f"{prefix}part-*.parquet",
        m.get("kind"),
        int(m.get("rows") or 0),
        len(m.get("shards") or []),
        bool(m.get("complete")),
        tokens=int(m.get("tokens") or 0),
    )


def _declared_table(d: Path, entry: str) -> Table:
    """One table of a directory of stages: a sub-stage folder, or one Parquet file its stage writes whole."""
    if entry.endswith(".parquet"):
        try:
            rows = pq.ParquetFile(d / entry).metadata.num_rows
        except (OSError, pa.ArrowException):  # not there yet (or torn mid-write: its stage rewrites it)
            rows = None
        return Table(Path(entry).stem, entry, None, rows, int(rows is not None), rows is not None)
    m = _raw_manifest(d / entry)
    if m is None:
        return Table(entry, f"{entry}/part-*.parquet", None, None, 0, False)
    return _stage_table(entry, f"{entry}/", m)


def _paths(value) -> str | list[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        return str(value)
    return [str(v) for v in value]


def shard_paths(path: str | os.PathLike, *, allow_incomplete: bool = False) -> list[Path]:
    """The committed shards of a stage directory, refusing an incomplete one unless told."""
    path = Path(path)
    m = load_manifest(path)
    if not m.get("complete") and not allow_incomplete:
        raise UserError(
            f"{path}: stage {m.get('stage')!r} is incomplete ({m.get('rows', 0)} rows committed); "
            "rerun that stage to finish it, or pass --allow-incomplete"
        )
    return [path / s["file"] for s in m["shards"]]


def iter_stage(path: str | os.PathLike, *, allow_incomplete: bool = False) -> Iterator[pa.Table]:
    """Yield the committed shards one table at a time (bounded memory)."""
    for p in shard_paths(path, allow_incomplete=allow_incomplete):
        yield read_shard(p)


def read_shard(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One committed shard; a torn or foreign file is one line naming it, not an Arrow traceback."""
    try:
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise UserError(f"{path}: unreadable Parquet shard ({str(e).splitlines()[0]}); {_REPAIR}") from None


def read_stage(path: str | os.PathLike, *, kind: str | None = None, allow_incomplete: bool = False) -> pa.Table:
    """All committed rows of a stage directory as one table (validated against ``kind`` if given)."""
    path = Path(path)
    m = load_manifest(path)
    tables = list(iter_stage(path, allow_incomplete=allow_incomplete))
    kind = kind or m.get("kind")
    if tables:
        table = pa.concat_tables(tables, promote_options="default")
    elif kind is not None:  # an emptied stage still has its table's columns
        from reasonkit.schema import empty

        table = empty(kind)
    else:
        table = pa.table({})
    return validate(table, kind, source=str(path)) if kind and table.num_columns else table
