"""``distill score``: flags -> ScoreConfig -> run_score. Only click here; torch and the model load when it runs."""

from __future__ import annotations

import json

import click

from reasonkit.judges.score.config import ScoreConfig
from reasonkit.options import Command, config_options, given


@click.command("score", cls=Command, context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.argument("input", type=click.Path())
@config_options(ScoreConfig, required=("model", "out"))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any ScoreConfig key (repeatable).")
@click.pass_context
def score(ctx: click.Context, sets: tuple[str, ...], **flags) -> None:
    """Add a reward model's `reward` (a PRM's also `step_rewards`) to every row of a traces or verdicts table.

    \b
    Writes a scores stage directory (the input's columns + reward float32, step_rewards list<float32>)
    and report.json; rerunning resumes, skipping rows already scored.
    distill score runs/traces --model runs/rm --out runs/scored
    distill filter runs/scored --out runs/best --select reward
    """
    from reasonkit.config import from_dict, override
    from reasonkit.judges.score.run import run_score

    cfg = override(from_dict(ScoreConfig, given(ctx, flags), "score"), list(sets), "score")
    click.echo(json.dumps(run_score(cfg), indent=2))
