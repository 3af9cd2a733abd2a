"""``OUT/report.md``: one page a person wants to read after a recipe ran.

It gathers what each step already wrote (manifests, the filter's funnel, the trainer's report
and loss curve, the eval summaries) and draws the funnel bars and one pass@k plot for every
evaluation. Nothing here recomputes a number: a figure on this page is the one its stage recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reasonkit.recipes import teacher_tokens
from reasonkit.recipes.recipe import Recipe, step_dir
from reasonkit.view.command import PAGE


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_report(recipe: Recipe) -> Path:
    out = Path(recipe.out)
    state = _read_json(out / "_recipe_state.json") or {}
    sections = [f"# {recipe.name}\n", recipe.description.strip() + "\n" if recipe.description else ""]
    sections.append(VIEW_LINK.format(page=PAGE, out=out))
    sections.append(_steps_table(recipe, state))
    evals: list[tuple[str, dict]] = []
    for step in recipe.steps:
        d = Path(step_dir(recipe, step.name))
        if step.stage == "generate":
            sections.append(generate_section(step.name, d))
        elif step.stage == "filter":
            sections.append(_filter_section(step.name, d, out))
        elif step.stage == "pairs":
            sections.append(_pairs_section(step.name, d))
        elif step.stage == "train":
            sections.append(_train_section(step.name, d, out))
        elif step.stage == "eval":
            summary = _read_json(d / "summary.json")
            if summary:
                evals.append((step.name, summary))
    if evals:
        sections.append(eval_section(evals, out))
    if recipe.compare:
        sections.append(_compare_section(recipe))
    sections.append(teacher_tokens.section(recipe))
    path = out / "report.md"
    path.write_text("\n".join(s for s in sections if s))
    _write_view(out, path)
    return path


#: report.md's line to the run's page of rows (`distill view`), which the runner writes beside it.
VIEW_LINK = (
    "**Look at the data**: [{page}]({page}), one page of this run's rows and verdicts (the funnel, every "
    "drop reason's rows, traces, pairs, evaluations problem by problem) that opens offline in any browser; "
    "`distill view {out}` rewrites it, `--serve` reads every row.\n"
)


def _write_view(out: Path, report: Path) -> None:
    """The run's page beside report.md (it shows report.md too); where it cannot be made, report.md says why."""
    from reasonkit.errors import UserError
    from reasonkit.view.collect import Options, collect
    from reasonkit.view.page import write

    try:
        write(collect(out, Options()).data, out / PAGE)
    except UserError as e:
        text = report.read_text().replace(
            VIEW_LINK.format(page=PAGE, out=out), f"**Look at the data**: no {PAGE} was written: {e}\n"
        )
        report.write_text(text)


def _steps_table(recipe: Recipe, state: dict) -> str:
    lines = ["## Steps\n", "| step | stage | status | seconds |", "|---|---|---|---|"]
    for step in recipe.steps:
        record = state.get(step.name, {})
        status = "done" if record.get("done") else ("interrupted" if record else "not run")
        lines.append(f"| {step.name} | {step.stage} | {status} | {record.get('seconds', '')} |")
    return "\n".join(lines) + "\n"


def generate_section(name: str, d: Path) -> str:
    """The report's section on a generate step's directory ``d``: samples, tokens, speed, truncation, settings."""
    m = _read_json(d / "_manifest.json")
    if not m:
        return ""
    s = m.get("summary") or {}
    run = m.get("last_run") or {}
    rows, tokens = m.get("rows", 0), m.get("tokens", 0)
    line = f"## {name}: generation\n\n{rows} samples, {tokens:,} completion tokens"
    if run.get("tokens_per_s"):
        line += f", {run['tokens_per_s']:,} tokens/s"
    line += _truncated_text(s, rows)
    config = m.get("config") or {}
    if config:
        keys = ("teacher", "backend", "n", "temperature", "top_p", "max_tokens", "seed")
        line += "\n\n" + ", ".join(f"{k} `{config[k]}`" for k in keys if k in config)
    return line + "\n"


def _truncated_text(summary: dict, rows: int) -> str:
    """The truncated samples as a count and a percent of the samples (the manifest records a count;
    "truncated share 46" read as a share of 46 when it was 46 samples).

    >>> _truncated_text({"truncated": 46}, 600), _truncated_text({}, 600)
    (', 46 of 600 samples truncated (7.7%)', '')
    """
    n = summary.get("truncated")
    if n is None or not rows:
        return ""
    return f", {n} of {rows} samples truncated ({100 * n / rows:.1f}%)"


def _filter_section(name: str, d: Path, out: Path) -> str:
    r = _read_json(d / "report.json")
    if not r:
        return ""
    lines = [
        f"## {name}: filter funnel\n",
        "| step | reason | dropped (rows) | remaining (rows) |",
        "|---|---|---|---|",
        f"| in | | | {r.get('rows_in')} |",
    ]
    funnel = r.get("funnel") or []
    for s in funnel:
        lines.append(
            f"| {s.get('step', s.get('filter', ''))} | {s.get('reason')} | {s.get('dropped')} | {s.get('remaining')} |"
        )
    lines.append(f"| **out** | | | **{r.get('rows_out')}** |")
    png = out / f"funnel_{name}.png"
    if _funnel_plot(r, png):
        lines.append(f"\n![funnel]({png.name})")
    return "\n".join(lines) + "\n"


