"""The paired comparison of two evaluations on the same problems: ``distill eval compare A B``.

Two runs scored on the same problems are compared problem by problem: the difference in pass@1
(B - A) with a paired bootstrap 95% interval over problems (distill/eval/metrics.py), how many problems
B wins, loses and ties, and an exact sign test on those wins. A paired difference only means
something when both runs answered the same problems under the same protocol, so anything else is
refused with one line naming what differs.

Library use (the recipe report calls it for its "GRPO vs SFT" line)::

    from reasonkit.distill.eval.compare import paired_difference, paired_text
    result = paired_difference("runs/eval-sft", "runs/eval-grpo")
    print(paired_text(result))
    # eval-grpo - eval-sft: +0.042 pass@1 (95% CI +0.013 .. +0.071, paired bootstrap over 60 problems,
    # 10,000 rounds): eval-grpo better

>>> verdict(0.01, 0.03), verdict(-0.02, 0.01), verdict(-0.05, -0.01)
('B better', 'no difference shown', 'A better')
"""

from __future__ import annotations

from pathlib import Path

from reasonkit.distill.eval.report import load_summary, markdown_table, write_plot
from reasonkit.errors import UserError

#: Protocol fields (summary.json's ``protocol``, distill/eval/protocol.py) that decide what a
#: problem's pass@1 measures; two runs must agree on all of them to be paired. The model, adapter,
#: seed and engine are what is being compared, or do not change what a sample is scored on. The
#: dataset is its content fingerprint (and Hub revision), so a copy of the same file pairs.
PAIRED_PROTOCOL = (
    "dataset_fingerprint",
    "dataset_revision",
    "k",
    "temperature",
    "top_p",
    "max_tokens",
    "verifier",
    "score_truncated",
    "instruction",
    "system",
    "prefill_think",
    "tools",
)


def verdict(lo: float, hi: float) -> str:
    """What a 95% interval of B - A shows: ``B better``, ``A better`` or ``no difference shown``."""
    if lo > 0:
        return "B better"
    if hi < 0:
        return "A better"
    return "no difference shown"


def load_run(run_dir: str | Path) -> tuple[str, dict, dict[str, float]]:
    """``(label, summary, {problem id: pass@1})`` of a finished eval directory.

    A problem's pass@1 is the share of its samples verified correct (problems.parquet's ``correct``
    over ``n``, what eval's pass@1 averages; unverifiable and unanswered samples count as not correct).
    """
    from reasonkit.filters.difficulty import read_pass_rates

    label, summary = load_summary(run_dir)
    scores = read_pass_rates(run_dir)
    return label, summary, scores


def check_pairable(a: tuple[str, dict, dict], b: tuple[str, dict, dict]) -> None:
    """Refuse, in one line, two runs that were not scored on the same problems the same way."""
    (la, sa, pa), (lb, sb, pb) = a, b
    proto_a, proto_b = sa.get("protocol") or {}, sb.get("protocol") or {}
    differ = [
        f"{key} {_shown(proto_a, key)} vs {_shown(proto_b, key)}"
        for key in PAIRED_PROTOCOL
        if proto_a.get(key, _MISSING) != proto_b.get(key, _MISSING)
    ]
    if differ:
        raise UserError(
            f"compare {la} and {lb}: scored with different protocols ({'; '.join(differ)}); a paired "
            "difference needs the same problems scored the same way (--no-paired for the table alone)"
        )
    only_a, only_b = sorted(set(pa) - set(pb)), sorted(set(pb) - set(pa))
    if only_a or only_b:
        raise UserError(
            f"compare {la} and {lb}: not the same problems ({_ids(only_a)} only in {la}, "
            f"{_ids(only_b)} only in {lb}); a paired difference needs the same problem ids "
            "(--no-paired for the table alone)"
        )


_MISSING = object()


def _shown(protocol: dict, key: str) -> str:
    return "unrecorded" if key not in protocol else repr(protocol[key])


def _ids(ids: list[str]) -> str:
    if not ids:
        return "none"
    return f"{len(ids)}: " + ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")


