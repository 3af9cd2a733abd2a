"""The filter stage: traces in, verdicts + rejected + sft + report.json out, in three passes.

1. **Row filters, streaming** (format, decontam, verify, language): input shards are read in
   batches of ``batch_rows``; each batch, with its verdict columns and its dedup keys (a few
   uint64 per row), is committed to ``OUT/.work`` (a resumable stage directory of its own). This
   is the expensive pass, so a killed run resumes it where it stopped. With ``engine: ray`` the
   input shards are spread over a Ray cluster (filters/ray_engine.py) and committed here in
   input order, so passes 2 and 3 see exactly the rows, in the order, of a local run.
2. **Dataset-wide decisions** (dedup, selection) from small columns only: ids, token counts and
   the dedup keys, ~30 bytes per row, never the traces themselves.
3. **Write**: the work shards are streamed again, the pass-2 decisions applied, and the rows
   committed to ``OUT`` (kept), ``OUT/rejected`` and ``OUT/sft``. Each writer skips keys already
   committed, so a rerun after a crash here writes each row once. ``report.json`` is written
   before the manifests are marked complete; ``.work`` is removed last.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.errors import UserError
from reasonkit.filters.base import mark
from reasonkit.filters.committer import Committer
from reasonkit.filters.config import FilterConfig, language_lookahead
from reasonkit.filters.decontam import load_eval_sets, parse_spec
from reasonkit.filters.dedup import Deduper
from reasonkit.filters.pass1 import build_deduper, build_filters, filter_shards
from reasonkit.filters.prompts import filter_prompts, is_traces_dir
from reasonkit.filters.report import Tally
from reasonkit.filters.select import reward_pick, reward_scores, select, select_by_reward
from reasonkit.filters.trajectory import is_trajectories
from reasonkit.filters.trajectory import report as trajectory_report
from reasonkit.filters.trajectory import sft_rows as trajectory_sft_rows
from reasonkit.sandbox.stage import sandbox_record
from reasonkit.schema import LOGPROB_COLUMNS, MESSAGES, TABLES
from reasonkit.store import StageWriter, fingerprint, fingerprint_path, load_manifest, shard_paths
from reasonkit.think import assistant_turn
from reasonkit.ticker import Ticker, plain_ticker

WORK = ".work"
REPORT = "report.json"
Log = Callable[[str], None]


def input_shards(config: FilterConfig) -> list[Path]:
    """The committed shards of the traces directory, after checking it is one (UserError if not)."""
    path = Path(config.traces)
    if not path.exists():
        raise UserError(f"{path}: no such traces directory")
    if not path.is_dir():
        raise UserError(f"{path}: expected a traces stage directory (written by `distill generate`), found a file")
    manifest = load_manifest(path)
    # scores: traces a reward model scored (distill score); trajectories: distill generate --tools
    if manifest.get("kind") not in ("traces", "scores", "trajectories"):
        raise UserError(
            f"{path}: holds a {manifest.get('kind')!r} table (stage {manifest.get('stage')!r}); "
            "`distill filter` reads a traces directory written by `distill generate` (or scored by `distill score`, "
            "or the trajectories of `distill generate --tools`)"
        )
    shards = shard_paths(path, allow_incomplete=config.allow_incomplete)
    kind = None
    for shard in shards:
        try:
            names = pq.read_schema(shard).names
        except (OSError, pa.ArrowException) as e:
            raise UserError(f"{shard}: unreadable Parquet shard ({str(e).splitlines()[0]})") from None
        kind = kind or table_kind(names)
        required = [c.name for c in TABLES[kind] if c.required] + (["reward"] if config.select == "reward" else [])
        missing = [c for c in required if c not in names]
        if missing == ["reward"]:
            raise UserError(
                f"{path}: --select reward needs a 'reward' column (score the traces first: distill score "
                f"{path} --model RM --out SCORED); found columns {names}"
            )
        if missing:
            raise UserError(
                f"{shard}: missing required column {missing[0]!r} of a {kind} table; found columns {names}"
            )
    if config.verifier == "code":
        from reasonkit.filters.code.verify import check_tests_column

        check_tests_column(path, shards, kind, config.tests_column)
    if config.require_tool and kind == "traces":
        raise UserError(
            f"{path}: --require-tool checks tool-use trajectories (distill generate --tools); this directory "
            "holds traces, which call no tools"
        )
    return shards


def table_kind(names) -> str:
    """``trajectories`` for a table with a trajectory's columns (filters/trajectory.py), else ``traces``."""
    return "trajectories" if is_trajectories(names) else "traces"


