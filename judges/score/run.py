"""``distill score``: a reward model's score on every row of a traces or verdicts table.

The output (a ``scores`` stage directory) is the input table with ``reward`` (float32; null for a row with
no text) and, for a process reward model, ``step_rewards`` (P(good) at the end of each step). What is
scored, and how, is reward/scorer.py's: the assistant turn the prefs and sft tables carry, under the
reward model's chat template, exactly as TRL's RewardTrainer tokenised its training pairs.

Resumable like every stage (store.StageWriter): the input's rows are taken in fixed shards of
``shard_size`` rows, each shard's rows not yet committed are scored and committed at once, and a rerun
skips every ``(id, sample)`` already written. A ``reward`` column already in the input (GRPO rollouts,
a table scored before) is replaced by this model's. The config, ``ScoreConfig``, is judges/score/config.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from reasonkit.errors import UserError
from reasonkit.judges.score.config import ScoreConfig

#: Columns this stage writes; an input's own are replaced.
SCORE_COLUMNS = ("reward", "step_rewards")


def read_input(cfg: ScoreConfig):
    """The input's rows and manifest, checked: a traces or verdicts table (one UserError line otherwise)."""
    from reasonkit.judges.inputs import open_stage

    table, manifest = open_stage(cfg.input, allow_incomplete=cfg.allow_incomplete)
    names = table.column_names
    need = [c for c in ("id", "sample", "messages") if c not in names]
    if not need and "completion" not in names and "response" not in names:
        need = ["completion"]
    if need:
        raise UserError(
            f"{cfg.input}: missing column {need[0]!r}; `distill score` reads a traces or verdicts table "
            f"(id, sample, messages, completion or reasoning + response); found columns {names}"
        )
    return table.drop_columns([c for c in SCORE_COLUMNS if c in names]), manifest


def run_score(cfg: ScoreConfig, *, log: Callable[[str], None] | None = None, scorer=None) -> dict:
    """Score every row of ``cfg.input`` not yet in ``cfg.out``; returns the report (also ``OUT/report.json``)."""
    from reasonkit.judges import stage
    from reasonkit.reward.scorer import Scorer, inspect_model
    from reasonkit.ticker import plain_ticker

    spec = inspect_model(cfg.model)  # a bad model path fails before anything is read or written
    table, _ = read_input(cfg)
    writer = _writer(cfg)
    done = writer.done_keys()
    keys = list(zip(table.column("id").to_pylist(), table.column("sample").to_pylist()))
    todo = [
        rows
        for rows in stage.chunks(list(range(table.num_rows)), cfg.shard_size)
        if any(keys[i] not in done for i in rows)
    ]
    scored = 0
    if todo:
        scorer = scorer or Scorer(spec, dtype=cfg.dtype, device=cfg.device, max_length=cfg.max_length)
    started = time.perf_counter()  # rows per second of scoring, the model's loading apart
    # plain lines where stderr is no terminal (reasonkit/ticker.py); each shard's line below stays for a terminal
    ticker = plain_ticker("score", table.num_rows, "rows", done=writer.manifest["rows"]) if todo else None
    try:
        for rows in todo:
            rows = [i for i in rows if keys[i] not in done]
            writer.commit(_scored(table, rows, scorer, spec.kind, cfg))
            scored += len(rows)
            if ticker is None:
                committed = f"{writer.manifest['rows']}/{table.num_rows} committed"
                (log or stage.say)(f"score: {scored} rows scored ({committed})")
            else:
                ticker.update(writer.manifest["rows"], figures=f"{scored:,} scored this run")
    finally:
        if ticker is not None:
            ticker.close()
    seconds = time.perf_counter() - started
    report = {
        "stage": "score",
        "model": cfg.model,
        "kind": spec.kind,
        "rows_in": table.num_rows,
        "rows": writer.manifest["rows"],
        "scored_this_run": scored,
        "rows_per_second": round(scored / seconds, 2) if scored and seconds > 0 else None,
        **_summary(writer),
    }
    stage.write_report(cfg.out, report)
    writer.finish(report=report)
    return report


def _writer(cfg: ScoreConfig):
    """OUT's writer: rows keyed by (id, sample), resumable while the config and the input are the same."""
    from reasonkit.store import StageWriter, fingerprint_path

    return StageWriter(
        cfg.out,
        stage="score",
        kind="scores",
        config=cfg.fingerprinted(),
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(cfg.input),
        input_path=cfg.input,
        overwrite=cfg.overwrite,
    )


def _scored(table, rows: list[int], scorer, kind: str, cfg: ScoreConfig):
    """The input's ``rows`` with their reward (and a process reward model's step_rewards) appended."""
    import pyarrow as pa

    from reasonkit.reward.scorer import turn_of

    part = table.take(pa.array(rows, pa.int64()))
    records = part.select([c for c in ("messages", "completion", "reasoning", "response") if c in part.column_names])
    records = records.to_pylist()
    results = scorer.score(
        [r["messages"] for r in records], [turn_of(r, cfg.include_reasoning) for r in records], cfg.batch_size
    )
    part = part.append_column("reward", pa.array([r for r, _ in results], pa.float32()))
    if kind == "prm":
        part = part.append_column("step_rewards", pa.array([s for _, s in results], pa.list_(pa.float32())))
    return part


def _summary(writer) -> dict:
    """Reward statistics over every committed row (earlier runs included)."""
    import pyarrow.compute as pc

    from reasonkit.store import read_shard

    values = []
    for s in writer.manifest["shards"]:
        values += [
            v
            for v in read_shard(writer.dir / s["file"], columns=["reward"]).column("reward").to_pylist()
            if v is not None
        ]
    if not values:
        return {"reward": None, "unscored": writer.manifest["rows"]}
    import pyarrow as pa

    arr = pa.array(values, pa.float64())
    return {
        "reward": {"mean": round(pc.mean(arr).as_py(), 6), "min": min(values), "max": max(values)},
        "unscored": writer.manifest["rows"] - len(values),
    }
