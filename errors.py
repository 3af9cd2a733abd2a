"""The one exception type that reaches the user as a message instead of a traceback. Imports nothing:
the CLI turns it into ``error: <message>`` and exit 2 in one place (options.py's ``ExitOnUserError``)."""


class UserError(Exception):
    """Bad input the user can fix: the CLI prints ``error: <message>`` on stderr and exits 2.

    The message must name what is wrong and where (file, row, column or key) and what was
    expected, in one line.
    """

    exit_code = 2
