"""``distill score``: flags -> ScoreConfig -> run_score. Only click here; torch and the model load when it runs."""

from __future__ import annotations

import json

import click


@click.command("score", context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.argument("input", type=click.Path())
@click.option("--model", required=True, help="Reward model directory (distill train --method rm / prm) or its LoRA adapter.")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output stage directory; rerunning resumes it.")
@click.option("--batch-size", type=int, default=None, help="Rows per forward, sorted by length. [default: 16]")
@click.option("--shard-size", type=int, default=None, help="Input rows per committed shard. [default: 1024]")
@click.option("--max-length", type=int, default=None, help="Tokens kept per row. [default: all]")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None, help="[default: float32]")
@click.option("--response-only", "include_reasoning", flag_value=False, default=None,
              help="Score the response after </think> only, not the reasoning.")
@click.option("--allow-incomplete", is_flag=True, default=None, help="Read an input stage that has not finished.")
@click.option("--overwrite", is_flag=True, default=None, help="Replace an --out written with other settings.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any ScoreConfig key (repeatable).")
def score(sets, **flags) -> None:
    """Add a reward model's `reward` (a PRM's also `step_rewards`) to every row of a traces or verdicts table.

    \b
    Writes a scores stage directory (the input's columns + reward float32, step_rewards list<float32>)
    and report.json; rerunning resumes, skipping rows already scored.
    distill score runs/traces --model runs/rm --out runs/scored
    distill filter runs/scored --out runs/best --select reward
    """
    from reasonkit.config import from_dict, override
    from reasonkit.judges.score.run import ScoreConfig, run_score

    cfg = override(from_dict(ScoreConfig, {k: v for k, v in flags.items() if v is not None}, "score"), list(sets), "score")
    click.echo(json.dumps(run_score(cfg), indent=2))
