"""``distill filter``: flags -> FilterConfig -> run_filter, then the funnel printed as a table.

Only click is imported here; the filters (numpy, pyarrow, lingua, math-verify) load when the
command runs, so ``distill --help`` stays instant.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from reasonkit.filters.config import FilterConfig
from reasonkit.options import Command, config_options, given
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


@click.command("filter", cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("traces_dir", type=click.Path())
@config_options(FilterConfig, required=("out",))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Any FilterConfig field, e.g. seed=3.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@click.pass_context
@sandbox_option
def filter(ctx: click.Context, traces_dir: str, overrides: tuple[str, ...], quiet: bool, **flags) -> None:
    """Verify, language-check, dedup and decontaminate traces (or tool-use trajectories); every dropped row says why.

    \b
    Writes OUT/ (kept verdicts), OUT/rejected/ (with drop_reason), OUT/sft/ (prompt + one
    assistant turn "<think>\\nreasoning\\n</think>\\n\\nresponse", or the response alone for a trace
    with no think block) and OUT/report.json (the funnel). Trajectories (distill generate --tools) are
    verified on their final answer and dropped at the turn limit (max_turns) or on a tool error no
    later call recovered from (tool_error_unrecovered); OUT/sft/ then holds whole conversations.
    --difficulty EVAL_DIR --pass-rate LO..HI keeps the prompts a distill eval solved at a rate in the band
    (too_easy, too_hard, unrated); on a prompts table instead of traces it is the only filter, and OUT/ is
    the prompts in the band (GRPO's --data).
    """
    from reasonkit.config import from_dict, override
    from reasonkit.filters.config import LANGUAGE_WARM_UP, language_lookahead
    from reasonkit.filters.lookahead import start, stop_started

    data = {"traces": traces_dir, **given(ctx, flags)}
    if "decontam" in data:
        data["decontam"] = _split(data["decontam"])
    config = override(from_dict(FilterConfig, data, "filter"), list(overrides), "filter")
    log = None if quiet else (lambda message: click.echo(message, err=True))
    if language_lookahead(config, _listed_rows(traces_dir)):  # lingua loads its models while the filters import
        start(LANGUAGE_WARM_UP, config.lang, config.lang_candidates)
    try:
        from reasonkit.filters.report import render
        from reasonkit.filters.run import run_filter

        report = run_filter(config, log=log, progress=not quiet)
    finally:
        stop_started()
    from rich.console import Console

    Console(soft_wrap=True).print(render(report))
    for name, part in report.get("trajectories", {}).items():
        click.echo(
            f"trajectories {name}: {part['rows']}, {part['tool_calls_per_trajectory']} tool calls each, "
            f"tool-error rate {part['tool_error_rate']}, finish {part['finish_reason']}"
        )
    parts = "rejected/, report.json" if report.get("table") == "prompts" else "rejected/, sft/, report.json"
    click.echo(f"wrote {report['rows_out']} rows to {config.out} ({parts})")
