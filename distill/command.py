"""``distill train``: flags -> TrainConfig -> :func:`reasonkit.distill.train.train`.

Imports nothing heavy at module level (the CLI lists commands without loading torch). Several GPUs:
``--set launcher=accelerate --set num_processes=8 [--set accelerate_config=zero3]`` starts
``accelerate launch`` itself (distill/launch.py); or launch by hand:
``accelerate launch --config_file recipes/accelerate/ddp.yaml -m reasonkit.distill.command --method sft ...``.
"""

from __future__ import annotations

import click

from reasonkit.distill.config import TrainConfig
from reasonkit.options import Command, config_options, given
from reasonkit.sandbox.stage import sandbox_option


@click.command(
    name="train", cls=Command, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@config_options(TrainConfig, required=("method", "student", "data", "out"))
@click.option(
    "--reward",
    "rewards",
    multiple=True,
    metavar="NAME=WEIGHT",
    help="GRPO: a reward function and its weight, repeatable; the ones named replace the default pair "
    "(accuracy, format, language, length, cosine, arithmetic, code; rm=PATH or rm=PATH:WEIGHT, a reward model "
    "scoring as `distill score` does) [accuracy=1.0 format=0.2].",
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any other setting, e.g. save_steps=50, threads=1, lint=warn.",
)
@click.pass_context
@sandbox_option
def train(ctx: click.Context, assignments: tuple[str, ...], **flags) -> None:
    """SFT, DPO, GRPO, a reward model or a process reward model with LoRA (or --full) on TRL and peft: linted,
    checkpointed, resumable.

    \b
    distill train --method sft --student Qwen/Qwen2.5-1.5B-Instruct --data runs/sft --out runs/student
    distill train --method dpo --student runs/student/merged --data runs/pairs --out runs/dpo --merge
    distill train --method grpo --student runs/student/merged --data problems.parquet --out runs/grpo \\
        --num-generations 8 --reward accuracy=1.0 --reward format=0.2
    distill train --method grpo --student runs/agent-sft/merged --data prompts.parquet --out runs/agent-grpo \\
        --tools search --corpus passages.jsonl --max-turns 4 --reward accuracy=1.0
    distill train --method rm --student runs/student/merged --data runs/pairs --out runs/rm --merge
    distill train --method prm --student runs/student/merged --data runs/steps --out runs/prm --full
    distill train ... --set launcher=accelerate --set num_processes=8 --set accelerate_config=zero3
    """
    from reasonkit.config import from_dict, override
    from reasonkit.distill.launch import is_main
    from reasonkit.distill.train import train as run

    values = given(ctx, flags)
    if "step_separator" in values:  # a newline is hard to type in a shell flag: \n and \t, as label-steps reads them
        values["step_separator"] = values["step_separator"].replace("\\n", "\n").replace("\\t", "\t")
    if "rewards" in values:
        from reasonkit.reward.model import parse_rm_flag

        models = [parse_rm_flag(item)[0] for item in values["rewards"] if item.strip().startswith("rm=")]
        values["rewards"] = parse_rewards(values["rewards"])
        if models:
            values["reward_model"] = models[-1]
    cfg = override(from_dict(TrainConfig, values, "train"), list(assignments), "train")
    main = is_main()  # under accelerate launch by hand, one process speaks for all
    run(cfg, progress=main, log=(lambda msg: click.echo(msg, err=True)) if main else None)


def parse_rewards(items: tuple[str, ...]) -> dict[str, float]:
    """``("accuracy=1.0", "format=0.2")`` -> ``{"accuracy": 1.0, "format": 0.2}``; a bare name weighs 1.0.

    >>> parse_rewards(("accuracy=1", "format=0.2"))
    {'accuracy': 1.0, 'format': 0.2}
    >>> parse_rewards(("accuracy=1", "rm=runs/rm:0.5"))
    {'accuracy': 1.0, 'rm': 0.5}
    >>> parse_rewards(("accuracy=high",))
    Traceback (most recent call last):
    ...
    click.exceptions.BadParameter: --reward accuracy=high: the weight must be a number
    """
    weights = {}
    for item in items:
        name, sep, weight = item.partition("=")
        if name.strip() == "rm" and sep:  # rm=PATH[:WEIGHT]: a reward model (its path goes to reward_model)
            from reasonkit.reward.model import parse_rm_flag

            weights["rm"] = parse_rm_flag(item)[1]
            continue
        try:
            weights[name.strip()] = float(weight) if sep else 1.0
        except ValueError:
            raise click.BadParameter(f"--reward {item}: the weight must be a number") from None
    return weights


if __name__ == "__main__":  # accelerate launch -m reasonkit.distill.command ...
    import sys

    try:
        train.main(prog_name="distill train", standalone_mode=False)
    except click.ClickException as e:  # a UserError too (options.Command): one line, exit 2
        e.show()
        sys.exit(e.exit_code)