def input_kind(shards: list[Path]) -> str:
    """The table the (checked) input shards hold; ``traces`` when there are none."""
    return table_kind(pq.read_schema(shards[0]).names) if shards else "traces"


def funnel_order(config: FilterConfig, filters: list, deduper: Deduper) -> list[tuple[str, str]]:
    order = []
    for f in filters:
        reasons = f.reasons if not (f.name == "verify" and config.verifier == "none") else ()
        order += [(f.name, r) for r in reasons]
    if deduper.mode != "none":
        order += [("dedup", "duplicate")] + ([("dedup", "near_duplicate")] if deduper.mode == "minhash" else [])
    if config.keep_per_prompt is not None and config.select != "all":
        order.append(("select", "not_selected"))
    return order


def run_filter(config: FilterConfig, *, log: Log | None = None, progress: bool = True) -> dict:
    """Run the filter stage; returns the report (also in ``OUT/report.json``). ``progress``: plain progress
    lines of pass 1 on stderr when it is not a terminal (reasonkit/ticker.py; ``--quiet`` turns them off)."""
    log = log or (lambda message: None)
    if config.difficulty is not None and not is_traces_dir(config.traces):  # a prompts table: the band alone
        return filter_prompts(config, log=log)
    started = time.time()
    sandbox_mode = None
    if config.verifier == "code":  # a sandbox that cannot start is one error, before the input is read
        from reasonkit.sandbox.stage import require_sandbox

        sandbox_mode = require_sandbox("distill filter --verifier code")
    timings = {"setup": 0.0}
    step = time.perf_counter()
    shards, kind, filters, deduper = _before_any_work(config)
    out = Path(config.out)
    writer = _writer_factory(config)
    if config.overwrite and (out / WORK).exists():
        shutil.rmtree(out / WORK)
    timings["setup"] = time.perf_counter() - step

    verdicts, sft_kind = ("trajectories", "sft_tools") if kind == "trajectories" else ("verdicts", "sft")
    kept_w = writer(out, verdicts, overwrite=config.overwrite)
    if kept_w.manifest["complete"] and (out / REPORT).is_file():
        log(f"{out}: already complete; nothing to do")
        return json.loads((out / REPORT).read_text())
    work_w = writer(out / WORK, None, stage="filter-work")
    _run_pass1(shards, config, filters, deduper, work_w, log, timings, kind=kind, progress=progress)
    work = [out / WORK / s["file"] for s in work_w.manifest["shards"]]
    step = time.perf_counter()
    decisions = _pass2(work, config, deduper, log)
    timings["dedup+select"] = time.perf_counter() - step
    step = time.perf_counter()
    tally = Tally()
    rejected_w, sft_w = writer(out / "rejected", verdicts), writer(out / "sft", sft_kind)
    to_sft = trajectory_sft_rows if kind == "trajectories" else sft_rows
    _pass3(work, decisions, deduper.columns, config.batch_rows, (kept_w, rejected_w, sft_w), tally, log, to_sft)
    report = tally.report(
        funnel_order(config, filters, deduper),
        sft_rows=tally.rows_out,
        input=str(config.traces),
        seconds=round(time.time() - started, 3),
        config=config.fingerprinted(),
        **reward_report(work, config),
        **(trajectory_report(work, decisions) if kind == "trajectories" else {}),
        **sandbox_record(sandbox_mode),
    )
    _write_json(out / REPORT, report)
    rejected_w.finish()
    sft_w.finish()
    kept_w.finish(rows_in=report["rows_in"], rows_out=report["rows_out"], **sandbox_record(sandbox_mode))
    shutil.rmtree(out / WORK, ignore_errors=True)
    timings["write"] = time.perf_counter() - step
    # Where the time went, for the user and for bench/filter.py (not in report.json: it is not a result).
    log("time: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in timings.items()))
    return report


def _before_any_work(config: FilterConfig) -> tuple:
    """Every check that can fail, before anything is written: (the input's shards, its kind, the row filters,
    the deduper)."""
    shards = input_shards(config)
    kind = input_kind(shards)
    if config.engine == "ray":
        from reasonkit.ray_engine import connect

        connect(config.ray_address)  # an unreachable cluster fails here, before OUT exists
    eval_sets = load_eval_sets(config.decontam, config.decontam_column, config.ngram)
    filters = build_filters(
        config, eval_sets, kind, lookahead=language_lookahead(config, load_manifest(config.traces).get("rows", 0))
    )
    deduper = build_deduper(config)
    for f in filters:
        if f.name == "difficulty":  # an eval of other prompts is an error before OUT exists
            f.check_input(shards, config.difficulty, config.traces)
    return shards, kind, filters, deduper


def _writer_factory(config: FilterConfig) -> Callable[..., StageWriter]:
    """Opens each of the stage's writers, all under the config and the inputs' fingerprint (the traces, the
    decontamination sets and, with --difficulty, the eval's pass rates: another eval is another input)."""
    inputs = [config.traces] + [parse_spec(s)[1] for s in config.decontam]
    if config.difficulty is not None:
        inputs.append(str(Path(config.difficulty) / "problems.parquet"))
    in_fp = fingerprint([fingerprint_path(p) for p in inputs])

    def writer(path: Path, kind: str | None, stage: str = "filter", **kw) -> StageWriter:
        return StageWriter(
            path,
            stage=stage,
            kind=kind,
            config=config.fingerprinted(),
            keys=("id", "sample"),
            input_fingerprint=in_fp,
            input_path=inputs,
            **kw,
        )

    return writer


def _run_pass1(
    shards,
    config: FilterConfig,
    filters,
    deduper: Deduper,
    work_w: StageWriter,
    log: Log,
    timings: dict[str, float],
    *,
    kind: str,
    progress: bool,
) -> None:
    """Pass 1 here or on Ray, unless an earlier run finished it; the filters closed after it either way."""
    ticker = None
    if progress and not work_w.manifest["complete"]:  # pass 1 is the long one: the plain lines count its rows
        ticker = plain_ticker("filter", load_manifest(config.traces).get("rows"), "rows", done=work_w.manifest["rows"])
    try:
        if not work_w.manifest["complete"] and config.engine == "ray":
            from reasonkit.filters.ray_engine import pass1_on_ray

            pass1_on_ray(shards, config, work_w, log, kind=kind, ticker=ticker)
        elif not work_w.manifest["complete"]:
            _pass1(shards, config, filters, deduper, work_w, log, timings, ticker)
    finally:
        for f in filters:
            getattr(f, "close", lambda: None)()
        if ticker is not None:
            ticker.close()


def _pass1(
    shards,
    config: FilterConfig,
    filters,
    deduper: Deduper,
    work_w: StageWriter,
    log: Log,
    timings: dict[str, float],
    ticker: Ticker | None = None,
) -> None:
    seen = kept_all = 0
    with Committer() as committer:  # a batch is written while the next is judged
        for batch in filter_shards(shards, config, filters, deduper, work_w.done_keys(), timings):
            start = time.perf_counter()
            committer.commit(work_w, batch)
            timings["write work"] = timings.get("write work", 0.0) + time.perf_counter() - start
            seen += batch.num_rows
            kept = pc.sum(batch.column("keep")).as_py() or 0
            log(f"pass 1: {seen} rows filtered ({kept} kept in this batch of {batch.num_rows})")
            kept_all += kept
            if ticker is not None:
                ticker.update(advance=batch.num_rows, figures=f"{kept_all:,} kept")
    work_w.finish()


class _Columns(Mapping):
    """One key column over every work shard, read when asked for (one band in memory at a time)."""

    def __init__(self, paths: list[Path], names: list[str]):
        self.paths, self.names = paths, names

    def __getitem__(self, name: str) -> np.ndarray:
        parts = [pq.read_table(p, columns=[name]).column(name).fill_null(0).to_numpy() for p in self.paths]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)

    def __iter__(self):
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def _pass2(work: list[Path], config: FilterConfig, deduper: Deduper, log: Log) -> list[str | None]:
    """Dedup and selection over every row, reading only the small columns they need."""

    def column(name: str) -> pa.ChunkedArray:
        return pa.chunked_array([pq.read_table(p, columns=[name]).column(name) for p in work])

    if not work:
        return []
    alive = column("keep").to_numpy().astype(bool)
    reasons = deduper.decide(_Columns(work, deduper.columns), alive)
    if config.keep_per_prompt is not None and config.select != "all":
        alive &= np.array([r is None for r in reasons], dtype=bool)
        if config.select == "reward":
            chosen = select_by_reward(
                column("id").to_pylist(),
                column("sample").to_numpy(),
                reward_column(work, config),
                column("correct").to_pylist(),
                alive,
                config.keep_per_prompt,
            )
        else:
            chosen = select(
                column("id").to_pylist(),
                column("sample").to_numpy(),
                column("completion_tokens").to_numpy(),
                alive,
                config.keep_per_prompt,
                config.select,
                config.seed,
            )
        reasons = [a or b for a, b in zip(reasons, chosen)]
    log(f"pass 2: {sum(r is not None for r in reasons)} rows dropped by dedup and selection")
    return reasons


