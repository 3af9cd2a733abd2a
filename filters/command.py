"""``distill filter``: flags -> FilterConfig -> run_filter, then the funnel printed as a table.

Only click is imported here; the filters (numpy, pyarrow, lingua, math-verify) load when the
command runs, so ``distill --help`` stays instant.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from reasonkit.engine import EngineSettings
from reasonkit.options import config_options
from reasonkit.sandbox.stage import sandbox_option


def _listed_rows(traces_dir: str) -> int:
    """The rows a stage directory's manifest lists, read without the stage's imports (0 when it cannot
    be read: the stage then says why)."""
    try:
        return int(json.loads((Path(traces_dir) / "_manifest.json").read_text()).get("rows", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _split(values: tuple[str, ...]) -> list[str]:
    """``--decontam a.jsonl --decontam b.parquet`` or ``--decontam a.jsonl,b.parquet``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.command("filter", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("traces_dir", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Output stage directory.")
@click.option("--verifier", type=click.Choice(["math", "int", "exact", "code", "none"]), default="math", show_default=True,
              help="math: integer fast path, then math-verify; int: integers only; exact: the answer's text "
                   "(names, titles; case, spacing, outer $ and a final period aside); code: the response's last "
                   "Python block run in the sandbox against the prompt's tests (column `tests`, JSON: APPS/TACO, "
                   "CodeContests, LiveCodeBench shapes; --set tests_column=NAME); none: extract only.")
@click.option("--unverifiable", type=click.Choice(["drop", "keep"]), default="drop", show_default=True,
              help="Answers the verifier cannot judge (correct=None, e.g. a set or an interval against a "
                   "number). Rows with no extractable answer or no gold are always dropped "
                   "(no_answer, no_gold).")
@click.option("--verify-timeout", type=float, default=5.0, show_default=True,
              help="Seconds per answer (--verifier code: per test).")
@click.option("--lang", default="en", show_default=True, help="Target language of the chain of thought ('none': skip).")
@click.option("--min-lang-ratio", type=float, default=0.95, show_default=True,
              help="Minimum share of target-language words.")
@click.option("--drop-truncated/--keep-truncated", default=True, show_default=True, help="Drop finish_reason=length.")
@click.option("--think", type=click.Choice(["optional", "required"]), default="optional", show_default=True,
              help="required: drop traces that wrote no <think> block (R1-style data only); an opened, "
                   "never-closed block is dropped either way.")
@click.option("--require-boxed", is_flag=True, help="Drop responses without a \\boxed{} answer.")
@click.option("--require-tool", is_flag=True,
              help="Tool-use trajectories: drop an answer given without any tool call (no_tool_call).")
@click.option("--min-tokens", type=int, default=None, help="Minimum completion tokens.")
@click.option("--max-tokens", type=int, default=None, help="Maximum completion tokens.")
@click.option("--max-repetition", type=float, default=0.5, show_default=True,
              help="Maximum share of repeated word 8-grams.")
@click.option("--dedup", type=click.Choice(["exact", "minhash", "none"]), default="exact", show_default=True)
@click.option("--minhash-threshold", type=float, default=0.8, show_default=True,
              help="Jaccard threshold of near-duplicates.")
@click.option("--decontam", multiple=True, metavar="FILE",
              help="Eval set (Parquet/JSONL/CSV with a problem column), as PATH or NAME=PATH; repeatable.")
@click.option("--ngram", type=int, default=8, show_default=True, help="Word n-gram size of decontamination.")
@click.option("--keep-per-prompt", type=int, default=None, help="Keep at most M samples per prompt.")
@click.option("--select", "select_", type=click.Choice(["shortest", "random", "reward", "all"]), default="shortest",
              show_default=True, help="Which samples --keep-per-prompt keeps; reward: the highest `reward` of a "
                                      "`distill score` output (verified-correct samples first), one per prompt unless "
                                      "--keep-per-prompt says more.")
@click.option("--step-aggregate", type=click.Choice(["min", "prod"]), default="min", show_default=True,
              help="--select reward on a PRM's step_rewards: the weakest step (Math-Shepherd) or the product (Lightman et al.).")
@click.option("--workers", type=int, default=None,
              help="Verification processes [default: all cores; with --engine ray, per replica: 1].")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Any FilterConfig field, e.g. seed=3.")
@click.option("--allow-incomplete", is_flag=True, help="Read a traces directory whose generation has not finished.")
@click.option("--overwrite", is_flag=True, help="Replace an OUT written with another config.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@config_options(EngineSettings)
@sandbox_option
def filter(traces_dir, out, verifier, unverifiable, verify_timeout, lang, min_lang_ratio, drop_truncated,
           think, require_boxed, require_tool, min_tokens, max_tokens, max_repetition, dedup, minhash_threshold, decontam, ngram,
           keep_per_prompt, select_, step_aggregate, workers, overrides, allow_incomplete, overwrite, quiet,
           engine, replicas, ray_address) -> None:
    """Verify, language-check, dedup and decontaminate traces (or tool-use trajectories); every dropped row says why.

    \b
    Writes OUT/ (kept verdicts), OUT/rejected/ (with drop_reason), OUT/sft/ (prompt + one
    assistant turn "<think>\\nreasoning\\n</think>\\n\\nresponse", or the response alone for a trace
    with no think block) and OUT/report.json (the funnel). Trajectories (distill generate --tools) are
    verified on their final answer and dropped at the turn limit (max_turns) or on a tool error no
    later call recovered from (tool_error_unrecovered); OUT/sft/ then holds whole conversations.
    """
    from reasonkit.config import from_dict, override
    from reasonkit.filters.config import LANGUAGE_WARM_UP, FilterConfig, language_lookahead
    from reasonkit.filters.lookahead import start, stop_started

    data = dict(
        traces=traces_dir, out=out, verifier=verifier, unverifiable=unverifiable, verify_timeout=verify_timeout,
        lang=lang, min_lang_ratio=min_lang_ratio, drop_truncated=drop_truncated, think=think,
        require_boxed=require_boxed, require_tool=require_tool, min_tokens=min_tokens, max_tokens=max_tokens, max_repetition=max_repetition, dedup=dedup,
        minhash_threshold=minhash_threshold, decontam=_split(decontam), ngram=ngram,
        keep_per_prompt=keep_per_prompt, select=select_, step_aggregate=step_aggregate, workers=workers,
        allow_incomplete=allow_incomplete, overwrite=overwrite,
    )
    data.update({k: v for k, v in (("engine", engine), ("replicas", replicas), ("ray_address", ray_address))
                 if v is not None})
    config = override(from_dict(FilterConfig, data, "filter"), list(overrides), "filter")
    log = None if quiet else (lambda message: click.echo(message, err=True))
    if language_lookahead(config, _listed_rows(traces_dir)):  # lingua loads its models while the filters import
        start(LANGUAGE_WARM_UP, config.lang, config.lang_candidates)
    try:
        from reasonkit.filters.report import render
        from reasonkit.filters.stage import run_filter

        report = run_filter(config, log=log, progress=not quiet)
    finally:
        stop_started()
    from rich.console import Console

    Console(soft_wrap=True).print(render(report))
    for name, part in report.get("trajectories", {}).items():
        click.echo(f"trajectories {name}: {part['rows']}, {part['tool_calls_per_trajectory']} tool calls each, "
                   f"tool-error rate {part['tool_error_rate']}, finish {part['finish_reason']}")
    click.echo(f"wrote {report['rows_out']} rows to {out} (rejected/, sft/, report.json)")
