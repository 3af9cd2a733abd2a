"""The filter report: the funnel (rows in, dropped per reason in filter order, rows out), per-source
counts, per-benchmark contamination and why rows could not be verified; for a scored input
(``distill score``), ``reward_pick``: how often the reward model's own pick per prompt (its highest
reward, whatever the verifier said) was verified correct; as JSON and as a table.

>>> import pyarrow as pa
>>> t = Tally()
>>> t.add(pa.table({"keep": [True, False, False], "drop_reason": [None, "wrong", "truncated"],
...                 "source": ["a", "a", None], "correct": [True, False, None],
...                 "verify_reason": [None, None, None], "completion_tokens": [10, 20, 30]}))
>>> r = t.report([("format", "truncated"), ("verify", "wrong"), ("verify", "unverifiable")])
>>> r["rows_in"], [(s["reason"], s["dropped"], s["remaining"]) for s in r["funnel"]], r["rows_out"]
(3, [('truncated', 1, 2), ('wrong', 1, 1), ('unverifiable', 0, 1)], 1)
>>> r["per_source"]
{'(none)': {'in': 1, 'out': 0}, 'a': {'in': 2, 'out': 1}}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pyarrow as pa


class Tally:
    """Counts accumulated over the final verdicts, one batch at a time."""

    def __init__(self) -> None:
        self.rows_in = self.rows_out = self.tokens_out = 0
        self.reasons: Counter = Counter()
        self.source_in: Counter = Counter()
        self.source_out: Counter = Counter()
        self.verified: Counter = Counter()
        self.unverifiable: Counter = Counter()
        self.failures: Counter = Counter()  # why verified-wrong programs failed (the code verifier only)

    def add(self, batch: pa.Table) -> None:
        keep = batch.column("keep").to_pylist()
        sources = batch.column("source").to_pylist() if "source" in batch.column_names else [None] * len(keep)
        sources = ["(none)" if s is None else s for s in sources]
        self.rows_in += len(keep)
        self.rows_out += sum(keep)
        self.reasons.update(r for r in batch.column("drop_reason").to_pylist() if r is not None)
        self.source_in.update(sources)
        self.source_out.update(s for s, k in zip(sources, keep) if k)
        tokens = batch.column("completion_tokens").to_pylist()
        self.tokens_out += sum(t for t, k in zip(tokens, keep) if k)
        for ok in batch.column("correct").to_pylist():
            if ok is not None:
                self.verified["correct" if ok else "wrong"] += 1
        if "verify_reason" in batch.column_names:
            # A row with no answer or no gold was never given to the verifier: not "unverifiable". The
            # code verifier also says why a program failed (timeout, wrong_answer, ...): counted apart.
            drops, correct = batch.column("drop_reason").to_pylist(), batch.column("correct").to_pylist()
            reasons = batch.column("verify_reason").to_pylist()
            why = [
                w
                for w, d, ok in zip(reasons, drops, correct)
                if w is not None and ok is None and d not in ("no_answer", "no_gold", "no_code", "no_tests")
            ]
            self.verified["unverifiable"] += len(why)
            self.unverifiable.update(why)
            self.failures.update(w for w, ok in zip(reasons, correct) if w is not None and ok is False)

    def report(self, order: Sequence[tuple[str, str]], **extra) -> dict:
        """The report dict; ``order`` lists ``(filter, reason)`` in the order filters ran."""
        funnel, remaining = [], self.rows_in
        known = {reason for _, reason in order}
        steps = list(order) + [("other", r) for r in sorted(self.reasons) if r not in known]
        for step, reason in steps:
            dropped = self.reasons.get(reason, 0)
            remaining -= dropped
            funnel.append({"filter": step, "reason": reason, "dropped": dropped, "remaining": remaining})
        contaminated = {r.split(":", 1)[1]: n for r, n in self.reasons.items() if r.startswith("contaminated:")}
        return {
            "rows_in": self.rows_in,
            "funnel": funnel,
            "rows_out": self.rows_out,
            "tokens_out": self.tokens_out,
            "per_source": {s: {"in": self.source_in[s], "out": self.source_out[s]} for s in sorted(self.source_in)},
            "contamination": dict(sorted(contaminated.items())),
            "verified": dict(sorted(self.verified.items())),
            "unverifiable": dict(self.unverifiable.most_common()),
            **({"code_failures": dict(self.failures.most_common())} if self.failures else {}),
            **extra,
        }


def render(report: dict):
    """The funnel as a rich Table (the command prints it)."""
    from rich.table import Table

    table = Table(title=f"distill filter: {report['rows_in']} in -> {report['rows_out']} out", title_justify="left")
    for name in ("filter", "reason", "dropped", "remaining", "share"):
        table.add_column(name, justify="left" if name in ("filter", "reason") else "right")
    rows_in = max(report["rows_in"], 1)
    table.add_row("input", "", "", str(report["rows_in"]), "100.0%")
    for step in report["funnel"]:
        table.add_row(
            step["filter"],
            step["reason"],
            str(step["dropped"]),
            str(step["remaining"]),
            f"{100 * step['remaining'] / rows_in:.1f}%",
        )
    table.add_section()
    for source, n in report["per_source"].items():
        share = f"{100 * n['out'] / max(n['in'], 1):.1f}%"
        table.add_row("source", source, str(n["in"] - n["out"]), str(n["out"]), share)
    pick = report.get("reward_pick")
    if pick:  # best-of-N by the reward model alone: how often its pick was right
        share = "" if pick["correct_share"] is None else f"{100 * pick['correct_share']:.1f}%"
        table.add_section()
        table.add_row(
            "reward pick",
            f"verified correct (of {pick['verified_correct'] + pick['wrong']} checked)",
            "",
            str(pick["verified_correct"]),
            share,
        )
    return table