def reward_column(work: list[Path], config: FilterConfig) -> list[float | None] | None:
    """The score each row competes with under ``--select reward`` (None: the input carries no reward)."""
    if not work or "reward" not in pq.read_schema(work[0]).names:
        return None
    names = ["reward"] + (["step_rewards"] if "step_rewards" in pq.read_schema(work[0]).names else [])
    parts = [pq.read_table(p, columns=names) for p in work]
    rewards = [v for t in parts for v in t.column("reward").to_pylist()]
    steps = [v for t in parts for v in t.column("step_rewards").to_pylist()] if "step_rewards" in names else None
    return reward_scores(rewards, steps, config.step_aggregate)


def reward_report(work: list[Path], config: FilterConfig) -> dict:
    """The report's ``reward_pick``: how often the reward model's own pick per prompt was verified correct."""
    scores = reward_column(work, config)
    if scores is None:
        return {}
    cols = {
        n: [v for p in work for v in pq.read_table(p, columns=[n]).column(n).to_pylist()]
        for n in ("id", "sample", "correct")
    }
    return {"reward_pick": reward_pick(cols["id"], cols["sample"], scores, cols["correct"])}


def sft_rows(kept: pa.Table) -> pa.Table:
    """The ``sft`` table of kept rows: the prompt plus one assistant turn, :func:`assistant_turn`'s
    layout (R1's ``<think>\\n{reasoning}\\n</think>\\n\\n{response}``, or the response alone for a
    trace that wrote no think block); with the teacher's log-probs (``distill generate --logprobs``,
    schema.LOGPROB_COLUMNS) when the traces carry them, for ``distill train --kd-weight``."""
    messages = [
        list(prompt) + [{"role": "assistant", "content": assistant_turn(r, a)}]
        for prompt, r, a in zip(
            kept.column("messages").to_pylist(),
            kept.column("reasoning").to_pylist(),
            kept.column("response").to_pylist(),
        )
    ]
    return pa.table(
        {
            "id": kept.column("id"),
            "messages": pa.array(messages, MESSAGES),
            "source": kept.column("source"),
            "sample": kept.column("sample"),
            **{c.name: kept.column(c.name) for c in LOGPROB_COLUMNS if c.name in kept.column_names},
        }
    )


