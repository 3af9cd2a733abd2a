"""What judge and critique share: a full record, outputs derived from it, and resume.

A model-backed stage writes its **record** first (``OUT/record/``: every item asked, the raw judge
output, the parsed value or the reason there is none, tokens spent), then the tables derived from
that shard of the record (``OUT`` itself: prefs; ``OUT/sft/``). Derivation is a pure function of
record rows, so the two never disagree: if a run dies between committing a record shard and its
derived shards, the next run re-derives that last shard before asking the model anything more.
Prompts already in the record are never asked again.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reasonkit.schema import MESSAGES
from reasonkit.store import StageWriter

Derive = Callable[[list[dict]], list[dict]]


@dataclass
class Output:
    """One derived table: its writer, the function that derives its rows, and its schema."""

    writer: StageWriter
    derive: Derive
    schema: pa.Schema


def table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as a table with an explicit schema (never inferred from the first row)."""
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def with_extras(fields: list[tuple[str, pa.DataType]], extras: Sequence[str]) -> pa.Schema:
    return pa.schema(fields + [(name, pa.string()) for name in extras])


def commit(record: StageWriter, record_schema: pa.Schema, outputs: Sequence[Output], rows: list[dict]) -> None:
    """Record first, then what derives from it (see the module docstring for why this order)."""
    record.commit(table(rows, record_schema))
    for out in outputs:
        out.writer.commit(table(out.derive(rows), out.schema))


def reconcile(record: StageWriter, outputs: Sequence[Output]) -> int:
    """Re-derive the last record shard into any output that lacks its rows; returns rows added."""
    shards = record.manifest["shards"]
    if not shards:
        return 0
    rows = pq.read_table(record.dir / shards[-1]["file"]).to_pylist()
    added = 0
    for out in outputs:
        done = out.writer.done_keys()
        keys = out.writer.keys
        missing = [r for r in out.derive(rows) if tuple(r.get(k) for k in keys) not in done]
        out.writer.commit(table(missing, out.schema))
        added += len(missing)
    return added


def done_ids(record: StageWriter) -> set[str]:
    return {key[0] for key in record.done_keys()}


def reason_counts(reasons: Sequence[str | None]) -> dict[str, int]:
    """Reasons bucketed with their numbers hidden: ``score 11 outside 1-10`` -> ``score N outside N-N``."""
    counts = Counter(re.sub(r"\d+(?:\.\d+)?", "N", r) for r in reasons if r)
    return dict(counts.most_common())


def chunks(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def assistant(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def prompt_fields() -> list[tuple[str, pa.DataType]]:
    return [("id", pa.string()), ("prompt", MESSAGES)]


def record_dir(out: str) -> Path:
    return Path(out) / "record"


def write_report(out: str | Path, report: dict) -> None:
    """``OUT/report.json``, replaced atomically."""
    tmp = Path(out) / ".report.json.tmp"
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(Path(out) / "report.json")
