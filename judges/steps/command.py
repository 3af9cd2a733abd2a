"""``distill label-steps``: flags -> LabelStepsConfig -> judges.steps.run_label_steps (loaded when run)."""

from __future__ import annotations

import json

import click

from reasonkit.judges.command import CONTEXT, common_options
from reasonkit.options import Command


@click.command("label-steps", cls=Command, context_settings=CONTEXT)
@click.argument("input", type=click.Path())
@click.option("--policy", required=True, help="The model whose rollouts label the steps: a directory or a Hub id.")
@click.option("--backend", type=click.Choice(["vllm", "hf"]), default=None, help="[default: vllm]")
@click.option("--n", type=int, default=None, help="Rollouts per step prefix (one at --temperature 0). [default: 8]")
@click.option("--temperature", type=float, default=None, help="[default: 0.6]")
@click.option("--top-p", type=float, default=None, help="[default: 0.95]")
@click.option("--max-tokens", type=int, default=None, help="Per rollout. [default: what the context leaves after the prefix]")
@click.option("--separator", default=None, help="Between steps ('\\n\\n': a blank line). [default: a newline]")
@click.option("--verifier", type=click.Choice(["math", "int"]), default=None, help="[default: math]")
@click.option("--kept-only", "include_wrong", flag_value=False, default=None,
              help="Label only a filter's kept rows, not its rejected/ rows dropped as wrong.")
@click.option("--wrong-only", is_flag=True, default=None,
              help="Label only solutions whose final answer is wrong (the ones a Step-DPO pair can come from).")
@click.option("--limit", type=int, default=None, help="Label at most this many solutions.")
@click.option("--chat-template", type=click.Path(), default=None, help="Jinja file overriding the tokenizer's chat template.")
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "float16"]), default=None, help="[default: auto]")
@click.option("--max-model-len", type=int, default=None)
@click.option("--batch-size", type=int, default=None, help="hf: prompts per generate call. [default: 8]")
@click.option("--shard-size", type=int, default=None, help="Solutions per committed shard. [default: 64]")
@common_options
def label_steps(sets, **flags) -> None:
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

    data = {k: v for k, v in flags.items() if v is not None}
    if "separator" in data:  # a newline is hard to type in a shell flag: read \n and \t
        data["separator"] = data["separator"].replace("\\n", "\n").replace("\\t", "\t")
    from reasonkit.judges.steps.config import LabelStepsConfig

    cfg = override(from_dict(LabelStepsConfig, data, "label-steps"), list(sets), "label-steps")
    from reasonkit.judges.steps.run import run_label_steps

    report = run_label_steps(cfg)
    click.echo(json.dumps(report, indent=2))