def _pass3(work, decisions, key_columns, batch_rows, writers, tally: Tally, log: Log, to_sft=sft_rows) -> None:
    done = [w.done_keys() for w in writers]
    with Committer() as committer:  # a shard is written while the next is built
        pending: list[list[pa.Table]] = [[], [], []]
        offset = 0
        for path in work:
            batch = pq.read_table(path)
            n = batch.num_rows
            batch = mark(batch, range(n), decisions[offset : offset + n]).drop_columns(key_columns)
            offset += n
            tally.add(batch)
            keep = batch.column("keep")
            kept, rejected = batch.filter(keep), batch.filter(pc.invert(keep))
            for k, table in enumerate((kept, rejected, to_sft(kept))):
                if done[k]:
                    keys = zip(table.column("id").to_pylist(), table.column("sample").to_pylist())
                    table = table.filter(pa.array([key not in done[k] for key in keys], pa.bool_()))
                pending[k].append(table)
                if sum(t.num_rows for t in pending[k]) >= batch_rows:
                    committer.commit(writers[k], pa.concat_tables(pending[k]))
                    pending[k] = []
            log(f"pass 3: {offset} rows written")
        for k, tables in enumerate(pending):
            if tables:
                committer.commit(writers[k], pa.concat_tables(tables))


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
