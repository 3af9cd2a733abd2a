"""Reading user input into contract tables: prompts from Parquet, JSONL, CSV, a stage directory
or a Hugging Face dataset (a Hub id or a Hub-layout folder, with its config and split:
dataset_ref.py), with column mapping.

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
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa

from reasonkit.config import ColumnMap  # noqa: F401  (which columns hold the contract's fields)
from reasonkit.errors import UserError
from reasonkit.schema import MESSAGES, validate
from reasonkit.store import is_stage_dir, read_stage

_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def stable_id(text: str) -> str:
    """A short stable id for a problem text: the same problem gets the same id on every machine."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def read_table(
    path: str | os.PathLike, *, allow_incomplete: bool = False, split: str | None = None
) -> tuple[pa.Table, str]:
    """Any supported input as an Arrow table, and a short name of it for error messages.

    A Hugging Face dataset, by Hub id or as a folder in the Hub's layout, is named by a reference
    (``HuggingFaceH4/MATH-500:test``, ``open-r1/OpenR1-Math-220k:default:train``: dataset_ref.py)
    and read by ``datasets.load_dataset``; ``split`` names its split as ``:SPLIT`` does (files and
    stage directories have none, and ignore it).
    """
    from reasonkit import dataset_ref

    text = str(path)
    p = Path(path)
    if p.is_dir() and is_stage_dir(p):
        return read_stage(p, allow_incomplete=allow_incomplete), text
    ref = dataset_ref.parse(text, split)
    if ref is not None:
        return dataset_ref.load_table(ref), ref.text
    if p.is_dir():
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


# long: one branch per input kind (Parquet, JSONL, a stage directory, a Hub id), then one validation
def read_prompts(
    path: str | os.PathLike,
    columns: ColumnMap = ColumnMap(),
    *,
    limit: int | None = None,
    split: str | None = None,
) -> pa.Table:
    """A validated ``prompts`` table from any supported input.

    ``messages`` is taken from the messages column, or built as one user turn from the problem
    column (which is kept, so generation can append an instruction). ``id`` defaults to a stable
    hash of the problem text, and a problem text seen again is dropped (counted in the table's notes as
    ``duplicate_problems_dropped``); duplicate ids given in an id column are an error that names them.

    A prompt never ends with an assistant turn: rows whose messages do (a reference solution, as
    open-r1/OpenR1-Math-220k stores R1's) are prompted with the turns before it, said once on
    stderr and recorded in the table (:func:`prompt_notes`).
    """
    table, name = read_table(path, split=split)
    cols = table.column_names
    out: dict[str, pa.Array] = {}
    notes: dict = {}
    if columns.messages in cols:
        out["messages"] = table.column(columns.messages)
        if columns.problem in cols:  # kept: decontamination and eval compare the bare problem
            out["problem"] = table.column(columns.problem).cast(pa.string())
        trimmed = _without_reference_turns(out["messages"], out.get("problem"), name, columns)
        if trimmed is not None:
            out["messages"], dropped = trimmed
            notes["reference_turns_dropped"] = dropped
            print(
                f"{name}: {columns.messages!r} end with an assistant turn in {dropped} rows (a reference "
                "solution); prompting with the turns before it",
                file=sys.stderr,
                flush=True,
            )
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
    hashed = columns.id not in cols
    if not hashed:
        out["id"] = table.column(columns.id).cast(pa.string())
    else:
        texts = (
            out["problem"].to_pylist() if "problem" in out else [_last_user(m) for m in out["messages"].to_pylist()]
        )
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
    if hashed:  # the same problem text twice is one prompt: keep its first row, count the others
        prompts, repeats = _first_of_each_problem(prompts)
        if repeats:
            notes["duplicate_problems_dropped"] = repeats
            print(
                f"{name}: {repeats} rows repeat an earlier row's problem text; each problem is prompted once "
                "(its first row)",
                file=sys.stderr,
                flush=True,
            )
    _check_unique_ids(prompts, name)
    if limit is not None:
        prompts = prompts.slice(0, limit)
    if notes:
        prompts = prompts.replace_schema_metadata({_NOTES_KEY: json.dumps(notes)})
    return prompts


def prompt_notes(table: pa.Table) -> dict:
    """What :func:`read_prompts` changed in the user's prompts, for a stage's manifest
    (``{"reference_turns_dropped": N}``; empty when the prompts were used as given)."""
    raw = (table.schema.metadata or {}).get(_NOTES_KEY)
    return json.loads(raw) if raw else {}


_NOTES_KEY = b"reasonkit.prompt_notes"


