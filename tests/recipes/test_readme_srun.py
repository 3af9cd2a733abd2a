"""The README's two-node Slurm example trains the batch the recipe means (issue 35 item 6): ``--set`` overrides
that change the process count must keep batch_size x grad_accum x num_processes, or the run trains on twice
the traces a step (and half the optimizer steps) that open-r1's recipe does."""

import shlex
from pathlib import Path

from reasonkit.config import load_yaml
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import validate

ROOT = Path(__file__).resolve().parents[2]


def srun_commands() -> list[list[str]]:
    """Each ``srun distill run`` command of the README, its continuation lines joined, comments dropped."""
    commands, current = [], None
    for line in (ROOT / "README.md").read_text().splitlines():
        code = line.split("#")[0].strip()
        if current is None and code.startswith("srun distill run "):
            current = code.removeprefix("srun ")
        elif current is not None:
            current += " " + code
        if current is not None and not current.endswith("\\"):
            commands.append(shlex.split(current))
            current = None
        elif current is not None:
            current = current.removesuffix("\\")
    return commands


def global_batch(recipe_path: Path, overrides: list[str], step: str, out: Path) -> int:
    recipe = parse_recipe(load_yaml(recipe_path), str(recipe_path), overrides, out=str(out))
    config = next(p.config for p in validate(recipe) if p.step.name == step)
    return config.batch_size * config.grad_accum * (config.num_processes or 1)


def test_the_readmes_srun_example_keeps_the_recipes_global_batch(tmp_path):
    commands = srun_commands()
    assert commands, "the README's Slurm example is gone: this test reads it"
    for argv in commands:
        recipe, step = ROOT / argv[2], argv[argv.index("--only") + 1]
        sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        assert any(s.startswith(f"{step}.num_processes=") for s in sets), argv
        assert global_batch(recipe, sets, step, tmp_path) == global_batch(recipe, [], step, tmp_path), argv