def _funnel_plot(r: dict, path: Path) -> bool:
    funnel = [s for s in r.get("funnel") or [] if s.get("dropped")]
    if r.get("rows_in") is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["in"] + [s["reason"] for s in funnel] + ["out"]
    values = [r["rows_in"]] + [s["remaining"] for s in funnel] + [r.get("rows_out", 0)]
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(labels) + 1), dpi=110)
    colors = ["#4c72b0"] + ["#dd8452"] * len(funnel) + ["#55a868"]
    ax.barh(range(len(labels)), values, color=colors)
    ax.set_yticks(
        range(len(labels)), [f"after {ln}" if 0 < i < len(labels) - 1 else ln for i, ln in enumerate(labels)]
    )
    ax.invert_yaxis()
    for i, v in enumerate(values):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    ax.set_xlabel("rows")
    ax.set_title("filter funnel")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _pairs_section(name: str, d: Path) -> str:
    r = _read_json(d / "report.json")
    if not r:
        return ""
    keys = [k for k in r if isinstance(r[k], (int, float, str)) and not k.startswith("_")][:12]
    return f"## {name}: preference pairs\n\n" + ", ".join(f"{k}: {r[k]}" for k in keys) + "\n"


def _train_section(name: str, d: Path, out: Path) -> str:
    r = _read_json(d / "report.json")
    if not r:
        return ""
    text = f"## {name}: {r.get('method', 'train').upper()} training\n\n"
    bits = [f"{r.get('steps')} steps"]
    if r.get("loss_first") is not None and r.get("loss_final") is not None:
        bits.append(f"loss {r['loss_first']:.4f} -> {r['loss_final']:.4f}")
    if r.get("tokens_per_s"):
        bits.append(f"{r['tokens_per_s']:,.0f} tokens/s")
    if r.get("reward_accuracy") is not None:
        bits.append(f"reward accuracy {100 * r['reward_accuracy']:.1f}%")
    if r.get("train_runtime_s"):
        bits.append(f"{r['train_runtime_s']:.0f} s")
    text += ", ".join(bits) + "\n"
    if r.get("method") == "dpo":  # a rung that barely moved the model says so (distill/dpo_movement.py)
        from reasonkit.distill.dpo_movement import movement_line

        if line := movement_line(r):
            text += f"\n{line}.\n"
    if r.get("grpo"):  # the RL rung: rewards per function, groups without signal, where the time went
        from reasonkit.distill.rl.report import summary_lines

        text += "\n" + "\n".join(f"- {line}" for line in summary_lines(r["grpo"])) + "\n"
    if r.get("distill"):  # on-policy distillation: the divergence, the tokens each side spent, where the time went
        from reasonkit.distill.onpolicy.report import summary_lines as distill_lines

        text += "\n" + "\n".join(f"- {line}" for line in distill_lines(r["distill"])) + "\n"
    for png in (d / "loss.png", d / "rewards.png"):
        if png.is_file():
            text += f"\n![{png.stem}]({os.path.relpath(png, out)})\n"
    return text


def eval_section(evals: list[tuple[str, dict]], out: Path) -> str:
    """The report's evaluation section: the table of every eval step's summary, the protocol, context overflow and
    the pass@k plot (written into ``out``)."""
    from reasonkit.distill.eval.report import markdown_table, write_plot

    png = out / "pass_at_k.png"
    write_plot(evals, png)
    text = "## Evaluation\n\n" + markdown_table(evals)
    p = evals[0][1].get("protocol", {})
    per = "per turn" if evals[0][1].get("tools") else "per sample"
    text += (
        f"\nProtocol: temperature {p.get('temperature')}, top-p {p.get('top_p')}, k={p.get('k')} samples per problem, "
        f"max tokens {p.get('max_tokens')} tokens {per}, backend {p.get('backend')}; full protocol in each step's "
        "summary.json.\n"
    )
    text += _overflow_text(evals)
    text += f"\n![pass@k]({png.name})\n"
    return text


def _overflow_text(evals: list[tuple[str, dict]]) -> str:
    """Each evaluation whose samples could not all fit the model's context, with the problems."""
    lines = []
    for name, summary in evals:
        over = summary.get("context_overflow") or {}
        if over.get("samples"):
            ids = ", ".join(over["ids"][:8]) + (" ..." if len(over["ids"]) > 8 else "")
            lines.append(
                f"- {name}: context overflow in {over['samples']} of {summary.get('n_samples')} samples "
                f"({over['problems']} of {summary.get('n_problems')} problems: {ids}), counted apart from no answer"
            )
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def _compare_section(recipe: Recipe) -> str:
    """The recipe's ``compare`` pairs, problem by problem: B - A in pass@1 with a paired bootstrap
    interval (distill/eval/compare.py). A pair not evaluated yet, or not comparable, says why."""
    from reasonkit.distill.eval.compare import paired_difference, paired_text
    from reasonkit.errors import UserError

    lines = ["## Paired comparisons\n"]
    for a, b in recipe.compare:
        da, db = Path(step_dir(recipe, a)), Path(step_dir(recipe, b))
        if not ((da / "summary.json").is_file() and (db / "summary.json").is_file()):
            lines.append(f"- {b} vs {a}: not evaluated yet\n")
            continue
        try:
            text = paired_text(paired_difference(da, db)).rstrip()
        except UserError as e:
            text = f"{b} vs {a}: not comparable: {e}"
        lines.append("- " + text.replace("\n", "\n  ") + "\n")
    return "\n".join(lines)
