"""What an on-policy distillation run reports: the divergence, the tokens the student sampled and the teacher
scored, and where the time went, per step and in total.

Added to report.json as ``distill`` (the per-step values stay in ``history``) and written out as report.md.
Per step (TRL's logs and distill/onpolicy/trainer.py's):

- ``loss``: the divergence itself (TRL's generalized JSD of ``beta``, per completion token), and the
  student's ``entropy``;
- ``student_tokens``: completion tokens the student sampled; ``teacher_tokens``: completion tokens the
  teacher scored; ``teacher_input_tokens``: the tokens its forward read (prompts included): the cost;
- ``teacher_logprob_per_token``: the teacher's mean log-prob of the student's tokens (rising: the student
  writes more as the teacher would);
- ``step_s`` and inside it ``generate_s`` (sampling) and ``teacher_s`` (the teacher's forward or the server's
  answer, and the log-prob sums); the rest of a step is the student's forward and backward.

>>> records = [{"step": 1, "loss": 0.5, "student_tokens": 40.0, "teacher_tokens": 40.0, "teacher_input_tokens": 90.0,
...             "step_s": 2.0, "generate_s": 1.0, "teacher_s": 0.25}, {"step": 2, "loss": 0.25, "student_tokens": 30.0,
...             "teacher_tokens": 30.0, "teacher_input_tokens": 70.0, "step_s": 2.0, "generate_s": 1.0, "teacher_s": 0.25}]
>>> s = onpolicy_section(records)
>>> s["divergence_first"], s["tokens"]["student_sampled"], s["tokens"]["teacher_input"], s["time_s"]["student"]
(0.5, 70, 160, 1.5)
"""  # noqa: E501

from __future__ import annotations

import math
from pathlib import Path

from reasonkit.distill.records import evenly_spaced, final_window

#: Rows report.md's step table shows at most (evenly spaced); report.json keeps every step.
TABLE_ROWS = 40


def onpolicy_section(records: list[dict]) -> dict:
    """report.json's ``distill`` section from the per-step records."""

    def total(key):
        return sum(r.get(key, 0.0) for r in records if not math.isnan(r.get(key, 0.0)))

    times = {k: round(total(f"{k}_s"), 3) for k in ("step", "generate", "teacher")}
    times["student"] = round(times["step"] - times["generate"] - times["teacher"], 3)  # forward + backward + optimizer
    return {
        "divergence_first": records[0].get("loss") if records else None,
        "divergence_final": final_window(records, "loss"),
        "entropy_final": final_window(records, "entropy"),
        "teacher_logprob_per_token_first": records[0].get("teacher_logprob_per_token") if records else None,
        "teacher_logprob_per_token_final": final_window(records, "teacher_logprob_per_token"),
        "tokens": {
            "student_sampled": int(total("student_tokens")),
            "teacher_scored": int(total("teacher_tokens")),
            "teacher_input": int(total("teacher_input_tokens")),
        },
        "truncated_share": final_window(records, "truncated_share"),
        "time_s": times,
        "time_share": {k: round(v / times["step"], 4) for k, v in times.items() if k != "step"}
        if times["step"]
        else {},
    }


def add_onpolicy(report: dict, records: list[dict], cfg, rollouts, out: Path) -> None:
    """Complete OUT/rollouts, add the ``distill`` section to ``report``, write report.md."""
    section = onpolicy_section(records)
    manifest = rollouts.finish(summary={"steps": report["steps"]})
    section["rollouts"] = {"dir": str(rollouts.dir), "rows": manifest["rows"]}
    section.update(
        teacher=cfg.teacher or _served(cfg.teacher_url),
        teacher_url=cfg.teacher_url,
        beta=cfg.kl_beta,
        temperature=cfg.temperature,
        max_completion_length=cfg.max_completion_length,
        loss_top_k=cfg.loss_top_k if cfg.teacher_url else None,
    )
    report["distill"] = section
    report["report_md"] = str(write_markdown(out, report, records))


def _served(url: str) -> str:
    from reasonkit.distill.onpolicy.served import served_model

    return served_model(url)


