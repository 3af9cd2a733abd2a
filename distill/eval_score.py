"""From traces to verified samples to the summary's numbers."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa

from reasonkit.distill.metrics import ks_for, majority, pass1_stats, pass_at_k


def answer_key(pred: str) -> str:
    """The form answers are voted in: integers by value (``042`` = ``42.0`` = ``42``), others by
    their text without spaces and dollar signs.

    >>> answer_key("042"), answer_key(" \\\\frac{1}{2} ")
    ('42', '\\\\frac{1}{2}')
    """
    from reasonkit.filters.verify import parse_int

    value = parse_int(pred)
    return str(value) if value is not None else "".join(pred.split()).strip("$")


def verify_samples(traces: pa.Table, config, out_dir: Path) -> pa.Table:
    """Extract and verify every sample against its problem's gold answer; write the samples stage."""
    from reasonkit.filters.extract import extract_answer
    from reasonkit.filters.verify import Verifier
    from reasonkit.store import StageWriter, fingerprint_path

    preds, reasons = [], []
    for response in traces.column("response").to_pylist():
        pred, reason = extract_answer(response)
        preds.append(pred)
        reasons.append(reason)
    golds = traces.column("answer").to_pylist()
    verifier = Verifier(config.verifier, timeout=config.verify_timeout)
    try:
        checked = verifier.check(list(zip(preds, golds)))
    finally:
        verifier.close()
    table = pa.table({
        "id": traces.column("id"),
        "sample": traces.column("sample"),
        "pred": pa.array(preds, pa.string()),
        "correct": pa.array([c for c, _ in checked], pa.bool_()),
        "completion_tokens": traces.column("completion_tokens"),
        "finish_reason": traces.column("finish_reason"),
        "verify_reason": pa.array([r if p is not None else e for (_, r), p, e in zip(checked, preds, reasons)], pa.string()),
    })
    table = table.sort_by([("id", "ascending"), ("sample", "ascending")])
    writer = StageWriter(out_dir, stage="eval", kind="eval_samples", config={"verifier": config.verifier},
                         keys=("id", "sample"), input_fingerprint=fingerprint_path(out_dir.parent / "generations"),
                         input_path=str(out_dir.parent / "generations"), overwrite=True)
    writer.commit(table)
    writer.finish()
    return table


def score(samples: pa.Table, traces: pa.Table, *, k: int, seed: int = 0) -> tuple[dict, list[dict]]:
    """The summary metrics and per-problem rows, in a deterministic order (sorted by id)."""
    by_id: dict[str, list[dict]] = defaultdict(list)
    for row in samples.to_pylist():
        by_id[row["id"]].append(row)
    problems, correct_matrix = [], []
    cons_hits = 0
    for pid in sorted(by_id):
        rows = sorted(by_id[pid], key=lambda r: r["sample"])
        correct_matrix.append([r["correct"] for r in rows])
        keys = [answer_key(r["pred"]) if r["pred"] is not None else None for r in rows]
        vote = majority(keys)
        vote_correct = bool(vote is not None and any(r["correct"] for r, key in zip(rows, keys) if key == vote))
        cons_hits += vote_correct
        problems.append({
            "id": pid,
            "n": len(rows),
            "correct": sum(bool(r["correct"]) for r in rows),
            "majority_answer": vote,
            "majority_correct": vote_correct,
            "mean_tokens": sum(r["completion_tokens"] for r in rows) / len(rows),
            "no_answer": sum(r["pred"] is None for r in rows),
            "truncated": sum(r["finish_reason"] == "length" for r in rows),
        })
    n_problems, n_samples = len(problems), samples.num_rows
    summary: dict = {"n_problems": n_problems, "n_samples": n_samples, "k": k}
    summary.update(pass1_stats(correct_matrix, seed=seed))
    summary[f"cons@{k}"] = cons_hits / n_problems if n_problems else 0.0
    for kk in ks_for(k)[1:]:  # pass@1 itself comes from pass1_stats (same value)
        values = [pass_at_k(p["n"], p["correct"], kk) for p in problems if p["n"] >= kk]
        summary[f"pass@{kk}"] = sum(values) / len(values) if values else 0.0
    summary["no_answer_rate"] = sum(p["no_answer"] for p in problems) / n_samples if n_samples else 0.0
    summary["truncated_rate"] = sum(p["truncated"] for p in problems) / n_samples if n_samples else 0.0
    summary["mean_completion_tokens"] = (sum(samples.column("completion_tokens").to_pylist()) / n_samples) if n_samples else 0.0
    return summary, problems
