"""A command's click options, generated from its config's fields (config.setting): one declaration per setting.

A field gives the flag's name (``top_p`` -> ``--top-p``), its type (``Literal`` -> a choice, ``bool`` ->
a flag, ``tuple[str, ...]`` -> repeatable), its default and its help; a field's metadata says the rest
(config.setting lists the keys). So adding a sampling option is one field of gen/settings.py's
``SamplingSettings``: generate, eval, judge, critique and label-steps take the flag, the YAML key and ``--set``
from it, and every request carries it (gen/settings.Sampling).

A command hands only the flags the user gave to the config (:func:`given`), so a YAML or a recipe's
value is never overridden by a flag's default, and a default lives in the dataclass alone.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Union

import click

from reasonkit.errors import UserError

#: click's name for a nested config's flag: ``columns.id`` travels as ``columns__id``.
_NEST = "__"


class IntOrChoice(click.ParamType):
    """A positive integer or one of a few words (``--data-parallel 4`` or ``auto``)."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = tuple(words)
        self.name = "N|" + "|".join(self.words)

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value in self.words:
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r}: expected a number or {' or '.join(self.words)}", param, ctx)


def config_options(cls: type, *, exclude: Iterable[str] = (), required: Iterable[str] = ()) -> Callable:
    """A decorator adding one option per field of the dataclass ``cls`` (declaration order, as ``--help`` lists them).

    ``exclude``: fields this command does not offer as flags (still YAML and ``--set`` keys).
    ``required``: fields click itself requires (others may come from a YAML).
    """
    options = list(_options(cls, set(exclude), set(required), ""))

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _options(cls: type, exclude: set[str], required: set[str], prefix: str):
    hints = typing.get_type_hints(cls)
    for f in _in_help_order(cls):
        meta = f.metadata
        if not f.init or f.name in exclude or meta.get("cli") is False or "help" not in meta:
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint) and "flags" in meta:  # columns -> --id-col, --problem-col, ...
            for inner in dataclasses.fields(hint):
                if "help" in inner.metadata:
                    yield _option(
                        inner,
                        typing.get_type_hints(hint)[inner.name],
                        f"{prefix}{f.name}{_NEST}",
                        meta["flags"].format(inner.name.replace("_", "-")),
                        False,
                    )
            continue
        yield _option(f, hint, prefix, None, f.name in required)


def _in_help_order(cls: type) -> list[dataclasses.Field]:
    """The stage's own fields first (its inputs and outputs), then each shared group's, as the bases list them."""
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    order = [name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {}) if name in by_name]
    return [by_name[name] for name in dict.fromkeys(order)]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _option(f: dataclasses.Field, hint: Any, prefix: str, flag: str | None, required: bool):
    meta = f.metadata
    decl = meta.get("flag") or flag or "--" + f.name.replace("_", "-")
    kwargs: dict[str, Any] = {"help": meta["help"] or None}
    default = _default(f)
    hint = _strip_none(hint)
    ptype, multiple = _type(hint, meta)
    if hint is bool:
        if "flag_value" in meta:  # --response-only sets include_reasoning to False; unset: the field's default
            kwargs.update(flag_value=meta["flag_value"], default=None)
        elif "/" in decl:
            kwargs.update(default=default)
        else:
            kwargs.update(is_flag=True, default=default)
    else:
        if multiple:
            kwargs["multiple"] = True
        elif default is not None and not required:  # a required flag has no default: click would fill it in
            # shown, unless the help says it in words (a newline)
            kwargs.update(default=default, show_default=meta.get("show_default", True))
        kwargs["type"] = ptype
        if "metavar" in meta:
            kwargs["metavar"] = meta["metavar"]
    if required:
        kwargs["required"] = True
    return click.option(*decl.split(" "), prefix + f.name, **kwargs)


def _strip_none(hint: Any) -> Any:
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        return Union[tuple(args)]  # noqa: UP007 (a union built at run time: `|` takes two operands)
    return hint


def _type(hint: Any, meta: typing.Mapping) -> tuple[Any, bool]:
    """The click type of a field, and whether the flag repeats."""
    if "choices" in meta:
        return click.Choice(list(meta["choices"])), bool(meta.get("multiple"))
    if meta.get("path"):
        return click.Path(file_okay=meta["path"] != "dir"), False
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return click.Choice(list(args)), False
    if origin in (Union, types.UnionType):  # int | Literal["auto"]
        words = [w for a in args if typing.get_origin(a) is Literal for w in typing.get_args(a)]
        if int in args and words:
            return IntOrChoice(words), False
        return click.STRING, False
    if origin in (tuple, list):
        inner, _ = _type(args[0] if args else str, {})
        return inner, True
    return {int: click.INT, float: click.FLOAT, str: click.STRING}.get(hint, click.STRING), False


def given(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The options the user gave (not their defaults), as a nested mapping of config keys.

    >>> given(None, {"top_p": 0.9, "columns__id": "qid", "tools": None})
    {'top_p': 0.9, 'columns': {'id': 'qid'}}
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        if ctx is not None and ctx.get_parameter_source(name) in (
            click.core.ParameterSource.DEFAULT,
            click.core.ParameterSource.DEFAULT_MAP,
            None,
        ):
            continue
        if ctx is None and value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        node = out
        *parents, leaf = name.split(_NEST)
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


class UsageFailure(click.ClickException):
    """How a UserError leaves the CLI: ``error: <message>`` on stderr, exit 2."""

    exit_code = UserError.exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


class ExitOnUserError:
    """The one place a :class:`~reasonkit.errors.UserError` becomes one line on stderr and exit status 2.

    cli.py's group holds it, so every ``distill`` command has it; a stage command holds it too
    (:class:`Command`, :class:`Group`), so it behaves the same when run on its own (``python -m``, tests).
    """

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as e:
            raise UsageFailure(str(e)) from None


class Command(ExitOnUserError, click.Command):
    """A stage's command: a UserError exits 2 with one line."""


class Group(ExitOnUserError, click.Group):
    """A stage's group of commands (``distill eval``, ``eval compare``): a UserError exits 2 with one line."""
