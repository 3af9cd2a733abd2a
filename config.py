"""Configs: YAML and ``--set`` overrides -> frozen dataclasses, strictly.

An unknown key is an error that names its full path and the nearest known key, because a typo in
a recipe (``verifyy: int``) that silently falls back to a default costs a user a whole run.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Filter:
...     verify: str = "math"
...     min_lang_ratio: float = 0.95
>>> from_dict(Filter, {"verify": "int"}, "filter")
Filter(verify='int', min_lang_ratio=0.95)
>>> from_dict(Filter, {"verifyy": "int"}, "filter")
Traceback (most recent call last):
...
reasonkit.errors.UserError: filter.verifyy: unknown key; did you mean verify?
>>> override(Filter(), ["min_lang_ratio=0.9"])
Filter(verify='math', min_lang_ratio=0.9)
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

from reasonkit.errors import FieldErrors, UserError

T = TypeVar("T")


def setting(
    default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING, **meta: Any
) -> Any:
    """A config field that carries its own help: the one place a setting is declared.

    The command's option is generated from it (options.py: flag name, type, choices and default from the
    field; ``help`` and ``meta`` from here), as TRL's ``SFTConfig`` and vLLM's ``EngineArgs`` do. ``meta``
    keys options.py reads: ``flag`` (the option's declaration when it is not ``--field-name``), ``path``
    (a file path: ``True``, or ``"dir"``), ``choices``, ``multiple``, ``flags`` (a nested config's
    flags, e.g. ``"--{}-col"``), ``flag_value`` (a flag that sets this value), ``metavar``, ``show_default``,
    ``cli=False`` (YAML and ``--set`` only). ``hash`` passes to the field.
    """
    hash_ = meta.pop("hash", None)
    return dataclasses.field(default=default, default_factory=factory, hash=hash_, metadata={"help": help, **meta})


def with_default(owner: type, name: str, default: Any) -> Any:
    """``owner``'s field ``name`` with another default (a judge samples at temperature 0), help kept."""
    original = owner.__dataclass_fields__[name]
    return dataclasses.field(default=default, hash=original.hash, metadata=original.metadata)


@dataclasses.dataclass(frozen=True)
class ColumnMap:
    """Which input columns hold the contract's fields (``--id-col``, ``--problem-col``, ...)."""

    id: str = setting("id", "Input column holding ids.")
    problem: str = setting("problem", "Input column holding problem text.")
    answer: str = setting("answer", "Input column holding reference answers.")
    messages: str = setting("messages", "Input column holding chat messages.")
    source: str = setting("source", "Input column naming each prompt's source.")


def load_yaml(path: str | os.PathLike) -> dict:
    """A YAML mapping from ``path``; a missing file or a parse error is one clear UserError."""
    import yaml

    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    try:
        data = yaml.safe_load(text)  # safe_load: a recipe never calls Python
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{path}:{where} invalid YAML ({getattr(e, 'problem', e)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping at the top level, found {type(data).__name__}")
    return data


def load_json_object(path: str | os.PathLike) -> dict:
    """A JSON object from ``path`` (a model's config.json, a stage's report); anything else is one UserError line."""
    import json

    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: unreadable ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


def from_dict(cls: type[T], data: Mapping[str, Any] | None, path: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``, checking keys and types recursively.

    Every problem is found before one :class:`UserError` names them all, each at its field's path: the unknown keys,
    the values of the wrong type, and what the config's own checks (:class:`Checks`) say.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Step:
    ...     n: int = 1
    ...     lr: float = 0.1
    ...     def __post_init__(self):
    ...         check = Checks()
    ...         check(self.lr > 0, "lr", f"expected a number > 0, found {self.lr}")
    ...         check.done()
    >>> from_dict(Step, {"n": "two", "lr": -1, "seed": 0}, "steps[3].with")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: steps[3].with.seed: unknown key; expected one of n, lr; steps[3].with.n: expected an integer, found 'two'
    >>> from_dict(Step, {"lr": -1}, "steps[3].with")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: steps[3].with.lr: expected a number > 0, found -1.0
    """  # noqa: E501
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise UserError(f"{path or cls.__name__}: expected a mapping, found {type(data).__name__} {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    unknown = [f"{_join(path, key)}: unknown key{suggest(str(key), fields)}" for key in data if key not in fields]
    values, wrong = {}, []
    for name, value in data.items():
        if name in fields:
            try:
                values[name] = _coerce(value, hints[name], _join(path, name))
            except UserError as e:
                wrong += e.problems
    if wrong:  # the config's own checks need every value well typed: they run once these are fixed
        raise UserError(*unknown, *wrong)
    try:
        config = cls(**values)
    except TypeError as e:  # a required field without a value
        raise UserError(*unknown, f"{path or cls.__name__}: {e}") from None
    except FieldErrors as e:  # the config's own checks (Checks): each problem starts at its field
        raise UserError(*unknown, *(_join(path, p) for p in e.fields), *e.whole) from None
    except ValueError as e:  # a parser a config's property calls (a GPU list, a tracker's name) says what is wrong
        raise UserError(*unknown, f"{path or cls.__name__}: {e}") from None
    if unknown:
        raise UserError(*unknown)
    return config


class Checks:
    """A config's checks (its ``__post_init__``): each failed one names its field, and :meth:`done` raises them all
    as one :class:`UserError`; :func:`from_dict` puts the config's path before each (``steps[3].with.lr: ...``).

    >>> check = Checks()
    >>> check(1 > 0, "n", "expected at least 1, found 1")
    >>> check(-1 > 0, "lr", "expected a number > 0, found -1")
    >>> check.done()
    Traceback (most recent call last):
    ...
    reasonkit.errors.FieldErrors: lr: expected a number > 0, found -1
    """

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.whole: list[str] = []  # what shared checks said, each line whole

    def __call__(self, ok: bool, field: str, message: str) -> None:
        if not ok:
            self.problems.append(f"{field}: {message}")

    def run(self, check: Callable[[], None]) -> None:
        """Run a check that raises a UserError of its own (a helper shared by several configs); keep what it says."""
        try:
            check()
        except FieldErrors as e:
            self.problems += e.fields
            self.whole += e.whole
        except UserError as e:
            self.whole += e.problems

    def done(self) -> None:
        if self.problems or self.whole:
            raise FieldErrors(self.problems, self.whole)


def override(config: T, assignments: Sequence[str], path: str = "") -> T:
    """Apply ``key=value`` (or ``a.b=value`` for nested configs) assignments; values parse as YAML."""
    data = to_dict(config)
    for item in assignments:
        key, value = parse_assignment(item)
        set_path(data, key.split("."), value, item)
    return from_dict(type(config), data, path)


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"a.b=0.5"`` -> ``("a.b", 0.5)``; the value is parsed as YAML (``true``, ``[1, 2]``, ``null``)."""
    import yaml

    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise UserError(f"--set {item!r}: expected KEY=VALUE")
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def set_path(data: dict, keys: list[str], value: Any, origin: str) -> None:
    node = data
    for i, key in enumerate(keys[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            raise UserError(f"--set {origin}: {'.'.join(keys[: i + 1])} is not a section")
        node = nxt
    node[keys[-1]] = value


def to_dict(config: Any) -> dict:
    return dataclasses.asdict(config)


def _coerce(value: Any, hint: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if isinstance(hint, type) and hasattr(hint, "from_config"):  # a type that checks itself (gen/engine_args.py)
        return hint.from_config(value, path)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, path)
            except UserError as e:
                errors.append(e)
        raise errors[0]
    if origin is Literal:
        if value not in args:
            raise UserError(f"{path}: expected one of {', '.join(map(str, args))}; found {value!r}")
        return value
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, path)
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            value = [value]  # `decontam: evals.parquet` means a list of one
        inner = args[0] if args else Any
        items = [_coerce(v, inner, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or hint is tuple else items
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise UserError(f"{path}: expected a mapping, found {value!r}")
        return dict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise UserError(f"{path}: expected true or false, found {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise UserError(f"{path}: expected an integer, found {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise UserError(f"{path}: expected a number, found {value!r}")
    if hint is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise UserError(f"{path}: expected a string, found {value!r}")
    return value


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def suggest(key: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f"; expected one of {', '.join(known)}"
