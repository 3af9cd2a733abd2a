"""The one exception type that reaches the user as a message instead of a traceback, and how it leaves the CLI."""

import click


class UserError(Exception):
    """Bad input the user can fix: the CLI prints ``error: <message>`` on stderr and exits 2.

    The message must name what is wrong and where (file, row, column or key) and what was
    expected, in one line.
    """

    exit_code = 2


class UsageFailure(click.ClickException):
    """How a UserError leaves the CLI: ``error: <message>`` on stderr, exit 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)
