"""options.py: options generated from a config's fields, and the one place a UserError becomes exit 2."""

import ast
import dataclasses
from pathlib import Path
from typing import Literal

import click
from click.testing import CliRunner

import reasonkit
from reasonkit import options
from reasonkit.config import setting
from reasonkit.errors import UserError


def test_errors_imports_nothing():
    tree = ast.parse((Path(reasonkit.__file__).parent / "errors.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Demo:
    out: str = setting(help="Where.")
    mode: Literal["a", "b"] = setting("a", "Which.")
    replicas: int | Literal["auto"] = setting(1, "How many.")
    tags: tuple[str, ...] = setting((), "Repeatable.")
    fast: bool = setting(False, "A flag.")
    hidden: int = setting(3, cli=False)


@click.command(cls=options.Command)
@options.config_options(Demo, required=("out",))
@click.pass_context
def demo(ctx, **flags):
    given = options.given(ctx, flags)
    if given.get("mode") == "b":
        raise UserError("mode b: not here")
    click.echo(repr(given))


def test_a_field_becomes_its_flag_and_only_given_flags_reach_the_config():
    result = CliRunner().invoke(demo, ["--out", "o", "--replicas", "auto", "--tags", "x", "--tags", "y", "--fast"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "{'out': 'o', 'replicas': 'auto', 'tags': ['x', 'y'], 'fast': True}"
    assert "--hidden" not in CliRunner().invoke(demo, ["--help"]).output
    assert CliRunner().invoke(demo, ["--out", "o", "--mode", "c"]).exit_code == 2  # a choice from the Literal
    assert CliRunner().invoke(demo, ["--out", "o", "--replicas", "many"]).exit_code == 2


def test_a_required_flag_stays_required_though_its_field_has_a_default():
    @click.command()
    @options.config_options(Demo, required=("mode",))
    def command(**flags):
        pass

    result = CliRunner().invoke(command, ["--out", "o"])
    assert result.exit_code == 2 and "Missing option '--mode'" in result.output


def test_a_user_error_of_a_command_run_on_its_own_is_one_line_and_exit_2():
    result = CliRunner().invoke(demo, ["--out", "o", "--mode", "b"])
    assert result.exit_code == 2 and result.output == "error: mode b: not here\n"
