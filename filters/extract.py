r"""Answer extraction: the last ``\boxed{...}`` with balanced braces, else "the answer is" phrases.

Pure functions on strings, bounded in time whatever the input: at most :data:`MAX_TRIES` boxes
are examined (from the last), and a box whose content runs past :data:`MAX_ANSWER` characters is
reported as too long instead of being scanned to the end of a megabyte of braces.

>>> extract_answer(r"so \boxed{1} then \boxed{\frac{1}{2}}.")
('\\frac{1}{2}', None)
>>> extract_answer(r"\fbox{x^{2}}")
('x^{2}', None)
>>> extract_answer(r"\boxed{\{1, 2\}}")  # escaped braces do not count
('\\{1, 2\\}', None)
>>> extract_answer("Thus the final answer is $42$.")
('42', None)
>>> extract_answer("no answer here")
(None, 'no_answer')
>>> extract_answer(r"\boxed{" * 10_000)
(None, 'unbalanced_box')
"""

from __future__ import annotations

import re

#: Longest answer handed to a verifier; longer ones are not answers but runaway text.
MAX_ANSWER = 1000
#: Boxes examined, from the last, before giving up on an unbalanced tail.
MAX_TRIES = 8

_BOX = re.compile(r"\\(?:boxed|fbox)\b")
_ANSWER_IS = re.compile(
    r"(?:final answer|the answer|answer)\s*(?:is|:)\s*:?\s*(.{1,200}?)\s*(?:\.\s|\.?$|\n)",
    re.IGNORECASE,
)


def _balanced(text: str, open_at: int) -> tuple[str | None, str | None]:
    """Content of the brace group opening at ``text[open_at]`` (``'{'``)."""
    depth = 0
    i = open_at
    end = min(len(text), open_at + MAX_ANSWER + 2)
    while i < end:
        c = text[i]
        if c == "\\":
            i += 2  # \{ and \} are literal braces
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i], None
        i += 1
    return None, ("answer_too_long" if end < len(text) else "unbalanced_box")


def last_boxed(text: str) -> tuple[str | None, str | None]:
    r"""Content of the last balanced, non-empty ``\boxed{}`` / ``\fbox{}``, or ``(None, reason)``.

    >>> last_boxed(r"\boxed{3} and \boxed{4}")
    ('4', None)
    >>> last_boxed(r"\boxed{3} and \boxed{4")  # a torn last box: the one before it
    ('3', None)
    >>> last_boxed(r"\boxed 7")
    ('7', None)
    """
    starts = [m.end() for m in _BOX.finditer(text)]
    reason = None
    for pos in reversed(starts[-MAX_TRIES:]):
        j = pos
        while j < len(text) and text[j] == " ":
            j += 1
        if j < len(text) and text[j] == "{":
            content, why = _balanced(text, j)
        else:
            m = re.match(r"\s+([^\s$.,]+)", text[pos : pos + MAX_ANSWER])
            content, why = (m.group(1), None) if m else (None, "empty_box")
        if content is not None and content.strip():
            return content.strip(), None
        reason = reason or why or "empty_box"
    return None, reason


def answer_phrase(text: str) -> str | None:
    """The answer in the last "the answer is X" / "Answer: X" phrase, without ``$`` and a final period."""
    tail = text[-4000:]  # the phrase ends a response; never scan a megabyte with a regex
    matches = list(_ANSWER_IS.finditer(tail))
    if not matches:
        return None
    value = matches[-1].group(1).strip().strip("$").strip()
    value = re.sub(r"^\\\(|\\\)$", "", value).strip()
    return value.rstrip(".").strip() or None


def extract_answer(text: str | None) -> tuple[str | None, str | None]:
    """``(answer, None)`` or ``(None, reason)`` for a model response.

    The reason is one of ``no_answer``, ``empty_box``, ``unbalanced_box``, ``answer_too_long``.
    """
    if not text:
        return None, "no_answer"
    reason = None
    if "\\boxed" in text or "\\fbox" in text:
        answer, reason = last_boxed(text)
        if answer is not None:
            return answer, None
        if reason in ("answer_too_long", "unbalanced_box"):
            return None, reason
    phrase = answer_phrase(text)
    if phrase is not None:
        return phrase, None
    return None, reason or "no_answer"
