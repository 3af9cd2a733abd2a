r"""Answer extraction: the final ``\boxed{...}`` (or run of boxes), else "the answer is" phrases.

What counts as the answer, in order:

1. A "final answer is X" phrase after the last box, naming a value (``$X$``, ``\(X\)`` or a
   number): the response revised its answer after boxing it.
2. The last box, with the boxes just before it that only connectors separate from it (and, or,
   commas, spacing, math delimiters, "for part (a)", a ``y_2 =`` label): ``\boxed{1}, \boxed{2}``
   is the answer set ``1, 2``, as math-verify reads it. A box followed by more work is not part of
   the answer (R1's rule: an intermediate box is not the final answer).
3. A torn or empty last box is no answer (the response was cut while boxing it), never the box
   before it.
4. No box: a "final answer is X" phrase, else the answer where math-verify's default ``parse``
   looks for one (an "answer is" phrase, the last LaTeX expression, a bare last value), read as
   :mod:`~reasonkit.filters.math.unboxed` reads it. ``--require-boxed`` is a format rule (filters/format.py),
   not part of extraction.

Pure functions on strings, bounded in time whatever the input: at most :data:`MAX_TRIES` boxes
are joined, and a box whose content runs past :data:`MAX_ANSWER` characters is reported as too
long instead of being scanned to the end of a megabyte of braces.

>>> extract_answer(r"so \boxed{1} then \boxed{\frac{1}{2}}.")
('\\frac{1}{2}', None)
>>> extract_answer(r"\fbox{x^{2}}")
('x^{2}', None)
>>> extract_answer(r"\boxed{\{1, 2\}}")  # escaped braces do not count
('\\{1, 2\\}', None)
>>> extract_answer(r"$\boxed{(1, 2)}, \boxed{(2, 1)}$")
('(1, 2), (2, 1)', None)
>>> extract_answer(r"$\boxed{255}$, so $10,200 + 255 = 10,455$. The final answer is $10,455$.")
('10,455', None)
>>> extract_answer(r"\boxed{3}, then a torn \boxed{4")
(None, 'unbalanced_box')
>>> extract_answer("Thus the final answer is $42$.")
('42', None)
>>> extract_answer("no answer here")
(None, 'no_answer')
>>> extract_answer(r"\boxed{" * 10_000)
(None, 'unbalanced_box')
"""

from __future__ import annotations

import re

from reasonkit.filters.math.unboxed import unboxed_answer

#: Longest answer handed to a verifier; longer ones are not answers but runaway text.
MAX_ANSWER = 1000
#: Most boxes joined into one answer set (and examined, from the last).
MAX_TRIES = 8
#: Longest text between two boxes that can still be a connector ("\quad \text{ for part (a) and } \quad").
MAX_GAP = 80

