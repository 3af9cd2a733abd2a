"""The one exception type that reaches the user as a message instead of a traceback. Imports nothing:
the CLI turns it into ``error: <message>`` and exit 2 in one place (options.py's ``ExitOnUserError``)."""


class UserError(Exception):
    """Bad input the user can fix: the CLI prints ``error: <message>`` on stderr and exits 2.

    The message must name what is wrong and where (file, row, column or key) and what was
    expected, in one line. One error may carry several problems (a config's every bad field, a recipe's every
    bad step: ``problems``), each such a line; its message joins them with "; ".

    >>> e = UserError("lr: expected a number > 0, found -1", "epochs: expected a number > 0, found 0")
    >>> str(e), len(e.problems)
    ('lr: expected a number > 0, found -1; epochs: expected a number > 0, found 0', 2)
    """

    exit_code = 2

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(map(str, problems)))
        self.problems = [str(p) for p in problems]


class FieldErrors(UserError):
    """A config's problems: ``fields``, each starting at the field it names (``lr: expected a number > 0, found -1``),
    so that whoever built the config puts the config's own path before each (config.from_dict:
    ``steps[3].with.lr: ...``); ``whole``, lines a shared check wrote whole (``--engine 'x': expected ...``)."""

    def __init__(self, fields: list[str], whole: list[str] = ()) -> None:
        super().__init__(*fields, *whole)
        self.fields, self.whole = list(fields), list(whole)
