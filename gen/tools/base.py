"""Running tool calls: a model's call in, an observation out, never an exception.

A tool is any callable with typed arguments and a Google-style docstring (``Args:`` section), the
form ``transformers.utils.get_json_schema`` reads; so the same function is shown to the model by
the chat template, called here, and handed to TRL's ``GRPOTrainer(tools=[...])`` unchanged.

Every failure comes back to the model as an observation with an ``error`` kind, and is counted by
the caller: a trajectory records it, a run never crashes on it.

>>> def add(a: int, b: int) -> str:
...     '''Add two integers.
...
...     Args:
...         a: the first.
...         b: the second.
...     '''
...     return str(a + b)
>>> box = ToolBox([add])
>>> box.call("add", '{"a": 2, "b": 3}')
Observation(content='5', error=None)
>>> box.call("add", '{"a": 2}').error, box.call("mul", "{}").error, box.call("add", "{oops").error
('bad_arguments', 'unknown_tool', 'bad_arguments')
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from reasonkit.errors import UserError

# Error kinds an observation can carry (the ``tool_errors`` count of a trajectory sums them).
ERROR_KINDS = ("unknown_tool", "bad_arguments", "timeout", "tool_error")

# name -> "module:factory"; a factory takes the options of load_tools and returns the callable.
# Imported only when asked for, so listing tools (or `distill --help`) loads nothing heavy.
_FACTORIES = {
    "search": "reasonkit.gen.tools.search:make_search",
    "python": "reasonkit.gen.tools.python:make_python",
}
TOOL_NAMES = tuple(_FACTORIES)


class BadArguments(ValueError):
    """Raised by a tool whose arguments bind but make no sense (an empty query): ``ToolBox.call`` reports
    it as ``bad_arguments``. A ValueError, so TRL's ``GRPOTrainer(tools=...)``, which calls the tool
    directly, counts it as a tool failure too (an Observation returned would reach TRL as its repr)."""


@dataclass(frozen=True)
class Observation:
    """What the model reads back as the ``tool`` message; ``error`` is None on success."""

    content: str
    error: str | None = None


class ToolBox:
    """The tools of one run, by name; ``call`` executes one call from a model's output."""

    def __init__(self, tools: Iterable[Callable]):
        self.tools: dict[str, Callable] = {}
        for tool in tools:
            name = getattr(tool, "__name__", None)
            if not name or not callable(tool):
                raise TypeError(f"a tool must be a named callable, got {tool!r}")
            self.tools[name] = tool

    def schemas(self) -> list[dict]:
        """The JSON schemas a chat template renders (``{"type": "function", "function": {...}}``)."""
        from transformers.utils import get_json_schema

        return [get_json_schema(tool) for tool in self.tools.values()]

    def call(self, name: str, arguments: str | dict | None) -> Observation:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return Observation(f"error: unknown tool {name!r} (tools: {known})", "unknown_tool")
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
            inspect.signature(tool).bind(**args)
        except (ValueError, TypeError) as e:
            return Observation(f"error: bad arguments for {name}: {e}", "bad_arguments")
        try:
            result = tool(**args)
        except BadArguments as e:
            return Observation(f"error: bad arguments for {name}: {e}", "bad_arguments")
        except TimeoutError as e:
            return Observation(f"error: {name} timed out: {e}", "timeout")
        except Exception as e:  # a tool's own failure is the model's observation, not the run's crash
            return Observation(f"error: {name} failed: {type(e).__name__}: {e}", "tool_error")
        if isinstance(result, Observation):
            return result
        return Observation(str(result))


def load_tools(names: str | Iterable[str], **options) -> ToolBox:
    """The shipped tools by name (``"search,python"``); ``options`` go to every factory that takes them
    (``corpus=`` for search, ``timeout=`` for python). An unknown name is the user's error."""
    import importlib

    wanted = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    wanted = [n for n in wanted if n]
    if not wanted:
        raise UserError(f"--tools: no tool named; expected one or more of {', '.join(TOOL_NAMES)}")
    for name in wanted:  # every name checked before any tool is built (a search index takes a while)
        if name not in _FACTORIES:
            raise UserError(f"--tools: unknown tool {name!r}; expected one of {', '.join(TOOL_NAMES)}")
    tools = []
    for name in wanted:
        module, factory_name = _FACTORIES[name].split(":")
        factory = getattr(importlib.import_module(module), factory_name)
        accepted = inspect.signature(factory).parameters
        tools.append(factory(**{k: v for k, v in options.items() if k in accepted}))
    return ToolBox(tools)
