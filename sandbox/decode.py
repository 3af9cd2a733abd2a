"""The one decoder for anything a sandboxed program could have written (stdlib only).

A program's output, the values its functions return (as JSON), and every record that travels out of
the sandbox are read here, with bounds on size and nesting, so that whatever bytes a program produces
end as :class:`Unreadable` (a verdict for the caller: ``bad_output``), never as ``RecursionError``,
``MemoryError`` or a ``TypeError`` further on.

>>> loads('{"test": 0, "output": "3"}', max_chars=100)
{'test': 0, 'output': '3'}
>>> for text, cap in (("[" * 100_000, 1 << 20), ('"x' * 10, 8)):
...     try:
...         loads(text, max_chars=cap)
...     except Unreadable as e:
...         print("Unreadable:", e)
Unreadable: nested deeper than 64 levels
Unreadable: 20 characters, more than 8
"""

from __future__ import annotations

import json
import re

MAX_DEPTH = 64  # deeper than any value a test set expects; json and same_value recurse once a level
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


class Unreadable(ValueError):
    """Bytes that are no value within the bounds (too long, too deep, not JSON)."""


def depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside strings do not count)."""
    deepest = level = 0
    for m in _BRACKETS.finditer(_STRING.sub("", text)):
        level += 1 if m.group() in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def loads(text: str | bytes, *, max_chars: int, max_depth: int = MAX_DEPTH):
    """``text`` as a JSON value, or Unreadable: longer than ``max_chars``, nested deeper than
    ``max_depth``, or not JSON (an integer of more digits than Python converts included)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if len(text) > max_chars:
        raise Unreadable(f"{len(text)} characters, more than {max_chars}")
    # The exact count only where it could matter: counting brackets is C-fast, the scan is not.
    if text.count("[") + text.count("{") > max_depth and depth(text) > max_depth:
        raise Unreadable(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError, MemoryError) as e:
        raise Unreadable(f"not JSON: {str(e)[:100]}") from None
