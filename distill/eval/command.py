"""``distill eval`` and ``distill eval compare``."""

from __future__ import annotations

import click

from reasonkit.distill.eval.config import NOT_FLAGS, EvalConfig
from reasonkit.options import Group, config_options, given
from reasonkit.sandbox.stage import sandbox_option

_EVAL_HELP = """Evaluate a model (and optional LoRA adapter): pass@1 over k samples, cons@k, pass@k.

\b
Defaults follow DeepSeek-R1's protocol: temperature 0.6, top-p 0.95, the boxed-answer
instruction; the paper used k=64 and 32768 tokens for AIME 2024.
  distill eval --model M --data aime.parquet --out runs/eval --k 64
  distill eval --model M --data aime.parquet --out runs/eval --k 64 --data-parallel auto   # every GPU
  distill eval compare runs/eval-sft runs/eval-grpo --out compare.md   # B - A, paired bootstrap CI
"""


@click.group("eval", cls=Group, invoke_without_command=True, help=_EVAL_HELP)
@config_options(EvalConfig, exclude=NOT_FLAGS)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override any EvalConfig field.")
@click.pass_context
@sandbox_option
def eval_(ctx: click.Context, overrides: tuple[str, ...], **options) -> None:
    if ctx.invoked_subcommand is not None:
        return
    missing = [f"--{name}" for name in ("model", "data", "out") if not options[name]]
    if missing:
        raise click.UsageError(f"missing {', '.join(missing)}")
    from reasonkit.config import from_dict, override
    from reasonkit.distill.eval.run import run_eval

    data = given(ctx, options)
    config = override(from_dict(EvalConfig, data, "eval"), list(overrides), "eval")
    summary = run_eval(config)
    k = config.k
    click.echo(
        f"pass@1 {summary['pass@1']:.3f} ± {summary['pass@1_std']:.3f}  cons@{k} {summary[f'cons@{k}']:.3f}  "
        f"pass@{k} {summary.get(f'pass@{k}', summary['pass@1']):.3f}  on {summary['n_problems']} problems x {k} "
        "samples "
        f"-> {config.out}/summary.json"
    )
    if "tools" in summary:
        t = summary["tools"]
        click.echo(
            f"tools: {t['tool_calls_per_trajectory']} calls and {t['turns_per_trajectory']} turns a trajectory, "
            f"tool-error rate {t['tool_error_rate']} (share of calls), finish {t['finish_reason']}"
        )
    if (summary.get("context_overflow") or {}).get("samples"):
        over = summary["context_overflow"]
        click.echo(
            f"context overflow: {over['samples']} samples of {over['problems']} problems could not fit "
            "max_model_len (summary.json: context_overflow)"
        )


@eval_.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", required=True, help="Markdown file to write (a PNG plot is written beside it).")
@click.option(
    "--paired/--no-paired",
    default=True,
    show_default=True,
    help="Compare each later run with the first on the same problems (B - A in pass@1, paired "
    "bootstrap 95% CI); --no-paired: the table alone, for runs on other problems or protocols.",
)
@click.option("--rounds", default=10_000, show_default=True, type=click.IntRange(min=1), help="Bootstrap rounds.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap's resampling.")
def compare(runs: tuple[str, ...], out: str, paired: bool, rounds: int, seed: int) -> None:
    """Lay several eval runs side by side in one table and one pass@k plot; with two runs or more,
    the pass@1 difference of each later run from the first, paired over the same problems."""
    from reasonkit.distill.eval.compare import compare as compare_runs

    path = compare_runs(list(runs), out, paired=paired, rounds=rounds, seed=seed)
    click.echo(path.read_text())