def _without_reference_turns(column: pa.ChunkedArray, problems: pa.ChunkedArray | None, name: str, columns: ColumnMap):
    """``(messages, rows changed)`` with trailing assistant turns removed, or None when no row ends
    with one. The teacher must not be shown the answer it is asked for, and a prompt that ended with
    an assistant turn would give SFT rows two of them. A row left without a user turn is prompted
    with its problem text; with none, it is an error naming the row.

    Done in Arrow, not Python: OpenR1-Math-220k's assistant turns are R1's whole solutions (gigabytes
    as Python strings), and only the short turns before them are kept.
    """
    kind = column.type
    if not (
        pa.types.is_list(kind)
        and pa.types.is_struct(kind.value_type)
        and {"role", "content"} <= {f.name for f in kind.value_type}
    ):
        return None  # not messages: validate() names the column and the type it expected
    chunks, changed, row = [], 0, 0
    for chunk in column.chunks:
        trimmed, n = _trim_chunk(chunk)
        if trimmed is None:  # some row has no user turn left: the rare, slow path
            texts = problems.slice(row, len(chunk)).to_pylist() if problems is not None else [None] * len(chunk)
            trimmed, n = _trim_rows(chunk.to_pylist(), texts, row, name, columns)
        chunks.append(trimmed)
        changed += n
        row += len(chunk)
    return (pa.chunked_array(chunks, MESSAGES), changed) if changed else None


def _trim_chunk(chunk: pa.ListArray) -> tuple[pa.Array | None, int]:
    """One chunk without its rows' trailing assistant turns, and how many rows lost any; None when a
    changed row keeps no user turn. ``offsets`` and ``values`` both index the unsliced child array."""
    import numpy as np
    import pyarrow.compute as pc

    offsets = chunk.offsets.to_numpy().astype(np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    roles = chunk.values.field("role")
    assistant = pc.fill_null(pc.equal(roles, "assistant"), False).to_numpy(zero_copy_only=False)
    user = pc.fill_null(pc.equal(roles, "user"), False).to_numpy(zero_copy_only=False)
    nonempty = ends > starts
    last = np.maximum(ends - 1, 0)
    ends_with_assistant = nonempty & (assistant[last] if len(assistant) else nonempty)
    # The end of each row's kept turns: one past its last non-assistant turn (or its start). A running
    # maximum of "position + 1 of each non-assistant turn" never reaches past a row's own start from
    # an earlier row, so max(start, running max at the row's last turn) is that end.
    reach = np.maximum.accumulate(np.where(assistant, 0, np.arange(1, len(assistant) + 1)))
    new_ends = np.where(ends_with_assistant, np.maximum(starts, reach[last]), ends)
    users = np.concatenate([[0], np.cumsum(user)])
    if (ends_with_assistant & (users[new_ends] == users[starts])).any():
        return None, 0
    lengths = new_ends - starts
    new_offsets = np.concatenate([[0], np.cumsum(lengths)])
    take = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1])
    values = chunk.values.take(pa.array(take, pa.int64()))
    turns = pa.StructArray.from_arrays(
        [values.field("role").cast(pa.string()), values.field("content").cast(pa.string())], names=["role", "content"]
    )
    out = pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), turns, mask=chunk.is_null())
    return out.cast(MESSAGES), int(ends_with_assistant.sum())


def _trim_rows(rows: list, problems: list, first_row: int, name: str, columns: ColumnMap) -> tuple[pa.Array, int]:
    out, changed = [], 0
    for i, (messages, problem) in enumerate(zip(rows, problems), start=first_row):
        turns = [{"role": m["role"], "content": m["content"]} for m in messages or []]
        if turns and turns[-1]["role"] == "assistant":
            changed += 1
            while turns and turns[-1]["role"] == "assistant":
                turns.pop()
            if not any(t["role"] == "user" for t in turns):
                if not (isinstance(problem, str) and problem.strip()):
                    raise UserError(
                        f"{name}: row {i}: {columns.messages!r} hold only assistant turns (no user turn) and the row "
                        f"has no {columns.problem!r} text; expected a user turn before the assistant turn"
                    )
                turns.append({"role": "user", "content": problem})
        out.append(turns if messages is not None else None)
    return pa.array(out, MESSAGES), changed


def _last_user(messages: list[dict]) -> str:
    users = [m["content"] for m in messages or [] if m["role"] == "user"]
    return users[-1] if users else ""


def _first_of_each_problem(table: pa.Table) -> tuple[pa.Table, int]:
    """The rows whose hashed id (the problem text's) is seen for the first time, and how many were not.

    Hub sets repeat problems (open-r1/OpenR1-Math-220k's ``default`` holds the same text from several
    sources): their hashed ids collide, and a generation keyed by ``(id, sample)`` needs each once. An
    id is the problem's identity, so a repeat is dropped, not renamed: renaming (``id-2``) would sample
    the same problem twice as two prompts and let it outweigh the others in training.
    """
    import numpy as np

    ids = table.column("id").to_pylist()
    seen: set[str] = set()
    first = np.fromiter((not (i in seen or seen.add(i)) for i in ids), dtype=bool, count=len(ids))
    repeats = len(ids) - int(first.sum())
    return (table.filter(pa.array(first)) if repeats else table), repeats


def _check_unique_ids(table: pa.Table, name: str) -> None:
    counts = Counter(table.column("id").to_pylist())
    dupes = [k for k, c in counts.items() if c > 1]
    if dupes:
        shown = ", ".join(map(repr, dupes[:5])) + (f" and {len(dupes) - 5} more" if len(dupes) > 5 else "")
        raise UserError(f"{name}: duplicate ids {shown}; ids must be unique (drop the id column to hash problems)")
