"""Reading user input into contract tables: prompts from Parquet, JSONL, CSV, a stage directory
or a Hugging Face dataset id, with column mapping.

>>> import json, tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "p.jsonl")
>>> _ = open(p, "w").write(json.dumps({"question": "What is 2 * 3?", "solution": "6"}) + "\\n")
>>> t = read_prompts(p, ColumnMap(problem="question", answer="solution"))
>>> t.column("messages").to_pylist()[0]
[{'role': 'user', 'content': 'What is 2 * 3?'}]
>>> t.column("answer").to_pylist(), t.column("id").to_pylist() == [stable_id("What is 2 * 3?")]
(['6'], True)
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.schema import MESSAGES, validate
from reasonkit.store import is_stage_dir, read_stage

_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


@dataclass(frozen=True)
class ColumnMap:
    """Which input columns hold the contract's fields (``--id-col``, ``--problem-col``, ...)."""

    id: str = "id"
    problem: str = "problem"
    answer: str = "answer"
    messages: str = "messages"
    source: str = "source"


def stable_id(text: str) -> str:
    """A short stable id for a problem text: the same problem gets the same id on every machine."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def read_table(path: str | os.PathLike, *, allow_incomplete: bool = False, split: str = "train") -> tuple[pa.Table, str]:
    """Any supported input as an Arrow table, and a short name of it for error messages."""
    text = str(path)
    p = Path(path)
    if p.is_dir():
        if is_stage_dir(p):
            return read_stage(p, allow_incomplete=allow_incomplete), text
        files = sorted(f for f in p.iterdir() if f.suffix in _SUFFIXES)
        if not files:
            raise UserError(f"{text}: directory holds no stage manifest and no .parquet/.jsonl/.csv files")
        tables = [read_table(f)[0] for f in files]
        return pa.concat_tables(tables, promote_options="permissive"), text
    if p.suffix in _SUFFIXES:
        if not p.is_file():
            raise UserError(f"{text}: no such file")
        return _read_file(p, _SUFFIXES[p.suffix]), text
    if p.exists():
        raise UserError(f"{text}: unsupported file type {p.suffix!r}; expected .parquet, .jsonl or .csv")
    if "/" in text and not text.startswith((".", "/")) and text.count("/") == 1:
        return _read_hub(text, split), text
    raise UserError(f"{text}: no such file, stage directory or Hugging Face dataset id")


def _read_file(path: Path, fmt: str) -> pa.Table:
    if path.stat().st_size == 0:
        raise UserError(f"{path}: empty input (no rows)")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif fmt == "json":
            import pyarrow.json as pj

            table = pj.read_json(path)
        else:
            import pyarrow.csv as pc

            # Every CSV column is read as text: "042" and 42 are different answers (AIME keeps the zero).
            names = pc.read_csv(path).column_names
            table = pc.read_csv(path, convert_options=pc.ConvertOptions(column_types={n: pa.string() for n in names}))
    except UserError:
        raise
    except Exception as e:  # pyarrow's errors are precise but long: keep the first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: cannot read as {fmt} ({first})") from None
    if table.num_rows == 0:
        raise UserError(f"{path}: empty input (no rows)")
    return table


def _read_hub(dataset_id: str, split: str) -> pa.Table:
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(f"{dataset_id}: looks like a Hugging Face dataset id, but HF_HUB_OFFLINE=1")
    import datasets

    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as e:
        raise UserError(f"{dataset_id}: cannot load Hugging Face dataset ({str(e).splitlines()[0]})") from None
    return ds.data.table


def read_prompts(
    path: str | os.PathLike,
    columns: ColumnMap = ColumnMap(),
    *,
    limit: int | None = None,
    split: str = "train",
) -> pa.Table:
    """A validated ``prompts`` table from any supported input.

    ``messages`` is taken from the messages column, or built as one user turn from the problem
    column (which is kept, so generation can append an instruction). ``id`` defaults to a stable
    hash of the problem text; duplicate ids are an error that names them.
    """
    table, name = read_table(path, split=split)
    cols = table.column_names
    out: dict[str, pa.Array] = {}
    if columns.messages in cols:
        out["messages"] = table.column(columns.messages)
        if columns.problem in cols:  # kept: decontamination and eval compare the bare problem
            out["problem"] = table.column(columns.problem).cast(pa.string())
    elif columns.problem in cols:
        problems = table.column(columns.problem).to_pylist()
        for i, text in enumerate(problems):
            if not isinstance(text, str) or not text.strip():
                raise UserError(f"{name}: row {i}: column {columns.problem!r} is empty; expected problem text")
        out["messages"] = pa.array([[{"role": "user", "content": t}] for t in problems], MESSAGES)
        out["problem"] = pa.array(problems, pa.string())
    else:
        raise UserError(
            f"{name}: no {columns.messages!r} or {columns.problem!r} column; found {cols} "
            "(use --messages-col or --problem-col)"
        )
    if columns.id in cols:
        out["id"] = table.column(columns.id).cast(pa.string())
    else:
        texts = out["problem"].to_pylist() if "problem" in out else [_last_user(m) for m in out["messages"].to_pylist()]
        out["id"] = pa.array([stable_id(t) for t in texts], pa.string())
    if columns.answer in cols:
        out["answer"] = table.column(columns.answer).cast(pa.string())
    if columns.source in cols:
        out["source"] = table.column(columns.source).cast(pa.string())
    used = {columns.messages, columns.problem, columns.id, columns.answer, columns.source}
    for extra in cols:
        if extra not in used and extra not in out:
            out[extra] = table.column(extra)
    prompts = validate(pa.table(out), "prompts", source=name)
    _check_unique_ids(prompts, name)
    if limit is not None:
        prompts = prompts.slice(0, limit)
    return prompts


def _last_user(messages: list[dict]) -> str:
    users = [m["content"] for m in messages or [] if m["role"] == "user"]
    return users[-1] if users else ""


def _check_unique_ids(table: pa.Table, name: str) -> None:
    counts = Counter(table.column("id").to_pylist())
    dupes = [k for k, c in counts.items() if c > 1]
    if dupes:
        shown = ", ".join(map(repr, dupes[:5])) + (f" and {len(dupes) - 5} more" if len(dupes) > 5 else "")
        raise UserError(f"{name}: duplicate ids {shown}; ids must be unique (drop the id column to hash problems)")
