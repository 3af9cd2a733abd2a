"""``distill label-steps``: flags -> LabelStepsConfig -> judges.steps.run_label_steps (loaded when run)."""

from __future__ import annotations

import json

import click

from reasonkit.judges.command import CONTEXT
from reasonkit.judges.steps.config import NOT_FLAGS, LabelStepsConfig
from reasonkit.options import Command, config_options, given


@click.command("label-steps", cls=Command, context_settings=CONTEXT)
@click.argument("input", type=click.Path())
@config_options(LabelStepsConfig, exclude=NOT_FLAGS, required=("policy", "out"))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config key (repeatable).")
@click.pass_context
def label_steps(ctx: click.Context, sets: tuple[str, ...], **flags) -> None:
    """Math-Shepherd step labels from policy rollouts, and Step-DPO pairs.

    INPUT is a traces or verdicts stage directory (for a filter output, its rejected/ rows dropped
    as wrong are labelled too). Each solution is cut into steps; from every step prefix the policy
    writes N rollouts continuing the same assistant turn; a step is good when any rollout reaches
    the gold answer (labels) and soft is the share that did. Writes OUT (TRL's stepwise
    supervision: prompt, completions, labels, soft), OUT/step_dpo (TRL's string prefs: the prompt
    and the correct steps, chosen = a correct next step, rejected = the first wrong one) and
    report.json.

    \b
    distill label-steps runs/verified --policy runs/sft/merged --out runs/steps --n 4
    distill train --method dpo --student runs/sft/merged --data runs/steps/step_dpo --out runs/step-dpo
    """
    from reasonkit.config import from_dict, override

    data = given(ctx, flags)
    if "separator" in data:  # a newline is hard to type in a shell flag: read \n and \t
        data["separator"] = data["separator"].replace("\\n", "\n").replace("\\t", "\t")
    cfg = override(from_dict(LabelStepsConfig, data, "label-steps"), list(sets), "label-steps")
    from reasonkit.judges.steps.run import run_label_steps

    report = run_label_steps(cfg)
    click.echo(json.dumps(report, indent=2))
