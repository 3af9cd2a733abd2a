"""From traces to verified samples to the summary's numbers.

What each sample counts as, disjointly (``counts`` in summary.json; they add up to ``n_samples``): ``correct``,
``wrong`` (verified False), ``unverifiable`` (an answer the verifier could not decide: a timeout, an unparseable side;
``correct`` is None), ``context_overflow`` (the sample could not fit the model's context: its prompt, or a later turn
of a tool-use trajectory, left no room; finish reason ``context``) and ``no_answer`` (nothing extracted, or truncated).
``truncated`` counts the samples ``finish_reason == "length"`` apart, overlapping: by R1's protocol a truncated sample
has no answer (its last box sits in unfinished reasoning), unless the evaluation asked ``score_truncated``. pass@1 and
pass@k count everything but ``correct`` as not correct. cons@k votes over the groups of distill/eval/vote.py; a
problem's vote is correct when the winning group's answer (its first member) is.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa

from reasonkit.distill.eval.metrics import ks_for, majority, pass1_stats, pass_at_k

TRUNCATED = "truncated"  # the verify_reason of a truncated sample left unscored


def extract_preds(
    traces: pa.Table, *, score_truncated: bool, trajectories: bool = False
) -> tuple[list[str | None], list[str | None]]:
    """``(preds, reasons)``: the extracted answer of every response; none for a truncated sample
    unless ``score_truncated``. A tool-use trajectory's answer is read as ``distill filter`` reads it
    (filters/trajectory.py's final_answer: a box, else a one-line reply taken whole)."""
    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.filters.trajectory import final_answer

    read = final_answer if trajectories else extract_answer
    preds, reasons = [], []
    for response, finish in zip(traces.column("response").to_pylist(), traces.column("finish_reason").to_pylist()):
        pred, reason = (None, TRUNCATED) if finish == "length" and not score_truncated else read(response)
        preds.append(pred)
        reasons.append(reason)
    return preds, reasons


# long: extraction, verification and grouping in one pass over the samples (a pool's results in order)
def verify_samples(
    traces: pa.Table, config, out_dir: Path, *, score_truncated: bool | None = None, max_model_len: int | None = None
) -> pa.Table:
    """Extract and verify every sample against its problem's gold answer, group each problem's
    answers for the vote (distill/eval/vote.py) with the same verifier; write the samples stage.
    ``max_model_len``: the context the samples were made in (a refused prompt is context overflow).

    ``score_truncated`` (default: the config's, else False) extracts an answer from truncated samples too.
    """
    from reasonkit.store import StageWriter, fingerprint_path
    from reasonkit.ticker import plain_ticker

    if score_truncated is None:
        score_truncated = bool(getattr(config, "score_truncated", False))
    ids, numbers = traces.column("id").to_pylist(), traces.column("sample").to_pylist()
    by_problem: dict[str, list[int]] = defaultdict(list)  # row positions, in sample order
    for i in sorted(range(len(ids)), key=lambda i: (ids[i], numbers[i])):
        by_problem[ids[i]].append(i)
    rows_of = list(by_problem.values())
    # one plain line as verification starts and one as it ends, where stderr is not a terminal (reasonkit/ticker.py):
    # the verifier checks every sample in one call, and the code verifier's programs can run for minutes
    ticker = plain_ticker("verify", len(ids), "samples")
    if config.verifier == "code":  # programs run against the tests; the vote is on their outputs
        from reasonkit.distill.eval.code import verify_programs

        preds, checked, reasons, grouped = verify_programs(traces, config, rows_of, score_truncated=score_truncated)
    else:
        preds, checked, reasons, grouped = _verify_answers(traces, config, rows_of, score_truncated=score_truncated)
    if ticker is not None:
        ticker.done = len(ids)
        ticker.close(figures=f"{sum(c is True for c, _ in checked):,} correct")
    vote_group: list[int | None] = [None] * len(ids)
    for rows, groups in zip(rows_of, grouped):
        for i, g in zip(rows, groups):
            vote_group[i] = None if g is None else numbers[rows[g]]  # named by its first member's sample
    table = pa.table(
        {
            "id": traces.column("id"),
            "sample": traces.column("sample"),
            "pred": pa.array(preds, pa.string()),
            "correct": pa.array([c for c, _ in checked], pa.bool_()),
            "completion_tokens": traces.column("completion_tokens"),
            "finish_reason": pa.array(_finish_reasons(traces, max_model_len), pa.string()),
            "verify_reason": pa.array(
                [r if p is not None else e for (_, r), p, e in zip(checked, preds, reasons)], pa.string()
            ),
            "vote_group": pa.array(vote_group, pa.int32()),
        }
    )
    table = table.sort_by([("id", "ascending"), ("sample", "ascending")])
    writer = StageWriter(
        out_dir,
        stage="eval",
        kind="eval_samples",
        config={"verifier": config.verifier, "score_truncated": score_truncated},
        keys=("id", "sample"),
        input_fingerprint=fingerprint_path(out_dir.parent / "generations"),
        input_path=str(out_dir.parent / "generations"),
        overwrite=True,
    )
    writer.commit(table)
    writer.finish()
    return table


def _verify_answers(traces: pa.Table, config, rows_of: list[list[int]], *, score_truncated: bool):
    """The answer verifiers' (math, int, exact) ``(preds, [(correct, reason)], reasons, vote groups per
    problem)``, the shapes of distill/eval/code.py's verify_programs."""
    from reasonkit.distill.eval.vote import verifier_same, vote_groups
    from reasonkit.filters.math.verify import Verifier

    tools = bool(getattr(config, "tools", None))
    preds, reasons = extract_preds(traces, score_truncated=score_truncated, trajectories=tools)
    golds = traces.column("answer").to_pylist()
    verifier = Verifier(config.verifier, timeout=config.verify_timeout)
    if tools:  # golds that are words (names, titles) match as text, as the filter matches them
        from reasonkit.filters.trajectory import TextAwareVerifier

        verifier = TextAwareVerifier(verifier)
    try:
        checked = verifier.check(list(zip(preds, golds)))
        grouped = vote_groups([[preds[i] for i in rows] for rows in rows_of], verifier_same(verifier))
    finally:
        verifier.close()
    return preds, checked, reasons, grouped


CONTEXT = "context"  # the finish reason of a sample that could not fit the context (gen/tools/loop.py)


def overflowed(finish_reasons: list[str], prompt_tokens: list[int], max_model_len: int | None) -> list[str]:
    """``finish_reasons`` with a prompt the backend refused for its length (``error``, the prompt
    alone as long as the context) named ``context``, as a tool-use turn that cannot fit is named.

    >>> overflowed(["stop", "error", "error"], [10, 1030, 12], 1024)
    ['stop', 'context', 'error']
    """
    if not max_model_len:
        return list(finish_reasons)
    return [CONTEXT if f == "error" and n >= max_model_len else f for f, n in zip(finish_reasons, prompt_tokens)]


def _finish_reasons(traces: pa.Table, max_model_len: int | None) -> list[str]:
    finish = traces.column("finish_reason").to_pylist()
    if not max_model_len or "prompt_tokens" not in traces.column_names:
        return finish
    return overflowed(finish, traces.column("prompt_tokens").to_pylist(), max_model_len)


def outcome(row: dict) -> str:
    """The one count a sample falls in: correct, wrong, unverifiable, context_overflow or no_answer."""
    if row["finish_reason"] == CONTEXT:
        return "context_overflow"
    if row["pred"] is None:
        return "no_answer"
    if row["correct"] is None:
        return "unverifiable"
    return "correct" if row["correct"] else "wrong"


# long: the summary's metrics, one figure a few lines, in the order the summary lists them
def score(samples: pa.Table, traces: pa.Table, *, k: int, seed: int = 0) -> tuple[dict, list[dict]]:
    """The summary metrics and per-problem rows, in a deterministic order (sorted by id).

    ``samples`` is :func:`verify_samples`' table: cons@k votes over its ``vote_group`` column.
    """
    by_id: dict[str, list[dict]] = defaultdict(list)
    for row in samples.to_pylist():
        by_id[row["id"]].append(row)
    problems, correct_matrix = [], []
    cons_hits = 0
    outcomes: Counter = Counter()
    unverifiable: Counter = Counter()
    for pid in sorted(by_id):
        rows = sorted(by_id[pid], key=lambda r: r["sample"])
        correct_matrix.append([r["correct"] for r in rows])
        kinds = [outcome(r) for r in rows]
        outcomes.update(kinds)
        unverifiable.update(r["verify_reason"] or "unknown" for r, kind in zip(rows, kinds) if kind == "unverifiable")
        vote = majority([r["vote_group"] for r in rows])
        leader = next((r for r in rows if r["sample"] == vote), None) if vote is not None else None
        vote_correct = bool(leader is not None and leader["correct"])
        cons_hits += vote_correct
        problems.append(
            {
                "id": pid,
                "n": len(rows),
                "correct": kinds.count("correct"),
                "majority_answer": leader["pred"] if leader is not None else None,
                "majority_votes": sum(r["vote_group"] == vote for r in rows) if vote is not None else 0,
                "majority_correct": vote_correct,
                "mean_tokens": sum(r["completion_tokens"] for r in rows) / len(rows),
                "no_answer": kinds.count("no_answer"),
                "unverifiable": kinds.count("unverifiable"),
                "truncated": sum(r["finish_reason"] == "length" for r in rows),
                "context_overflow": kinds.count("context_overflow"),
            }
        )
    n_problems, n_samples = len(problems), samples.num_rows
    summary: dict = {"n_problems": n_problems, "n_samples": n_samples, "k": k}
    summary.update(pass1_stats(correct_matrix, seed=seed))
    summary[f"cons@{k}"] = cons_hits / n_problems if n_problems else 0.0
    summary["pass@k_fewer_samples"] = {}
    for kk in ks_for(k)[1:]:  # pass@1 itself comes from pass1_stats (same value)
        values = [pass_at_k(p["n"], p["correct"], kk) for p in problems if p["n"] >= kk]
        summary[f"pass@{kk}"] = sum(values) / len(values) if values else 0.0
        summary["pass@k_fewer_samples"][f"pass@{kk}"] = n_problems - len(values)  # left out of pass@kk
    truncated = sum(p["truncated"] for p in problems)
    summary["counts"] = {
        kind: outcomes[kind] for kind in ("correct", "wrong", "unverifiable", "context_overflow", "no_answer")
    }
    summary["counts"]["truncated"] = truncated
    over = [p["id"] for p in problems if p["context_overflow"]]
    summary["context_overflow"] = {"problems": len(over), "samples": outcomes["context_overflow"], "ids": over}
    summary["unverifiable_reasons"] = dict(sorted(unverifiable.items()))
    rate = lambda n: n / n_samples if n_samples else 0.0  # noqa: E731
    summary["no_answer_rate"] = rate(outcomes["no_answer"])
    summary["unverifiable_rate"] = rate(outcomes["unverifiable"])
    summary["truncated_rate"] = rate(truncated)
    summary["context_overflow_rate"] = rate(outcomes["context_overflow"])
    summary["mean_completion_tokens"] = rate(sum(samples.column("completion_tokens").to_pylist()))
    return summary, problems