def paired_difference(run_a, run_b, *, rounds: int = 10_000, seed: int = 0) -> dict:
    """B - A in pass@1 over the problems both runs scored, with a paired bootstrap 95% interval.

    ``run_a``, ``run_b``: eval directories (or :func:`load_run` results). Returns ``diff``, ``lo``,
    ``hi``, ``n_problems``, ``rounds``, ``seed``, ``wins``/``losses``/``ties`` (problems where B's
    pass@1 is above, below, equal to A's), ``sign_test_p`` (exact, two-sided, ties left out),
    ``verdict`` (``B better`` when the interval is above 0, ``A better`` below, else ``no difference
    shown``) and the runs' ``label_a``, ``label_b``, ``pass1_a``, ``pass1_b``. Raises UserError when
    the runs hold other problem ids or other protocols.
    """
    from reasonkit.distill.eval.metrics import paired_bootstrap, sign_test

    a = run_a if isinstance(run_a, tuple) else load_run(run_a)
    b = run_b if isinstance(run_b, tuple) else load_run(run_b)
    check_pairable(a, b)
    ids = sorted(a[2])
    sa, sb = [a[2][i] for i in ids], [b[2][i] for i in ids]
    diff, lo, hi = paired_bootstrap(sa, sb, rounds=rounds, seed=seed)
    wins = sum(y > x for x, y in zip(sa, sb))
    losses = sum(y < x for x, y in zip(sa, sb))
    return {
        "label_a": a[0],
        "label_b": b[0],
        "pass1_a": sum(sa) / len(ids) if ids else 0.0,
        "pass1_b": sum(sb) / len(ids) if ids else 0.0,
        "diff": diff,
        "lo": lo,
        "hi": hi,
        "n_problems": len(ids),
        "rounds": rounds,
        "seed": seed,
        "wins": wins,
        "losses": losses,
        "ties": len(ids) - wins - losses,
        "sign_test_p": sign_test(wins, losses),
        "verdict": verdict(lo, hi),
    }


def paired_text(r: dict) -> str:
    """Two lines for a report: the difference with its interval and verdict, then wins and the sign test."""
    names = {"B better": f"{r['label_b']} better", "A better": f"{r['label_a']} better"}
    return (
        f"{r['label_b']} - {r['label_a']}: {r['diff']:+.3f} pass@1 (95% CI {r['lo']:+.3f} .. {r['hi']:+.3f}, "
        f"paired bootstrap over {r['n_problems']} problems, {r['rounds']:,} rounds): "
        f"{names.get(r['verdict'], r['verdict'])}\n"
        f"{r['label_b']} wins on {r['wins']}, loses on {r['losses']}, ties on {r['ties']} problems; "
        f"sign test p = {r['sign_test_p']:.3g} (exact, two-sided, ties left out)\n"
    )


def compare(run_dirs: list[str], out: str | Path, *, paired: bool = True, rounds: int = 10_000, seed: int = 0) -> Path:
    """Several eval runs side by side: a Markdown table at ``out`` and a plot beside it.

    With ``paired`` (and two runs or more), each later run is compared with the first, problem by
    problem (distill/eval/compare.py); runs on other problems or protocols are refused before
    anything is written.
    """
    if not run_dirs:
        raise UserError("compare: give at least one eval directory")
    runs = [load_summary(d) for d in run_dirs]
    pairs = ""
    if paired and len(run_dirs) > 1:
        loaded = [load_run(d) for d in run_dirs]
        results = [paired_difference(loaded[0], later, rounds=rounds, seed=seed) for later in loaded[1:]]
        lines = [f"- {line}" for r in results for line in paired_text(r).splitlines()]
        pairs = "\n## Paired difference: each run minus the first, problem by problem\n\n" + "\n".join(lines) + "\n"
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot = out.with_suffix(".png")
    write_plot(runs, plot)
    ks = {s.get("k") for _, s in runs}
    note = (
        "" if len(ks) == 1 else f"\nNote: runs used different k ({sorted(ks)}); pass@k columns are not comparable.\n"
    )
    models = "".join(
        f"- `{label}`: {s.get('protocol', {}).get('model')}"
        + (f" + {s['protocol']['adapter']}" if s.get("protocol", {}).get("adapter") else "")
        + "\n"
        for label, s in runs
    )
    out.write_text(
        f"# Evaluation comparison\n\n{markdown_table(runs)}{note}\n{models}{pairs}\n![pass@k]({plot.name})\n"
    )
    return out