BOX = re.compile(r"\\(?:boxed|fbox)\b")
# After the last box only a phrase that names a value and ends with it revises the answer: "The
# final answer is $10,455$.", "final answer is 15.", "Final Answer: \(42\)"; never "I hope the
# answer is correct", nor "the final answer is $12$ and $13$".
_FINAL_IS = re.compile(
    r"final answer\W{0,4}(?:is\b)?\W{0,4}?"
    r"(?:\$\$?([^$]{1,200}?)\$\$?|\\\((.{1,200}?)\\\)|\\\[(.{1,200}?)\\\]|([-+]?\d+(?:,\d{3})*(?:\.\d+)?))"
    r"(?=[\s\"'*]*(?:[.;!]|\n|$))",  # the value ends the phrase: "$12$ and $13$" names no one value
    re.IGNORECASE | re.DOTALL,
)
# Text that may sit between boxes of one answer set, once \text{...} wrappers are unwrapped.
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")
_CONNECTOR = re.compile(
    r"(?:\s+|[,;&~$]|\\[()\[\]]|\\q?quad\b|\\[,;:! ]|\\\\"
    r"|(?:and|or)\b|(?:(?:for|in)\s+)?(?:parts?\s*)?\([a-z0-9]{1,3}\)"
    r"|[A-Za-z](?:_\{?[A-Za-z0-9]{1,3}\}?)?\s*=)*",
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


def _box_at(text: str, pos: int) -> tuple[str | None, str | None, int]:
    """``(content, reason, end)`` of the box whose command ends at ``pos``."""
    j = pos
    while j < len(text) and text[j] == " ":
        j += 1
    if j < len(text) and text[j] == "{":
        content, why = _balanced(text, j)
        end = j + len(content) + 2 if content is not None else len(text)
    else:  # \boxed 7
        m = re.match(r"\s+([^\s$.,]+)", text[pos : pos + MAX_ANSWER])
        content, why = (m.group(1), None) if m else (None, "empty_box")
        end = pos + m.end() if m else pos
    if content is not None and not content.strip():
        return None, "empty_box", end
    return (content.strip() if content is not None else None), why, end


def _connects(gap: str) -> bool:
    """Whether ``gap`` (the text between two boxes) only joins them into one answer set."""
    return len(gap) <= MAX_GAP and _CONNECTOR.fullmatch(_TEXT_WRAPPER.sub(r" \1 ", gap)) is not None


def final_boxes(text: str) -> tuple[str | None, str | None, int]:
    r"""``(answer, reason, end)``: the last box joined with the boxes connected to it, or
    ``(None, reason, end)`` when the last box is torn or empty; ``end`` is where the last box ends.

    >>> final_boxes(r"\boxed{1} and \boxed{2}")[:2]
    ('1, 2', None)
    >>> final_boxes(r"\boxed{1}. Adding one more gives \boxed{2}")[:2]
    ('2', None)
    >>> final_boxes(r"\boxed{7} " * 300 + r"\boxed{13}")[:2]  # a repetition, not a set: the last box
    ('13', None)
    >>> final_boxes(r"\boxed{1} and \boxed{}")[:2]
    (None, 'empty_box')
    """
    starts = [(m.start(), m.end()) for m in BOX.finditer(text)]
    if not starts:
        return None, "no_answer", 0
    answers: list[str] = []
    last_end = None
    next_start = None
    # One box more than can be joined is read: a run that long, or one that boxes a value twice, is
    # a repetition (a degenerate loop, "\boxed{7}" x 300 then "\boxed{13}"), not an answer set:
    # then the last box alone is the answer.
    for start, pos in reversed(starts[-(MAX_TRIES + 1) :]):
        content, why, end = _box_at(text, pos)
        if last_end is None:
            last_end = end
            if content is None:
                return None, why, last_end
        elif content is None or end > next_start or not _connects(text[end:next_start]):
            break
        elif content in answers or len(answers) == MAX_TRIES:
            return answers[-1], None, last_end
        answers.insert(0, content)
        next_start = start
    return ", ".join(answers), None, last_end


def last_boxed(text: str) -> tuple[str | None, str | None]:
    r"""Content of the last ``\boxed{}`` / ``\fbox{}``, or ``(None, reason)`` if it is torn or empty.

    >>> last_boxed(r"\boxed{3} and \boxed{4}")
    ('4', None)
    >>> last_boxed(r"\boxed{3} and \boxed{4")  # a torn last box is no answer, not the one before it
    (None, 'unbalanced_box')
    >>> last_boxed(r"\boxed 7")
    ('7', None)
    """
    starts = list(BOX.finditer(text))
    if not starts:
        return None, "no_answer"
    content, why, _ = _box_at(text, starts[-1].end())
    return (content, None) if content is not None else (None, why)


def _clean(value: str) -> str | None:
    value = value.strip().strip("$").strip()
    value = re.sub(r"^\\\(|\\\)$", "", value).strip()
    return value.rstrip(".").strip() or None


def final_phrase(text: str) -> str | None:
    """The value of the last "final answer is X" phrase in ``text`` that names one."""
    matches = list(_FINAL_IS.finditer(text[-4000:]))
    if not matches:
        return None
    return _clean(next(g for g in matches[-1].groups() if g is not None))


def extract_answer(text: str | None) -> tuple[str | None, str | None]:
    """``(answer, None)`` or ``(None, reason)`` for a model response.

    The reason is one of ``no_answer``, ``empty_box``, ``unbalanced_box``, ``answer_too_long``.
    """
    if not text:
        return None, "no_answer"
    if "\\boxed" in text or "\\fbox" in text:
        answer, reason, end = final_boxes(text)
        revised = final_phrase(text[end:]) if end < len(text) else None
        if revised is not None:
            return revised, None
        if reason != "no_answer":  # "\\boxedx" is no box: look for a phrase
            return answer, reason
    # No box: a "final answer is X" phrase, else where math-verify looks (filters/math/unboxed.py).
    phrase = final_phrase(text)
    if phrase is None:
        phrase = unboxed_answer(text)
    if phrase is not None and len(phrase) <= MAX_ANSWER:
        return phrase, None
    return None, "no_answer"
