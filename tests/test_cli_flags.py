"""Every command's flags, pinned: names, types, choices, defaults, required-ness (issue 39 item 1).

The options are generated from the stage configs' fields; this snapshot proves that a refactor of
that wiring moved no flag. A default shown only in the help text (``[default: 64]``, the value the
config applies when the flag is not given) counts as the flag's default, so a flag whose default
moved from the help text into click itself reads the same.

To accept a deliberate change: ``REASONKIT_UPDATE_FLAGS=1 pytest tests/test_cli_flags.py`` and
review the diff of tests/cli_flags.json.
"""

import json
import os
import re
from pathlib import Path

import click
import pytest

from reasonkit.cli import COMMANDS, cli

SNAPSHOT = Path(__file__).with_name("cli_flags.json")


def _commands():
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        yield name, command
        for sub in getattr(command, "commands", {}).values():
            yield f"{name} {sub.name}", sub


def _unset(value) -> bool:
    """click 8.3 marks "no value given" with a sentinel; earlier versions with None."""
    return value is None or type(value).__name__ == "Sentinel"


def _default(param: click.Parameter) -> str | None:
    default = param.default
    if _unset(default) or default == ():
        shown = re.search(r"\[default: ([^\]]*)\]", getattr(param, "help", None) or "")
        return shown.group(1) if shown else None
    if callable(default):
        return "<computed>"
    return str(list(default) if isinstance(default, tuple) else default)


def _describe(param: click.Parameter) -> str:
    kind = "argument" if isinstance(param, click.Argument) else "option"
    ptype = param.type
    if isinstance(ptype, click.Choice):
        type_name = "choice(" + "|".join(map(str, ptype.choices)) + ")"
    else:
        type_name = ptype.name
    parts = [kind, type_name]
    if getattr(param, "is_flag", False):
        parts.append("flag" if not param.secondary_opts else "on/off")
        default = False if _unset(param.default) else bool(param.default)
        if not _unset(param.flag_value) and param.flag_value is not True:
            parts.append(f"flag_value={param.flag_value}")
        parts.append(f"default={default}")
    else:
        parts.append(f"default={_default(param)}")
    if param.multiple:
        parts.append("multiple")
    if param.required:
        parts.append("required")
    return " ".join(parts)


def _flags(command: click.Command) -> dict[str, str]:
    flags = {}
    for param in command.params:
        if isinstance(param, click.Argument):
            flags[param.name.upper()] = _describe(param)
        elif param.name != "help":
            flags["/".join(param.opts + param.secondary_opts)] = _describe(param)
    return dict(sorted(flags.items()))


def _all() -> dict[str, dict[str, str]]:
    return {name: _flags(command) for name, command in _commands()}


def test_every_commands_flags_are_as_pinned():
    now = _all()
    if os.environ.get("REASONKIT_UPDATE_FLAGS"):
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(SNAPSHOT.read_text())
    assert sorted(now) == sorted(pinned), "commands added or removed"
    for name in pinned:
        assert now[name] == pinned[name], f"distill {name}: flags moved"


@pytest.mark.parametrize("name", sorted({n for n, _ in _commands()}))
def test_every_command_prints_its_help(name):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
