"""The one registry (stages.py): every recipe stage's run function has the one shape, read from its source (no stage
module is imported: some import torch or vLLM at their top)."""

import ast
from pathlib import Path

import pytest

import reasonkit
from reasonkit.stages import COMMANDS, REGISTRY, STAGES

ROOT = Path(reasonkit.__file__).resolve().parent


def _definition(target: str) -> ast.FunctionDef:
    module, name = target.split(":")
    path = ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


@pytest.mark.parametrize("name", sorted(STAGES))
def test_every_stage_runs_as_run_config_log(name):
    args = _definition(STAGES[name].run).args
    assert len(args.args) == 1, f"{name}: one positional argument, the config"
    log = next((a for a, d in zip(args.kwonlyargs, args.kw_defaults) if a.arg == "log"), None)
    assert log is not None, f"{name}: run(config, *, log=None) -> report"


def test_the_cli_and_the_runner_read_one_table():
    assert set(STAGES) | set(COMMANDS) == set(REGISTRY)
    assert all(REGISTRY[n] is STAGES[n] for n in STAGES) and all(REGISTRY[n] is COMMANDS[n] for n in COMMANDS)
