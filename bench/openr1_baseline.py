"""The open-r1-style baseline that bench/filter.py times against `distill filter`, as one process.

    python bench/openr1_baseline.py TRACES_DIR OUT.parquet

What a user of open-r1 writes to check traces against their gold answers: load the shards with
``datasets``, ``map`` math-verify over every row in this one process (``parse`` the gold, bare LaTeX
wrapped in ``$..$`` as math-verify needs; ``parse`` the response; ``verify``), write Parquet. The
``datasets`` cache goes to a fresh temporary folder, so every run pays the Arrow conversion a first
run pays. Start-up (imports) is part of the time, as it is for ``distill filter``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path


def check(row: dict) -> dict:
    from math_verify import parse, verify

    gold = parse(row["answer"] if "$" in row["answer"] else f"${row['answer']}$")
    if not gold:
        return {"b_correct": None}
    return {"b_correct": bool(verify(gold, parse(row["response"])))}


def main(traces: str, out: str) -> None:
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    shards = sorted(str(p) for p in Path(traces).glob("part-*.parquet"))
    with tempfile.TemporaryDirectory(prefix="openr1-baseline-cache-") as cache:
        ds = datasets.load_dataset("parquet", data_files=shards, split="train", cache_dir=cache)
        ds.map(check).to_parquet(out)


if __name__ == "__main__":
    main(*sys.argv[1:3])
