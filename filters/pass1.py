"""Pass 1 of the filter stage on a list of shards: the row filters' verdicts and the dedup keys.

The unit of work of both engines: the local loop of filters/run.py and a Ray replica
(filters/ray_engine.py). Its own module so that the stage and the engine both import it and
neither imports the other.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from reasonkit.filters.base import apply
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.decontam import DecontamFilter
from reasonkit.filters.dedup import Deduper
from reasonkit.filters.format import FormatFilter
from reasonkit.filters.language import LanguageFilter
from reasonkit.filters.math.verify import VerifyFilter, default_workers
from reasonkit.filters.trajectory import (
    TEXT_COLUMNS,
    TrajectoryFilter,
    TrajectoryLanguageFilter,
    TrajectoryVerifyFilter,
    is_trajectories,
    with_model_text,
)
from reasonkit.schema import validate

#: Bytes of batches that may wait for a prefetching filter while the loop reads on (R1 traces of
#: ~30 KB: two batches of 1,024; short traces: tens, enough to hide the helper's start), and at
#: most this many batches (fewer than filters/lookahead.py keeps answers for).
MAX_WAITING_BYTES = 64 << 20
MAX_WAITING_BATCHES = 128


def build_filters(config: FilterConfig, eval_sets, kind: str = "traces", *, lookahead: bool = False) -> list:
    """The row filters of pass 1, in order; a trajectory's own checks first (the funnel then says a
    row was stopped by the turn limit rather than that its answer was empty).

    ``lookahead``: the language filter judges the next batch in a helper process on a second core
    (filters/lookahead.py); the local loop asks for it, a Ray replica (one CPU) does not."""
    trajectories = kind == "trajectories"
    filters: list = [TrajectoryFilter(config.require_tool)] if trajectories else []
    if config.difficulty is not None:  # first: a prompt outside the band needs no verifying (filters/difficulty.py)
        from reasonkit.filters.difficulty import DifficultyFilter, parse_band, read_pass_rates

        filters.append(DifficultyFilter(read_pass_rates(config.difficulty), parse_band(config.pass_rate)))
    filters.append(
        FormatFilter(
            drop_truncated=config.drop_truncated,
            require_boxed=config.require_boxed,
            min_tokens=config.min_tokens,
            max_tokens=config.max_tokens,
            max_repetition=config.max_repetition,
            repetition_ngram=config.repetition_ngram,
            think=config.think,
        )
    )
    if eval_sets:
        filters.append(DecontamFilter(eval_sets))
    if config.verifier == "code":  # programs run against the prompt's tests (filters/code/verify.py)
        from reasonkit.filters.code.verify import CodeVerifyFilter

        filters.append(
            CodeVerifyFilter(
                tests_column=config.tests_column,
                unverifiable=config.unverifiable,
                timeout=config.verify_timeout,
                workers=config.workers or default_workers(),
            )
        )
    else:
        verify = TrajectoryVerifyFilter if trajectories else VerifyFilter
        filters.append(
            verify(
                config.verifier,
                unverifiable=config.unverifiable,
                timeout=config.verify_timeout,
                workers=config.workers or default_workers(),
            )
        )
    if config.lang is not None:
        language = TrajectoryLanguageFilter if trajectories else LanguageFilter
        filters.append(language(config.lang, config.min_lang_ratio, config.lang_candidates, lookahead=lookahead))
    return filters


def build_deduper(config: FilterConfig) -> Deduper:
    return Deduper(
        config.dedup,
        threshold=config.minhash_threshold,
        num_perm=config.minhash_perms,
        bands=config.minhash_bands,
        shingle=config.shingle,
    )


def _batches(shards: list[Path], batch_rows: int) -> Iterator[tuple[Path, pa.Table]]:
    for shard in shards:
        for rb in pq.ParquetFile(shard).iter_batches(batch_size=batch_rows):
            yield shard, pa.Table.from_batches([rb])


def filter_batch(
    batch: pa.Table, filters, deduper: Deduper, done: set[tuple], source: str, timings: dict[str, float] | None = None
) -> pa.Table | None:
    """Pass 1 on one batch of traces: the row filters' verdicts and the dedup keys of kept rows.

    Rows whose keys are ``done`` (committed by an earlier run) are skipped; None when none is left.
    The unit of work of both engines: the local loop below, and a Ray replica (filters/ray_engine.py).
    """
    batch = admit(batch, done, source)
    return None if batch is None else judge_batch(batch, filters, deduper, timings)


def admit(batch: pa.Table, done: set[tuple], source: str) -> pa.Table | None:
    """A batch as read, checked against its schema (a clear error naming ``source``), less the rows
    ``done`` already; None when none is left."""
    trajectories = is_trajectories(batch.column_names)
    batch = validate(batch, "trajectories" if trajectories else "traces", source=source)
    if done:
        keys = zip(batch.column("id").to_pylist(), batch.column("sample").to_pylist())
        batch = batch.filter(pa.array([k not in done for k in keys], pa.bool_()))
    if batch.num_rows == 0:
        return None
    if trajectories:  # the text filters and dedup read the model's own text as a trace's completion
        batch = with_model_text(batch)
    return batch


def judge_batch(batch: pa.Table, filters, deduper: Deduper, timings: dict[str, float] | None = None) -> pa.Table:
    """The row filters (those not run yet) and the dedup keys on an admitted batch."""
    trajectories = is_trajectories(batch.column_names)
    batch = apply(filters, batch, timings)
    start = time.perf_counter()
    keep = batch.column("keep").to_pylist()
    rows = [i for i, k in enumerate(keep) if k]
    completions = batch.column("completion").to_pylist()
    for name, values in deduper.keys([completions[i] for i in rows]).items():
        column = np.zeros(batch.num_rows, dtype=np.uint64)
        column[rows] = values
        batch = batch.append_column(pa.field(name, pa.uint64()), pa.array(column, mask=~np.asarray(keep, bool)))
    if timings is not None:
        timings["dedup keys"] = timings.get("dedup keys", 0.0) + time.perf_counter() - start
    return batch.drop_columns(list(TEXT_COLUMNS)) if trajectories else batch


def filter_shards(
    shards: list[Path],
    config: FilterConfig,
    filters,
    deduper: Deduper,
    done: set[tuple],
    timings: dict[str, float] | None = None,
) -> Iterator[pa.Table]:
    """Pass 1 over whole input shards, one work table per batch of ``batch_rows``, in input order.

    A filter that can start early (``prefetch``: the language filter, whose helper process judges
    on a second core) is given each batch as soon as the filters before it have run; the batch then
    waits, and the loop goes on with the next ones, until the filter is ``ready`` or
    :data:`MAX_WAITING_BYTES` (or :data:`MAX_WAITING_BATCHES`) wait. The verdicts are the same as
    judging each batch in one go.
    """
    split = next((i for i, f in enumerate(filters) if hasattr(f, "prefetch")), len(filters))
    before, after = filters[:split], filters[split:]
    early = [f for f in after if hasattr(f, "prefetch")]
    waiting: deque[pa.Table] = deque()
    for shard, batch in _timed(_batches(shards, config.batch_rows), timings, "read"):
        try:
            batch = admit(batch, done, str(shard))
        except Exception:
            while waiting:  # what was read before a bad batch is judged and committed
                yield judge_batch(waiting.popleft(), after, deduper, timings)
            raise
        if batch is None:
            continue
        batch = apply(before, batch, timings)
        for f in early:
            start = time.perf_counter()
            f.prefetch(batch)
            if timings is not None:
                timings[f.name] = timings.get(f.name, 0.0) + time.perf_counter() - start
        waiting.append(batch)
        while waiting and (
            len(waiting) > MAX_WAITING_BATCHES
            or sum(b.nbytes for b in waiting) > MAX_WAITING_BYTES
            or all(f.ready() for f in early)
        ):
            yield judge_batch(waiting.popleft(), after, deduper, timings)
    while waiting:
        yield judge_batch(waiting.popleft(), after, deduper, timings)


def _timed(items: Iterator, timings: dict[str, float] | None, name: str) -> Iterator:
    """``items``, adding the seconds spent producing each one to ``timings[name]``."""
    items = iter(items)
    while True:
        start = time.perf_counter()
        try:
            item = next(items)
        except StopIteration:
            return
        finally:
            if timings is not None:
                timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        yield item
