"""The ``distill`` command line: a click group whose subcommands load only when run.

Each stage owns its command next to its code (``reasonkit.gen.command:generate`` and so on); the spine's
registry (stages.py, which the recipe runner reads too) maps names to those places. Nothing heavy is imported
until a command actually runs, so ``distill --help`` is instant (tests/test_cli.py holds it under one second).

Bad input surfaces as :class:`reasonkit.errors.UserError`: one line on stderr, exit status 2, never a
traceback (options.ExitOnUserError, which the group below holds).
"""

from __future__ import annotations

import click

from reasonkit import __version__
from reasonkit.options import ExitOnUserError
from reasonkit.stages import COMMANDS, load


class LazyGroup(ExitOnUserError, click.Group):
    """A group that imports a subcommand's module only when that subcommand is invoked; a UserError from
    any of them is one line and exit 2 (options.ExitOnUserError)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        spec = COMMANDS[name]
        command = load(spec.command)
        command.short_help = command.short_help or spec.help
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing reads the registry's help lines, so `distill --help` imports no stage module at all.
        with formatter.section("Commands"):
            formatter.write_dl([(name, spec.help) for name, spec in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="distill")
def cli() -> None:
    """reasonkit: distil reasoning models, one verified stage at a time.

    \b
    generate -> filter -> pairs / critique -> train -> eval -> push
    Every stage reads and writes Parquet stage directories and resumes after a crash.
    """


def main() -> None:
    cli(prog_name="distill")


if __name__ == "__main__":
    main()
