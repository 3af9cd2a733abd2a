"""Bytes a completion token costs in Parquet with the teacher's log-probs (schema.LOGPROB_COLUMNS), float16
against float32, at K=5 and at the stored K, written as the store writes shards (store.dictionary_columns).

    distill generate PROMPTS --teacher T --out TRACES --logprobs 20 ...
    python bench/logprob_bytes.py TRACES
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.store import dictionary_columns, shard_paths

COLUMNS = ("completion_ids", "logprob_ids", "logprobs")


def size(table: pa.Table) -> int:
    buf = io.BytesIO()
    pq.write_table(table, buf, use_dictionary=dictionary_columns(table))
    return buf.tell()


def main(traces: str) -> None:
    table = pa.concat_tables([pq.read_table(p) for p in shard_paths(Path(traces))])
    tokens = pc.sum(table.column("completion_tokens")).as_py()
    print(f"{table.num_rows} rows, {tokens} completion tokens")
    print(f"the row without the log-prob columns: {size(table.drop_columns(list(COLUMNS))) / tokens:.1f} B/token")
    stored = max(len(top) for row in table.column("logprob_ids").to_pylist() for top in row)
    for k in sorted({5, stored}):
        ids = pa.array(
            [[t[:k] for t in row] for row in table.column("logprob_ids").to_pylist()], pa.list_(pa.list_(pa.int32()))
        )
        values = [[t[:k] for t in row] for row in table.column("logprobs").to_pylist()]
        for dtype in (pa.float16(), pa.float32()):
            part = pa.table(
                {
                    "completion_ids": table.column("completion_ids"),
                    "logprob_ids": ids,
                    "logprobs": pa.array(values, pa.list_(pa.list_(dtype))),
                }
            )
            each = ", ".join(f"{c} {size(part.select([c])) / tokens:.1f}" for c in COLUMNS)
            print(f"K={k} {dtype}: {size(part) / tokens:.1f} B/token ({each})")


if __name__ == "__main__":
    main(sys.argv[1])
