"""``distill eval`` and ``distill eval compare``."""

from __future__ import annotations

import click

from reasonkit.engine import engine_options
from reasonkit.sandbox.stage import sandbox_option

_EVAL_HELP = """Evaluate a model (and optional LoRA adapter): pass@1 over k samples, cons@k, pass@k.

\b
Defaults follow DeepSeek-R1's protocol: temperature 0.6, top-p 0.95, the boxed-answer
instruction; the paper used k=64 and 32768 tokens for AIME 2024.
  distill eval --model M --data aime.parquet --out runs/eval --k 64
  distill eval --model M --data aime.parquet --out runs/eval --k 64 --data-parallel auto   # every GPU
  distill eval compare runs/eval-sft runs/eval-grpo --out compare.md   # B - A, paired bootstrap CI
"""


class _Replicas(click.ParamType):
    """A positive integer or ``auto``."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r}: expected a number of replicas or auto", param, ctx)


_REPLICAS = _Replicas()


@click.group("eval", invoke_without_command=True, help=_EVAL_HELP)
@click.option("--model", help="Model directory or Hub id (the base model when --adapter is given).")
@click.option("--adapter", default=None, help="A peft LoRA adapter directory to evaluate on top of --model.")
@click.option("--data", help="Parquet/JSONL/CSV with problem and answer columns, a stage directory, or a Hub id.")
@click.option("--out", help="Output directory.")
@click.option("--backend", type=click.Choice(["vllm", "openai", "hf"]), default="vllm", show_default=True)
@click.option("--k", default=8, show_default=True, help="Samples per problem.")
@click.option("--temperature", default=0.6, show_default=True)
@click.option("--top-p", default=0.95, show_default=True)
@click.option("--max-tokens", default=32768, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--instruction", default=None, help="Appended to each problem (default: R1's boxed instruction).")
@click.option("--problem-col", default="problem", show_default=True)
@click.option("--answer-col", default="answer", show_default=True)
@click.option("--id-col", default="id", show_default=True)
@click.option("--limit", type=int, default=None, help="Evaluate only the first N problems.")
@click.option("--decontam-against", multiple=True, help="Training-data directory to check eval problems against (repeatable).")
@click.option("--verifier", type=click.Choice(["math", "int", "code", "exact"]), default="math", show_default=True,
              help="code: the response's last Python block run against the problem's tests (column `tests`, JSON) "
                   "in the sandbox; cons@k votes on the programs' outputs. Pass an --instruction asking for code. "
                   "exact: the answer's text.")
@click.option("--tools", default=None, help="Comma-separated tools (search,python): each sample is a tool-use "
              "trajectory scored on its final answer; summary.json adds tool calls per trajectory and the tool-error rate.")
@click.option("--corpus", default=None, help="search tool: passages, JSONL or Parquet with id and contents.")
@click.option("--max-turns", type=int, default=8, show_default=True, help="tools: assistant turns per trajectory.")
@click.option("--search-k", type=int, default=3, show_default=True, help="search tool: passages per observation.")
@click.option("--score-truncated", is_flag=True, default=None,
              help="Extract and score answers from truncated samples too (default: they count as no answer).")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default="auto", show_default=True)
@click.option("--tensor-parallel", default=1, show_default=True)
@click.option("--data-parallel", type=_REPLICAS, default=None,
              help="vllm or hf: engine replicas on this node, each on --tensor-parallel GPUs of its own; "
                   "auto: every visible GPU.  [default: 1]")
@click.option("--max-model-len", type=int, default=None)
@click.option("--allow-overflow", is_flag=True, default=None,
              help="Evaluate even if a problem's first prompt cannot fit --max-model-len (counted as context_overflow).")
@click.option("--base-url", default=None, help="OpenAI-compatible server (with --backend openai).")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True)
@click.option("--label", default=None, help="Name of this run in reports (default: the --out folder name).")
@click.option("--overwrite", is_flag=True, help="Replace an existing evaluation with a different config.")
@click.option("--report-to", multiple=True, type=click.Choice(["tensorboard", "wandb", "trackio", "mlflow", "none"]),
              help="Log the summary (pass@1, cons@k, pass@k, counts; the protocol as config) to a tracker, as a run of "
                   "its own; repeatable (each an extra: pip install 'reasonkit[wandb]') [none].")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override any EvalConfig field.")
@engine_options
@click.pass_context
@sandbox_option
def eval_(ctx: click.Context, overrides: tuple[str, ...], **options) -> None:
    if ctx.invoked_subcommand is not None:
        return
    missing = [f"--{name}" for name in ("model", "data", "out") if not options[name]]
    if missing:
        raise click.UsageError(f"missing {', '.join(missing)}")
    from reasonkit.config import from_dict, override
    from reasonkit.distill.eval.run import EvalConfig, run_eval

    data = {key: value for key, value in options.items() if value is not None}
    data["decontam_against"] = list(options["decontam_against"])
    data["report_to"] = list(options["report_to"]) or None
    config = override(from_dict(EvalConfig, data, "eval"), list(overrides), "eval")
    summary = run_eval(config)
    k = config.k
    click.echo(
        f"pass@1 {summary['pass@1']:.3f} ± {summary['pass@1_std']:.3f}  cons@{k} {summary[f'cons@{k}']:.3f}  "
        f"pass@{k} {summary.get(f'pass@{k}', summary['pass@1']):.3f}  on {summary['n_problems']} problems x {k} samples "
        f"-> {config.out}/summary.json"
    )
    if "tools" in summary:
        t = summary["tools"]
        click.echo(f"tools: {t['tool_calls_per_trajectory']} calls and {t['turns_per_trajectory']} turns a trajectory, "
                   f"tool-error rate {t['tool_error_rate']} (share of calls), finish {t['finish_reason']}")
    if (summary.get("context_overflow") or {}).get("samples"):
        over = summary["context_overflow"]
        click.echo(f"context overflow: {over['samples']} samples of {over['problems']} problems could not fit "
                   "max_model_len (summary.json: context_overflow)")


@eval_.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", required=True, help="Markdown file to write (a PNG plot is written beside it).")
@click.option("--paired/--no-paired", default=True, show_default=True,
              help="Compare each later run with the first on the same problems (B - A in pass@1, paired "
                   "bootstrap 95% CI); --no-paired: the table alone, for runs on other problems or protocols.")
@click.option("--rounds", default=10_000, show_default=True, type=click.IntRange(min=1), help="Bootstrap rounds.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap's resampling.")
def compare(runs: tuple[str, ...], out: str, paired: bool, rounds: int, seed: int) -> None:
    """Lay several eval runs side by side in one table and one pass@k plot; with two runs or more,
    the pass@1 difference of each later run from the first, paired over the same problems."""
    from reasonkit.distill.eval.compare import compare as compare_runs

    path = compare_runs(list(runs), out, paired=paired, rounds=rounds, seed=seed)
    click.echo(path.read_text())
