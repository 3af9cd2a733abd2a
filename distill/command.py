"""``distill train``: flags -> TrainConfig -> :func:`reasonkit.distill.train.train`.

Imports nothing heavy at module level (the CLI lists commands without loading torch). Several GPUs:
``--set launcher=accelerate --set num_processes=8 [--set accelerate_config=zero3]`` starts
``accelerate launch`` itself (distill/launch.py); or launch by hand:
``accelerate launch --config_file recipes/accelerate/ddp.yaml -m reasonkit.distill.command --method sft ...``.
"""

from __future__ import annotations

import dataclasses

import click

from reasonkit.distill.config import TrainConfig
from reasonkit.options import Command
from reasonkit.sandbox.stage import sandbox_option

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}


def _d(name: str) -> str:
    value = _DEFAULTS[name]
    return "device/model aware" if value is None else str(value)


@click.command(name="train", cls=Command, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--method", type=click.Choice(["sft", "dpo", "grpo", "rm", "prm"]), required=True,
              help="SFT on sft rows, DPO on prefs rows, GRPO on prompts with verifiable answers, a reward model (rm) on "
                   "prefs rows, or a process reward model (prm) on steps rows.")
@click.option("--student", required=True, help="Student model directory or Hub id.")
@click.option("--data", required=True, help="An sft (SFT) or prefs (DPO, rm) stage directory, or Parquet/JSONL in that format; "
              "GRPO: prompts as `distill generate` reads them (Parquet/JSONL/CSV, a stage directory, a Hub id) with an answer column; "
              "rm also takes TRL's string prefs (prompt/chosen/rejected strings); prm: a steps table (prompt, completions, labels).")
@click.option("--out", required=True, help="Output directory: adapter/ (or model/ with --full), checkpoints/, report.json, loss.png "
              "(rm/prm: report.md with held-out accuracy).")
@click.option("--lora-r", type=int, help=f"LoRA rank [{_d('lora_r')}].")
@click.option("--lora-alpha", type=int, help=f"LoRA alpha [{_d('lora_alpha')}].")
@click.option("--lora-dropout", type=float, help=f"LoRA dropout [{_d('lora_dropout')}].")
@click.option("--target-modules", help=f"LoRA target modules, comma-separated [{_d('target_modules')}].")
@click.option("--full", is_flag=True, default=None, help="Full fine-tuning instead of LoRA.")
@click.option("--epochs", type=float, help=f"Passes over the data [{_d('epochs')}].")
@click.option("--max-steps", type=int, help="Optimizer steps (overrides --epochs).")
@click.option("--lr", type=float, help="Peak learning rate [sft 2e-4 / dpo 2e-5 / grpo 1e-5 / rm, prm 1e-4 with LoRA; "
              "2e-5 / 1e-6 / 1e-6 / 1e-5 full].")
@click.option("--batch-size", type=int, help=f"Examples (DPO: pairs; GRPO: completions) per device per step [{_d('batch_size')}].")
@click.option("--grad-accum", type=int, help=f"Gradient accumulation steps [{_d('grad_accum')}].")
@click.option("--max-length", type=int, help="Token limit per example [min(4096, the student's context)].")
@click.option("--packing/--no-packing", default=None, help="SFT: pack examples best-fit decreasing [no-packing].")
@click.option("--beta", type=float, help="DPO beta [0.1]; GRPO: KL weight to the reference [0: no reference model].")
@click.option("--loss", type=click.Choice(["sigmoid", "ipo"]), help="DPO loss [sigmoid].")
@click.option("--precompute-ref", is_flag=True, default=None, help="DPO: score pairs with the reference once, before training.")
@click.option("--num-generations", type=int, help=f"GRPO: completions sampled per prompt, G [{_d('num_generations')}].")
@click.option("--reward", "rewards", multiple=True, metavar="NAME=WEIGHT",
              help="GRPO: a reward function and its weight, repeatable; the ones named replace the default pair "
                   "(accuracy, format, language, length, cosine, arithmetic, code; rm=PATH or rm=PATH:WEIGHT, a reward model "
                   "scoring as `distill score` does) [accuracy=1.0 format=0.2].")
@click.option("--loss-type", type=click.Choice(["grpo", "dr_grpo", "dapo", "bnpo"]), help=f"GRPO loss [{_d('loss_type')}].")
@click.option("--scale-rewards", type=click.Choice(["group", "batch", "none"]),
              help=f"GRPO: divide advantages by the group's reward std, the batch's, or nothing [{_d('scale_rewards')}].")
@click.option("--epsilon", type=float, help=f"GRPO: clip range of the probability ratio [{_d('epsilon')}].")
@click.option("--max-completion-length", type=int, help=f"GRPO: tokens per sampled completion [{_d('max_completion_length')}].")
@click.option("--temperature", type=float, help=f"GRPO: sampling temperature [{_d('temperature')}].")
@click.option("--tools", help="GRPO: comma-separated tools the policy calls between its turns (search,python), run by TRL's "
              "tool loop as `distill generate --tools` runs them; tool results are masked out of the loss [none].")
@click.option("--corpus", help="GRPO --tools search: the passages, JSONL or Parquet with id and contents.")
@click.option("--max-turns", type=int, help=f"GRPO --tools: assistant turns per completion [{_d('max_turns')}].")
@click.option("--search-k", type=int, help=f"GRPO --tools search: passages per observation [{_d('search_k')}].")
@click.option("--eval-share", type=float, help=f"rm, prm: share of the prompts held out for the report's accuracy [{_d('eval_share')}].")
@click.option("--margin-scale", type=float, help=f"rm: margin = this x (chosen_score - rejected_score) where both are given; "
              f"0: no margin [{_d('margin_scale')}].")
@click.option("--center-rewards-coefficient", type=float, help="rm: TRL's weight on mean(reward^2), rewards near zero [off; 0.01 suggested].")
@click.option("--step-separator", help="prm: the text joining the steps, as label-steps' --separator (\\n, \\t read as "
              "newline, tab); each step is labelled at its last token [newline].")
@click.option("--merge", is_flag=True, default=None, help="Also write OUT/merged: the adapter folded into the weights.")
@click.option("--resume", is_flag=True, default=None, help="Continue the run in OUT from its last complete checkpoint.")
@click.option("--overwrite", is_flag=True, default=None, help="Delete the run in OUT and start over.")
@click.option("--seed", type=int, help=f"Seed for data order and initialisation [{_d('seed')}].")
@click.option("--report-to", "report_to", multiple=True, type=click.Choice(["tensorboard", "wandb", "trackio", "mlflow", "none"]),
              help="Log the training curves and the run's protocol to a tracker, repeatable (each an extra: pip install "
                   "'reasonkit[wandb]'); TensorBoard writes OUT/tensorboard [none].")
@click.option("--set", "assignments", multiple=True, metavar="KEY=VALUE", help="Any other setting, e.g. save_steps=50, threads=1, lint=warn.")
@sandbox_option
def train(assignments: tuple[str, ...], **flags) -> None:
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

    values = {k: v for k, v in flags.items() if v is not None and v != ()}
    if "report_to" in values:
        values["report_to"] = list(values["report_to"])
    if "step_separator" in values:  # a newline is hard to type in a shell flag: \n and \t, as label-steps reads them
        values["step_separator"] = values["step_separator"].replace("\\n", "\n").replace("\\t", "\t")
    if "rewards" in values:
        from reasonkit.filters.reward_model import parse_rm_flag

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
            from reasonkit.filters.reward_model import parse_rm_flag

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
