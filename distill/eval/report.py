"""Human-readable eval outputs: a Markdown table, a pass@k plot, and ``distill eval compare``."""

from __future__ import annotations

import json
from pathlib import Path

from reasonkit.errors import UserError


def pass_at_k_curve(summary: dict) -> list[tuple[int, float]]:
    """``[(k, pass@k), ...]`` sorted by k, from a summary's ``pass@K`` keys."""
    points = [
        (int(key.split("@")[1]), value)
        for key, value in summary.items()
        if key.startswith("pass@") and key.split("@")[1].isdigit()
    ]
    return sorted(points)


def _row(label: str, s: dict) -> list[str]:
    lo, hi = s.get("pass@1_ci95", [0, 0])
    k = s.get("k") or s.get("protocol", {}).get("k")
    curve = dict(pass_at_k_curve(s))
    top = max(curve) if curve else 1
    return [
        label,
        f"{s['pass@1']:.3f} ± {s['pass@1_std']:.3f}",
        f"[{lo:.3f}, {hi:.3f}]",
        f"{s.get(f'cons@{k}', 0):.3f}",
        f"{curve.get(top, 0):.3f} (k={top})",
        str(s["n_problems"]),
        str(k),
        f"{s['no_answer_rate']:.3f}",
        _rate(s.get("unverifiable_rate")),
        f"{s['truncated_rate']:.3f}",
        _rate(s.get("context_overflow_rate")),
    ]


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"  # a summary written before the figure existed


HEADER = [
    "run",
    "pass@1 ± std",
    "95% CI",
    "cons@k",
    "pass@k",
    "problems",
    "k",
    "no answer",
    "unverifiable",
    "truncated",
    "context overflow",
]
#: What the table's figures are in: every one a share or a count, said once under the table.
UNITS = (
    "pass@1, its CI, cons@k and pass@k: share of problems solved (0 to 1); no answer, unverifiable, "
    "truncated, context overflow: share of samples (0 to 1); problems: count; k: samples per problem."
)


def counts_text(summary: dict) -> str:
    """What the samples came to, and which problems pass@k left out; empty for an older summary."""
    c = summary.get("counts")
    if c is None:
        return ""
    reasons = ", ".join(f"{r} {n}" for r, n in summary.get("unverifiable_reasons", {}).items())
    scored = summary.get("protocol", {}).get("score_truncated", False)
    text = (
        f"\nSamples: {c['correct']} correct, {c['wrong']} wrong, {c['unverifiable']} unverifiable"
        + (f" ({reasons})" if reasons else "")
        + f", {c['no_answer']} without an answer; {c['truncated']} "
        + ("truncated (scored: score_truncated).\n" if scored else "truncated (no answer, R1's protocol).\n")
    )
    over = summary.get("context_overflow") or {}
    if over.get("samples"):
        ids = ", ".join(over.get("ids", [])[:10]) + (" ..." if len(over.get("ids", [])) > 10 else "")
        text += (
            f"Context overflow: {over['samples']} samples of {over['problems']} problems could not fit max_model_len "
            f"(counted apart from no answer; problems: {ids}).\n"
        )
    short = {k: n for k, n in summary.get("pass@k_fewer_samples", {}).items() if n}
    if short:
        text += (
            "pass@k is over the problems with at least k samples; left out: "
            + ", ".join(f"{n} of {summary['n_problems']} for {k}" for k, n in short.items())
            + ".\n"
        )
    return text


def engine_text(p: dict) -> str:
    """Where and how the samples were made (eval/protocol.py); empty for an older summary."""
    if "hardware" not in p:
        return ""
    hw = p["hardware"] or {}
    where = hw.get("where") or (
        f"{hw.get('gpu_count')} x {hw.get('gpu')}"
        if hw.get("gpu_count")
        else f"CPU ({hw.get('cpu') or 'unknown model'})"
    )
    text = (
        f"Engine: {p.get('data_parallel')} replica(s) x tensor parallel {p.get('tensor_parallel')} on {where}; "
        f"max_model_len {p.get('max_model_len')}; batch-invariant {p.get('batch_invariant')} "
        f"({p.get('batch_invariant_how')}).\n"
    )
    clamp = p.get("max_tokens_clamp") or {}
    if clamp.get("clamped_problems"):
        text += (
            f"max_tokens {p.get('max_tokens')} tokens was cut to {clamp['min_budget']}-{clamp['max_budget']} tokens "
            "for "
            f"{clamp['clamped_problems']} of {clamp['problems']} problems to fit max_model_len "
            f"{clamp['max_model_len']} tokens.\n"
        )
    return text


def markdown_table(runs: list[tuple[str, dict]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_row(label, s)) + " |" for label, s in runs]
    return "\n".join(lines) + "\n\n" + UNITS + "\n"


def write_markdown(summary: dict, path: Path, title: str) -> None:
    p = summary.get("protocol", {})
    text = f"# Evaluation: {title}\n\n" + markdown_table([(title, summary)])
    text += (
        f"\nProtocol: model `{p.get('model')}`"
        + (f" + adapter `{p.get('adapter')}` ({p.get('adapter_mode')})" if p.get("adapter") else "")
        + f", backend {p.get('backend')} {p.get('backend_version') or ''}, dtype {p.get('dtype')}, "
        f"temperature {p.get('temperature')}, top-p {p.get('top_p')}, max tokens {p.get('max_tokens')}, "
        f"k={p.get('k')}, seed {p.get('seed')}, dataset fingerprint {p.get('dataset_fingerprint')}.\n"
    )
    text += engine_text(p)
    text += counts_text(summary)
    if "decontamination" in summary:
        d = summary["decontamination"]
        text += (
            f"\nDecontamination ({d['ngram']}-grams): {d['n_overlapping']} eval problems overlap the training data.\n"
        )
    path.write_text(text)


def write_plot(runs: list[tuple[str, dict]], path: Path) -> None:
    """pass@k against k (log2 axis) for one or several runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=120)
    for label, s in runs:
        curve = pass_at_k_curve(s)
        ax.plot([k for k, _ in curve], [v for _, v in curve], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("pass@k")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def load_summary(run_dir: str | Path) -> tuple[str, dict]:
    path = Path(run_dir) / "summary.json"
    if not path.is_file():
        raise UserError(f"{run_dir}: no summary.json (not a finished `distill eval` directory)")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: unreadable ({e})") from None
    return Path(run_dir).name, summary
