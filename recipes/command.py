"""``distill run``, ``distill validate`` and ``distill quickstart``."""

from __future__ import annotations

from pathlib import Path

import click

QUICKSTART = Path(__file__).parent / "quickstart.yaml"


def _load(recipe_path: str, overrides: tuple[str, ...], out: str | None = None):
    from reasonkit.config import load_yaml
    from reasonkit.recipes.recipe import parse_recipe

    return parse_recipe(load_yaml(recipe_path), recipe_path, list(overrides), out=out)


@click.command("run")
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE", help="Override a step's setting (repeatable).")
@click.option("--from", "start", metavar="STEP", help="Rerun this step and every step after it.")
@click.option("--only", metavar="STEP", help="Rerun only this step.")
@click.option("--out", default=None, help="Run directory (default: the recipe's `out`).")
def run(recipe: str, overrides: tuple[str, ...], start: str | None, only: str | None, out: str | None) -> None:
    """Run a whole recipe YAML, skipping steps already finished with the same config."""
    from reasonkit.recipes.runner import run as run_recipe

    if start and only:
        raise click.UsageError("--from and --only are exclusive")
    parsed = _load(recipe, overrides, out)
    run_recipe(parsed, start=start, only=only, echo=click.echo)
    _report(parsed)


@click.command("validate")
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE")
def validate(recipe: str, overrides: tuple[str, ...]) -> None:
    """Check a recipe fully (keys, types, references, input paths) without loading any model."""
    from reasonkit.recipes.runner import validate as validate_recipe

    planned = validate_recipe(_load(recipe, overrides))
    for p in planned:
        click.echo(f"ok  {p.step.name:<16} {p.step.stage:<10} {p.fingerprint}")
    click.echo(f"{recipe}: {len(planned)} steps valid")


@click.command("quickstart")
@click.option("--out", default="runs/quickstart", show_default=True, help="Run directory.")
@click.option("--set", "overrides", multiple=True, metavar="STEP.KEY=VALUE")
def quickstart(out: str, overrides: tuple[str, ...]) -> None:
    """The whole distillation loop on this CPU with the embedded teacher (= distill run recipes/quickstart.yaml)."""
    from reasonkit.recipes.runner import run as run_recipe

    parsed = _load(str(QUICKSTART), overrides, out)
    run_recipe(parsed, echo=click.echo)
    _report(parsed)


def _report(recipe) -> None:
    if not recipe.report:
        return
    try:
        from reasonkit.recipes.report import write_report
    except ImportError:  # the report module arrives with the quickstart
        return
    path = write_report(recipe)
    click.echo(f"report: {path}")