def summary_lines(section: dict) -> list[str]:
    """The lines printed at the end of a run (and in report.md)."""

    def fmt(v):
        return "n/a" if v is None else f"{v:.4f}"

    tokens, t = section["tokens"], section["time_s"]
    lines = [
        f"divergence (first step -> last steps): {fmt(section['divergence_first'])} -> "
        f"{fmt(section['divergence_final'])}",
        f"tokens: {tokens['student_sampled']:,} sampled by the student, {tokens['teacher_scored']:,} scored by the "
        f"teacher ({tokens['teacher_input']:,} read by its forward, prompts included)",
    ]
    if t["step"]:
        lines.append(
            f"time: generation {t['generate'] / t['step']:.0%}, teacher {t['teacher'] / t['step']:.0%}, "
            f"student forward/backward {t['student'] / t['step']:.0%} of {t['step']:.1f} s"
        )
    lines.append(f"rollouts: {section['rollouts']['rows']} rows in {section['rollouts']['dir']}")
    return lines


def write_markdown(out: Path, report: dict, records: list[dict]) -> Path:
    """report.md: the run in a page (settings, the summary, a step table, the loss curve)."""
    d = report["distill"]
    lines = [
        f"# On-policy distillation: {report['student']} from {d['teacher']} on {report['data']}",
        "",
        f"{report['steps']} steps, beta {d['beta']} (0 forward KL, 1 reverse KL), temperature {d['temperature']}, "
        f"max_completion_length {d['max_completion_length']}"
        + (f", top-{d['loss_top_k']} log-probs from {d['teacher_url']}" if d["teacher_url"] else "")
        + f"; {d['rollouts']['rows']} rollouts in `{d['rollouts']['dir']}`.",
        "",
        *[f"- {line}" for line in summary_lines(d)],
        "",
    ]
    keys = [
        "loss",
        "entropy",
        "student_tokens",
        "teacher_tokens",
        "teacher_input_tokens",
        "teacher_logprob_per_token",
        "step_s",
        "generate_s",
        "teacher_s",
    ]
    keys = [k for k in keys if any(k in r for r in records)]
    shown = evenly_spaced(records, TABLE_ROWS)
    header = ["divergence" if k == "loss" else k for k in keys]
    lines += ["| step | " + " | ".join(header) + " |", "|---" * (len(keys) + 1) + "|"]
    for r in shown:
        lines.append(f"| {r['step']} | " + " | ".join(f"{r[k]:.4g}" if k in r else "" for k in keys) + " |")
    lines += ["", "![loss](loss.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def step_figures(rows: list[dict], times: list[tuple[float, float]]) -> dict:
    """A step's logged figures from its rows (every process's) and each process's (generate, teacher) seconds:
    the slowest process's time, which the others wait for (TRL logs each key; distill/report.py names them).

    >>> rows = [{"completion_tokens": 3, "teacher_tokens": 3, "teacher_logprob": -6.0, "prompt_tokens": 5}] * 2
    >>> f = step_figures(rows, [(1.0, 0.5), (1.5, 0.25)])
    >>> f["distill/student_tokens"], f["distill/teacher_input_tokens"], f["distill/teacher_logprob_per_token"]
    (6.0, 16.0, -2.0)
    >>> f["time/generate"], f["time/teacher"]
    (1.5, 0.5)
    """
    sampled = sum(r["completion_tokens"] for r in rows)
    scored = sum(r["teacher_tokens"] for r in rows)
    logprob = sum(r["teacher_logprob"] or 0.0 for r in rows)
    return {
        "distill/student_tokens": float(sampled),
        "distill/teacher_tokens": float(scored),
        # the teacher's forward reads the prompt too: what it cost, in tokens
        "distill/teacher_input_tokens": float(sum(r["prompt_tokens"] + r["teacher_tokens"] for r in rows)),
        "distill/teacher_logprob_per_token": logprob / scored if scored else float("nan"),
        "time/generate": max((g for g, _ in times), default=0.0),
        "time/teacher": max((t for _, t in times), default=0.0),
    }
