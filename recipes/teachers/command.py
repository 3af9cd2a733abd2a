"""``distill make-teacher``: train one of the tiny teachers from scratch (arithmetic, agent or code).

The one place that knows all three teachers; each teacher module knows only its own task.
"""

from __future__ import annotations

import json

import click

from reasonkit.recipes.teachers.math import DEFAULT_DIR, make_teacher


@click.command("make-teacher")
@click.option(
    "--task",
    type=click.Choice(["arithmetic", "agent", "code"]),
    default="arithmetic",
    show_default=True,
    help="arithmetic: the worked-solution teacher (recipes/tasks/math.py); agent: the tool-using teacher "
    "(recipes/tasks/agent.py, recipes/teachers/agent.py); code: the program-writing teacher "
    "(recipes/tasks/code.py, recipes/teachers/code.py).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory to write the model, tokenizer and training_report.json into "
    "[default: the task's shipped teacher under recipes/assets].",
)
@click.option(
    "--n-train",
    type=click.IntRange(min=2),
    default=None,
    help="Examples to train on [default: arithmetic 5000, half of each variant; agent every training question; code "
    "2000].",
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=None,
    help="Cap on optimizer steps (default: arithmetic 9 epochs over --n-train; agent 3000 steps of 16; code 4 epochs "
    "of 32).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--n-eval",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Held-out problems (per variant) for the accuracy figures in the report.",
)
@click.option(
    "--train-worlds",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="agent: train on the questions of this many other worlds (seeds 1..N), so facts never repeat "
    "and the teacher must read the observations; 0: world 0's own training questions.",
)
@click.option(
    "--init-from",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="agent: continue training this model directory (with its tokenizer) instead of a fresh one.",
)
@click.option("--lr", type=float, default=None, help="agent: peak learning rate [default: 3e-3].")
def make_teacher_command(
    task: str,
    out_dir: str | None,
    n_train: int | None,
    max_steps: int | None,
    seed: int,
    n_eval: int,
    train_worlds: int,
    init_from: str | None,
    lr: float | None,
) -> None:
    """Train a tiny teacher from scratch on a synthetic task (arithmetic: about 13 minutes on 2 cores)."""
    if task != "agent" and (train_worlds or init_from or lr is not None):
        raise click.UsageError("--train-worlds, --init-from and --lr apply to --task agent")
    if task == "agent":
        from reasonkit.recipes.teachers.agent import DEFAULT_DIR as AGENT_DIR
        from reasonkit.recipes.teachers.agent import make_agent_teacher

        report = make_agent_teacher(
            out_dir or AGENT_DIR,
            n_train=n_train,
            max_steps=max_steps,
            seed=seed,
            n_eval=n_eval,
            train_worlds=train_worlds,
            init_from=init_from,
            log=click.echo,
            **({"lr": lr} if lr is not None else {}),
        )
        keys = ("parameters", "steps", "wall_s", "pass_at_1_with_search", "pass_at_1_without_tools")
    elif task == "code":
        from reasonkit.recipes.teachers.code import DEFAULT_DIR as CODE_DIR
        from reasonkit.recipes.teachers.code import make_code_teacher

        report = make_code_teacher(
            out_dir or CODE_DIR, n_train=n_train or 2000, max_steps=max_steps, seed=seed, n_eval=n_eval, log=click.echo
        )
        keys = ("parameters", "steps", "wall_s", "greedy_pass_at_1", "sampled_pass_at_1")
    else:
        report = make_teacher(
            out_dir or DEFAULT_DIR,
            n_train=n_train or 5000,
            max_steps=max_steps,
            seed=seed,
            n_eval=n_eval,
            log=click.echo,
        )
        keys = ("parameters", "steps", "wall_s", "greedy_accuracy", "sampled_accuracy")
    click.echo(json.dumps({k: report[k] for k in keys}))
