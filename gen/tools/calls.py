"""Tool calls in a model's turn, and the three shapes a tool-use conversation takes.

The decided format is Hermes' (TRL's Qwen2.5 template, vLLM's ``hermes`` parser): a turn is some text,
then one or more ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` blocks.
:func:`parse_turn` splits a generated turn into its content and calls; a call whose JSON does not
parse is kept with its ``error`` set, so the loop answers it with a ``bad_arguments`` observation
instead of crashing.

>>> turn = parse_turn('Let me look.\\n<tool_call>\\n{"name": "search", "arguments": {"query": "Vell"}}\\n</tool_call>')
>>> turn.content, turn.calls
('Let me look.', [ToolCall(name='search', arguments='{"query": "Vell"}', error=None)])
>>> parse_turn("The answer is 1987.")
Turn(content='The answer is 1987.', calls=[])

The same conversation is held three ways:

- stored (the ``trajectories`` table, schema.TOOL_MESSAGE): ``tool_calls`` a list of
  ``{"name", "arguments": JSON text}`` so Parquet never depends on a tool's signature, tool turns
  ``{"role": "tool", "name", "content"}``, absent keys as None;
- template (:func:`template_messages`: what ``apply_chat_template`` and TRL take): arguments as a dict;
- OpenAI (:func:`openai_messages`: what a chat-completions server takes): each call with an ``id`` and
  ``type``, arguments as JSON text, each tool turn naming the ``tool_call_id`` it answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)  # vLLM's hermes parser's regex
START = "<tool_call>"


@dataclass(frozen=True)
class ToolCall:
    """One call: ``arguments`` is JSON text (the model's own, re-serialised when it parsed).
    ``error`` says why the call cannot run (None: it can); the model reads it back as a
    ``bad_arguments`` observation."""

    name: str
    arguments: str
    error: str | None = None


@dataclass(frozen=True)
class Turn:
    content: str
    calls: list[ToolCall] = field(default_factory=list)


def parse_turn(text: str) -> Turn:
    """The content (text before the first ``<tool_call>``, stripped) and the calls of a turn.

    Several calls in one turn, a block left unclosed at the end (the turn stopped inside it), and
    JSON that does not parse are all handled; the last becomes a call with an error:

    >>> two = parse_turn('<tool_call>\\n{"name": "a", "arguments": {}}\\n</tool_call>\\n'
    ...                  '<tool_call>\\n{"name": "b", "arguments": {"x": 1}}\\n</tool_call>')
    >>> [(c.name, c.arguments) for c in two.calls], two.content
    ([('a', '{}'), ('b', '{"x": 1}')], '')
    >>> parse_turn('<tool_call>\\n{"name": "search", "arguments": {"query": "x"\\n</tool_call>').calls[0]
    ToolCall(name='search', arguments='{"name": "search", "arguments": {"query": "x"', error="not valid JSON (Expecting ',' delimiter)")
    >>> parse_turn('<tool_call>{"name": "search", "arguments": {"query": "x"}}').calls[0].arguments
    '{"query": "x"}'
    >>> parse_turn('<tool_call>\\n["search"]\\n</tool_call>').calls[0].error
    'expected {"name": ..., "arguments": {...}}'
    """  # noqa: E501
    start = text.find(START)
    if start < 0:
        return Turn(text.strip())
    calls = [parse_call(closed if closed else open_) for closed, open_ in _CALL.findall(text[start:])]
    return Turn(text[:start].strip(), calls)


def parse_call(body: str) -> ToolCall:
    """One ``<tool_call>`` block's JSON as a ToolCall (``arguments`` may itself be a JSON string,
    as some models write it).

    >>> parse_call('{"name": "python", "arguments": "{\\\\"code\\\\": \\\\"print(1)\\\\"}"}')
    ToolCall(name='python', arguments='{"code": "print(1)"}', error=None)
    """
    raw = body.strip()
    try:
        data = json.loads(raw)
    except ValueError as e:
        return ToolCall(_name_in(raw), raw, f"not valid JSON ({e.msg})")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCall(_name_in(raw), raw, 'expected {"name": ..., "arguments": {...}}')
    return call_from(data["name"], data.get("arguments", {}))


def call_from(name: str, arguments) -> ToolCall:
    """A call from a name and arguments given as a dict or as JSON text (a server's parsed call).

    >>> call_from("search", '{"query": "a"}'), call_from("search", "{oops").error
    (ToolCall(name='search', arguments='{"query": "a"}', error=None), 'arguments are not a JSON object')
    """
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return ToolCall(name, arguments, "arguments are not a JSON object")
    if not isinstance(arguments, dict):
        return ToolCall(name, json.dumps(arguments, ensure_ascii=False), "arguments are not a JSON object")
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False))


def _name_in(raw: str) -> str:
    """The tool name a broken call meant, when one can be read off it ("" otherwise)."""
    found = re.search(r'"name"\s*:\s*"([^"]*)"', raw)
    return found.group(1) if found else ""


# -- the three shapes ------------------------------------------------------------------------


def assistant_message(content: str, calls: Sequence[ToolCall]) -> dict:
    """A generated turn as stored (``tool_calls`` None for a final answer).

    >>> assistant_message("ok", [])
    {'role': 'assistant', 'content': 'ok', 'tool_calls': None, 'name': None}
    """
    stored = [{"name": c.name, "arguments": c.arguments} for c in calls] or None
    return {"role": "assistant", "content": content, "tool_calls": stored, "name": None}


def tool_message(name: str, content: str) -> dict:
    """An observation as stored."""
    return {"role": "tool", "content": content, "tool_calls": None, "name": name}


def stored_messages(messages: Iterable[dict]) -> list[dict]:
    """Prompt messages (role and content only) in the stored shape.

    >>> stored_messages([{"role": "user", "content": "hi"}])
    [{'role': 'user', 'content': 'hi', 'tool_calls': None, 'name': None}]
    """
    return [
        {
            "role": m["role"],
            "content": m.get("content") or "",
            "tool_calls": m.get("tool_calls"),
            "name": m.get("name"),
        }
        for m in messages
    ]


def template_messages(messages: Iterable[dict]) -> list[dict]:
    """Stored messages as chat templates (and TRL) take them: arguments as a dict, None keys dropped.

    >>> template_messages([{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}],
    ...                     "name": None}, {"role": "tool", "content": "2", "tool_calls": None, "name": "f"}])
    [{'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}}]}, {'role': 'tool', 'content': '2', 'name': 'f'}]
    """  # noqa: E501
    out = []
    for m in messages:
        message = {k: v for k, v in m.items() if v is not None and k != "tool_calls"}
        if m.get("tool_calls"):
            message["tool_calls"] = [
                {"type": "function", "function": {"name": c["name"], "arguments": _as_dict(c["arguments"])}}
                for c in m["tool_calls"]
            ]
        out.append(message)
    return out


def openai_messages(messages: Iterable[dict]) -> list[dict]:
    """Stored messages as a chat-completions request takes them: each call gets an ``id`` (made up
    here, deterministic: the stored shape keeps none) that the tool turns after it answer in order.

    >>> openai_messages([{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}],
    ...                   "name": None}, {"role": "tool", "content": "2", "tool_calls": None, "name": "f"}])
    [{'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'call_0_0', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"x": 1}'}}]}, {'role': 'tool', 'content': '2', 'name': 'f', 'tool_call_id': 'call_0_0'}]
    """  # noqa: E501
    out, unanswered = [], []
    for i, m in enumerate(messages):
        message = {k: v for k, v in m.items() if v is not None and k != "tool_calls"}
        if m.get("tool_calls"):
            ids = [f"call_{i}_{k}" for k in range(len(m["tool_calls"]))]
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for cid, c in zip(ids, m["tool_calls"])
            ]
            unanswered = ids
        elif m["role"] == "tool" and unanswered:
            message["tool_call_id"] = unanswered.pop(0)
        out.append(message)
    return out


def _as_dict(arguments: str):
    """JSON arguments as the object a template serialises (a broken call's text stays text)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
