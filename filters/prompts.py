"""``distill filter PROMPTS --difficulty EVAL_DIR --pass-rate LO..HI``: the difficulty band on a prompts table.

The filter stage reads traces; a prompts table (what ``distill generate`` and GRPO's ``--data`` read: a
Parquet/JSONL/CSV file, a Hub dataset, a stage directory of prompts) has no completion to verify, so only
the difficulty filter applies to it (filters/difficulty.py). The prompts are read as generate and GRPO read
them (readers.read_prompts: the same ids the eval scored), and written back as a prompts table: OUT (kept,
with ``pass_rate``), OUT/rejected (with ``keep`` and ``drop_reason``) and OUT/report.json (the funnel), so
``distill train --method grpo --data OUT`` trains on the band. No sft/: there is no assistant turn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.filters.base import apply
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.difficulty import DifficultyFilter, check_overlap, parse_band, read_pass_rates
from reasonkit.filters.report import Tally

#: The verdict columns a kept prompt does not carry (nothing was generated, so nothing was verified).
_UNUSED = ("pred", "correct", "lang_ratio")


def is_traces_dir(path: str) -> bool:
    """Whether ``path`` is a stage directory of what the filter stage reads (traces, scores, trajectories)."""
    from reasonkit.store import is_stage_dir, load_manifest

    return is_stage_dir(path) and load_manifest(path).get("kind") in ("traces", "scores", "trajectories")


def filter_prompts(config: FilterConfig, *, log: Callable[[str], None] | None = None) -> dict:
    """Run the band over a prompts table; returns the report (also in ``OUT/report.json``)."""
    import json

    from reasonkit.readers import read_prompts
    from reasonkit.store import StageWriter, fingerprint, fingerprint_path

    prompts = read_prompts(config.traces)
    rates = read_pass_rates(config.difficulty)
    check_overlap(rates, set(prompts.column("id").to_pylist()), config.difficulty, config.traces)
    judged = apply([DifficultyFilter(rates, parse_band(config.pass_rate))], prompts).drop_columns(list(_UNUSED))
    keep = judged.column("keep")
    inputs = [config.traces, str(Path(config.difficulty) / "problems.parquet")]

    def writer(path, **kw) -> StageWriter:
        return StageWriter(
            path,
            stage="filter",
            kind="prompts",
            config=config.fingerprinted(),
            keys=("id",),
            input_fingerprint=fingerprint([fingerprint_path(p) for p in inputs]),
            input_path=inputs,
            **kw,
        )

    kept_w = writer(config.out, overwrite=config.overwrite)
    rejected_w = writer(Path(config.out) / "rejected", overwrite=config.overwrite)
    for w, rows in (
        (kept_w, judged.filter(keep).drop_columns(["keep", "drop_reason"])),
        (rejected_w, judged.filter(pc.invert(keep))),
    ):
        done = w.done_keys()
        rows = rows.filter(pa.array([(i,) not in done for i in rows.column("id").to_pylist()], pa.bool_()))
        if rows.num_rows:
            w.commit(rows)
    report = _report(judged, config)
    path = Path(config.out) / "report.json"
    path.write_text(json.dumps(report, indent=2, default=str))
    rejected_w.finish()
    kept_w.finish(rows_in=report["rows_in"], rows_out=report["rows_out"])
    (log or (lambda line: None))(f"{report['rows_out']} of {report['rows_in']} prompts in the band {config.pass_rate}")
    return report


def _report(judged: pa.Table, config: FilterConfig) -> dict:
    """The filter's report over prompts: its funnel (the tally reads a trace's columns: none here)."""
    tally = Tally()
    tally.add(
        judged.append_column("completion_tokens", pa.array([0] * judged.num_rows, pa.int32())).append_column(
            "correct", pa.nulls(judged.num_rows, pa.bool_())
        )
    )
    order = [("difficulty", reason) for reason in DifficultyFilter.reasons]
    return tally.report(order, sft_rows=0, input=str(config.traces), table="prompts", config=config.fingerprinted())
