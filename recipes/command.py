"""``distill run``, ``distill validate`` and ``distill quickstart``."""

from __future__ import annotations

import os
from pathlib import Path

import click

QUICKSTART = Path(__file__).parent / "quickstart.yaml"


def _load(recipe_path: str, overrides: tuple[str, ...], out: str | None = None):
    from reasonkit.config import load_yaml
    from reasonkit.recipes.recipe import parse_recipe

    return parse_recipe(load_yaml(recipe_path), recipe_path, list(overrides), out=out)


@click.command("run")
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option(
    "--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE", help="Override a step's setting (repeatable)."
)
@click.option(
    "--from", "start", metavar="STEP", help="Run this step and every step after it (earlier ones must be finished)."
)
@click.option("--only", metavar="STEP", help="Run only this step.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Delete the output of the steps that run and redo them (without it, "
    "an interrupted step resumes and a finished one is skipped).",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Show library logs (vLLM, transformers, ...) instead of writing them to OUT/STEP/run.log.",
)
@click.option("--out", default=None, help="Run directory (default: the recipe's `out`).")
@click.option(
    "--plan",
    "show_plan",
    is_flag=True,
    help="Print what each step would do, where, on how many GPUs "
    "and with how much memory per GPU (estimated), then stop; no model is loaded. A step whose estimate "
    "passes the GPU's memory is refused (exit 2).",
)
@click.option(
    "--gpu-gb",
    type=float,
    default=None,
    help="The GPU memory (GB) --plan fits each step in (default 80, "
    "an H100; a train step's gpu_memory_gb wins for it).",
)
@click.option(
    "--report-to",
    multiple=True,
    type=click.Choice(["tensorboard", "wandb", "trackio", "mlflow", "none"]),
    help="Every train step logs its curves and protocol, every eval step its summary, to this tracker; "
    "repeatable; a step's own report_to wins [none].",
)
def run(
    recipe: str,
    overrides: tuple[str, ...],
    start: str | None,
    only: str | None,
    overwrite: bool,
    verbose: bool,
    out: str | None,
    show_plan: bool,
    gpu_gb: float | None,
    report_to: tuple[str, ...],
) -> None:
    """Run a whole recipe YAML, skipping steps already finished with the same config.

    A step that was interrupted resumes where it stopped, also when named with --only or --from;
    only --overwrite deletes a step's output. A changed config replaces that step's output.
    """
    from reasonkit.recipes.runner import run as run_recipe

    if start and only:
        raise click.UsageError("--from and --only are exclusive")
    parsed = with_trackers(_load(recipe, overrides, out), report_to)
    if show_plan:
        from reasonkit.errors import UserError
        from reasonkit.recipes.plan import plan, refusals, render
        from reasonkit.recipes.preflight import missing
        from reasonkit.recipes.runner import load_state
        from reasonkit.recipes.runner import validate as validate_recipe

        planned = validate_recipe(parsed)
        plans = plan(parsed, planned, load_state(Path(parsed.out)), gpu_gb=gpu_gb)
        # the plan is made anywhere (a laptop before the cluster): a GPU GRPO step is checked as on a GPU
        click.echo(render(plans, missing(planned, cuda=lambda: True)))
        from reasonkit.recipes.crosscheck import problems
        from reasonkit.recipes.reward_check import unmet_format_rewards

        refused = problems(planned) + unmet_format_rewards(planned) + refusals(plans)
        if refused:
            raise UserError(f"{recipe}: {len(refused)} problem(s) found before the first step: {'; '.join(refused)}")
        return
    _engines_in_process()
    run_recipe(parsed, start=start, only=only, overwrite=overwrite, verbose=verbose, echo=click.echo)
    _report(parsed)


@click.command("validate")
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE")
def validate(recipe: str, overrides: tuple[str, ...]) -> None:
    """Check a recipe fully (keys, types, references, input paths) without loading any model."""
    from reasonkit.recipes.runner import validate as validate_recipe

    planned = validate_recipe(_load(recipe, overrides))
    from reasonkit.errors import UserError
    from reasonkit.recipes.crosscheck import problems
    from reasonkit.recipes.reward_check import unmet_format_rewards

    found = problems(planned) + unmet_format_rewards(planned)  # what no single step's keys can show
    if found:
        raise UserError(f"{recipe}: {len(found)} problem(s) across steps: {'; '.join(found)}")
    for p in planned:
        click.echo(f"ok  {p.step.name:<16} {p.step.stage:<10} {p.fingerprint}")
    click.echo(f"{recipe}: {len(planned)} steps valid")


@click.command("quickstart")
@click.option("--out", default="runs/quickstart", show_default=True, help="Run directory.")
@click.option("--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE")
@click.option("--overwrite", is_flag=True, help="Delete the earlier run in --out and redo every step.")
@click.option(
    "--verbose",
    is_flag=True,
    help="Show library logs (vLLM, transformers, ...) instead of writing them to OUT/STEP/run.log.",
)
@click.option(
    "--report-to",
    multiple=True,
    type=click.Choice(["tensorboard", "wandb", "trackio", "mlflow", "none"]),
    help="As distill run's: every train and eval step logs to this tracker [none].",
)
def quickstart(
    out: str, overrides: tuple[str, ...], overwrite: bool, verbose: bool, report_to: tuple[str, ...]
) -> None:
    """The whole distillation loop on this CPU with the embedded teacher (= distill run recipes/quickstart.yaml)."""
    from reasonkit.recipes.runner import run as run_recipe

    parsed = with_trackers(_load(str(QUICKSTART), overrides, out), report_to)
    _engines_in_process()
    run_recipe(parsed, overwrite=overwrite, verbose=verbose, echo=click.echo)
    _report(parsed)


def with_trackers(recipe, trackers: tuple[str, ...]):
    """``recipe`` with ``report_to`` set on each train and eval step that does not set its own (--report-to)."""
    import dataclasses

    from reasonkit.distill.trackers import names, require

    if not names(trackers):
        return recipe
    require(names(trackers))  # before the first step, not when the first train step starts
    steps = tuple(
        dataclasses.replace(s, config={"report_to": list(trackers), **s.config}) if s.stage in ("train", "eval") else s
        for s in recipe.steps
    )
    return dataclasses.replace(recipe, steps=steps)


def _engines_in_process() -> None:
    """On a small machine, run each step's vLLM engine inside this process, not in a child.

    A recipe runs its steps one after another, so one engine at a time lives here. Measured on
    2 cores: the quickstart took 10 min 54 s with vLLM's default (an engine-core child process per
    generate or eval step, about 34 s per eval) and 8 min 13-49 s in-process (about 10 s per eval),
    with the same figures. The cost: vLLM then binds this process's torch threads, so a training
    step after a vLLM step keeps vLLM's thread count rather than its ``threads``. Set
    ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` to keep vLLM's default.
    """
    if (os.cpu_count() or 1) <= 4:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def _report(recipe) -> None:
    if not recipe.report:
        return
    try:
        from reasonkit.recipes.report import write_report
    except ImportError:  # the report module arrives with the quickstart
        return
    path = write_report(recipe)
    click.echo(f"report: {path}")
