"""Pass 1 of the filter stage on Ray: input shards spread over replicas, committed in input order.

Only pass 1 (the row filters: format, decontamination, verification, language) is spread out:
it is the expensive one, and each input shard is judged on its own. A :class:`FilterReplica`
builds the filters once (lingua's language models and the math-verify pool cost seconds to
load, so not once per shard) and runs :func:`reasonkit.filters.pass1.filter_shards` on each
shard it is given: the local loop's own function. The driver commits the work tables to
``OUT/.work`` batch by batch and *in input order* (Ray Data's ``preserve_order``), so the
dataset-wide pass 2 (dedup keeps the first of duplicates; selection) and pass 3 see the rows in
the order a local run commits them, and write identical output.

Replicas read the input shards by path: on a multi-node cluster the traces directory (and any
decontamination set) must be on storage every node mounts.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.ray_engine import connect, run_shards, tag

#: Which batch of its shard a work table is, so the driver commits the local engine's batches.
_BATCH = "_batch"


class FilterReplica:
    """One Ray actor: the row filters built once, then one input shard per call."""

    def __init__(self, config, make_filters=None, kind: str = "traces"):
        from reasonkit.filters.decontam import load_eval_sets
        from reasonkit.filters.pass1 import build_deduper, build_filters

        # One verification process per CPU the replica was given (not every core of its node).
        self.config = dataclasses.replace(
            config, engine="local", replicas=1, ray_address=None, workers=config.workers or 1
        )
        eval_sets = load_eval_sets(config.decontam, config.decontam_column, config.ngram)
        self.filters = (
            make_filters(self.config, eval_sets) if make_filters else build_filters(self.config, eval_sets, kind)
        )
        self.deduper = build_deduper(self.config)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from reasonkit.filters.pass1 import filter_shards

        out = []
        for unit in batch.to_pylist():
            done = {tuple(key) for key in json.loads(unit["done"])}
            tables = filter_shards([Path(unit["path"])], self.config, self.filters, self.deduper, done)
            for k, table in enumerate(tables):
                out.append(tag(table.append_column(_BATCH, pa.array([k] * table.num_rows, pa.int64())), unit["shard"]))
        return pa.concat_tables(out, promote_options="default")

    def __del__(self) -> None:
        for f in getattr(self, "filters", ()):
            getattr(f, "close", lambda: None)()


def plan_units(shards: list[Path], done: set[tuple]) -> tuple[list[dict], dict[int, int]]:
    """One unit per input shard with rows not yet in ``.work``, and how many rows it owes."""
    units, expected = [], {}
    for index, path in enumerate(shards):
        if done:
            t = pq.read_table(path, columns=["id", "sample"])
            keys = list(zip(t.column("id").to_pylist(), t.column("sample").to_pylist()))
            here = [list(k) for k in keys if k in done]
            rows = len(keys)
        else:
            here, rows = [], pq.read_metadata(path).num_rows
        if rows > len(here):
            units.append({"shard": index, "path": str(Path(path).resolve()), "done": json.dumps(here)})
            expected[index] = rows - len(here)
    return units, expected


def pass1_on_ray(
    shards: list[Path], config, work_w, log, *, kind: str = "traces", make_filters=None, ticker=None
) -> None:
    """Pass 1 over every input shard on Ray, committing to ``work_w`` as the local pass would.
    ``kind``: the input table's (traces, trajectories: build_filters); ``make_filters`` replaces build_filters (tests);
    ``ticker``: the stage's plain progress lines (reasonkit/ticker.py), advanced per committed shard."""
    connect(config.ray_address)
    units, expected = plan_units(shards, work_w.done_keys())
    log(
        f"ray: {len(units)} of {len(shards)} input shards to filter on "
        f"{config.replicas} replica{'s' if config.replicas > 1 else ''}"
    )
    seen = kept_all = 0

    def commit(shard: int, rows: pa.Table) -> None:
        nonlocal seen, kept_all
        batches = rows.column(_BATCH)
        rows = rows.drop_columns([_BATCH])
        for k in pc.unique(batches).to_pylist():
            work_w.commit(rows.filter(pc.equal(batches, k)))
        seen += rows.num_rows
        kept = pc.sum(rows.column("keep")).as_py() or 0
        log(f"pass 1: {seen} rows filtered ({kept} kept in shard {Path(shards[shard]).name})")
        kept_all += kept
        if ticker is not None:
            ticker.update(advance=rows.num_rows, figures=f"{kept_all:,} kept")

    run_shards(
        units,
        expected,
        FilterReplica,
        {"config": config, "make_filters": make_filters, "kind": kind},
        replicas=config.replicas,
        num_cpus=config.workers or 1,
        ordered=True,
        on_shard=commit,
    )
    work_w.finish()
