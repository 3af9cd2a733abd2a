r"""Arithmetic claims of a chain of thought, checked exactly: the "partial progress" a reward can see.

A claim is one ``=`` link of a chain of integer expressions written in the text: in
``3 * 8 + 7 * 4 + 5 = 24 + 28 + 5 = 52 + 5 = 57`` the links are ``3 * 8 + 7 * 4 + 5 = 24 + 28 + 5``,
``24 + 28 + 5 = 52 + 5`` and ``52 + 5 = 57``, each true or false on its own (adjacent sides only, so
one slip costs one link, and the steps computed correctly from it still count). A link counts only
when one of its sides does some arithmetic: ``x = 5`` or ``of 50 = 5`` claims nothing checkable.

What is read, and nothing else (no ``eval``):

- integers (``1776``, ``1,776`` with canonical thousands separators, at most :data:`MAX_DIGITS`
  digits), ``+``, ``-`` (and ``−``), ``*`` (and ``×``, ``·``, ``\times``, ``\cdot``), ``mod`` (and
  ``\bmod``), parentheses (``2(3 + 4)`` glued is a product), unary minus glued to a number;
- an expression touching text it cannot read is no side of a claim: ``x^2 + 3 = 7`` (after ``^``),
  ``2x + 3 = 7`` and ``x - 3 = 4`` (it starts mid-expression), ``f(3) = 9``, ``3.5 + 1 = 4.5``,
  ``1/2 + 1/2 = 1``, ``3! = 6``; so powers, fractions, decimals and variables make no claim, right
  or wrong;
- a chain runs along one line; a line that starts with ``=`` continues the one above; LaTeX math
  delimiters (``$``, ``\(``, ``\[``) are spacing.

Bounded on any input: operands past :data:`MAX_DIGITS` digits, values past :data:`MAX_BITS` bits,
parentheses deeper than :data:`MAX_DEPTH` and runs longer than :data:`MAX_RUN` characters are not
judged; at most :data:`MAX_CLAIMS` claims are read from one text.

What it cannot know: prose that changes a number before it is written (``half of 10 + 2 = 7``
reads as the false ``10 + 2 = 7``).

>>> score("7 * 8 = 56: units 6, carry 5\n3 * 8 + 7 * 4 + 5 = 24 + 28 + 5 = 52 + 5 = 57: tens 7")
(4, 4)
>>> score("37 * 48 = 1776\n1776 mod 1000 = 766")  # one slip
(1, 2)
>>> [(left, right, ok) for left, right, ok in claims(r"so $3 \times (4 + 1) = 15$, and 2^10 = 1024")]
[('3 \\times (4 + 1)', '15', True)]
>>> score("x^2 + 3 = 7, f(3) = 9, 10 = 10")  # nothing checkable
(0, 0)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

#: Longest operand read (longer ones make their expression unjudged, never a huge int() parse).
MAX_DIGITS = 50
#: Largest intermediate value (in bits, ~300 digits); products of big operands stop here.
MAX_BITS = 1000
#: Deepest parenthesis nesting parsed.
MAX_DEPTH = 16
#: Longest run of arithmetic characters examined (no reader checks a 4,000-character chain).
MAX_RUN = 4000
#: Most claims read from one text.
MAX_CLAIMS = 1000
#: Runs whose claims are remembered.
CACHE_SIZE = 65_536

# A run of characters arithmetic is written with. Commas only as thousands separators, newlines only
# before a continuing "=": anything else ends the run.
_RUN = re.compile(
    r"(?:[0-9()=+*×·⋅−\-]|[ \t]|\\[()\[\]]|,(?=[0-9]{3}(?![0-9]))|\n(?=[ \t]*=)"
    r"|(?<![A-Za-z\\])mod(?![A-Za-z])|\\bmod(?![A-Za-z])|\\times(?![A-Za-z])|\\cdot(?![A-Za-z]))+"
)
_DIGIT = re.compile("[0-9]")
_TOKEN = re.compile(
    r"(\s*)(?:(?P<delim>\\[()\[\]])|(?P<num>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)|(?P<add>[+\-−])|(?P<mul>[*×·⋅]|\\times|\\cdot)"
    r"|(?P<mod>mod|\\bmod)|(?P<lp>\()|(?P<rp>\))|(?P<eq>=)|(?P<other>\S))"
)
# Characters that, glued to a run, mean it starts or ends inside notation it does not read.
_GLUE_LEFT = set("^_/\\!%}]|.'")
_GLUE_RIGHT = set("^_/\\!%{[|")


class _Unjudged(Exception):
    """An expression this module does not evaluate."""


def _glued_left(text: str, start: int) -> bool:
    if start == 0:
        return False
    c = text[start - 1]
    if c.isalnum() or c in _GLUE_LEFT:
        return True
    return c in ":," and start > 1 and text[start - 2].isdigit()  # 3:4, (3,4)


def _glued_right(text: str, end: int) -> bool:
    if end >= len(text):
        return False
    c = text[end]
    if c.isalnum() or c in _GLUE_RIGHT:
        return True
    return c in ".:," and end + 1 < len(text) and text[end + 1].isdigit()  # 3.5, 6:8


class _Parser:
    """Recursive descent over one expression's tokens ``(kind, text, spaced)``; counts its operations."""

    def __init__(self, tokens: list[tuple[str, str, bool]]):
        self.tokens, self.i, self.ops, self.depth = tokens, 0, 0, 0

    def parse(self) -> int:
        if not self.tokens:
            raise _Unjudged
        value = self.expr()
        if self.i != len(self.tokens):
            raise _Unjudged
        return value

    def peek(self) -> tuple[str, str, bool] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def expr(self) -> int:
        value = self.term()
        while (tok := self.peek()) is not None and tok[0] == "add":
            self.i += 1
            right = self.term()
            value = _bounded(value + right if tok[1] == "+" else value - right)
            self.ops += 1
        return value

    def term(self) -> int:
        value = self.factor()
        while (tok := self.peek()) is not None and (tok[0] in ("mul", "mod") or (tok[0] == "lp" and not tok[2])):
            if tok[0] != "lp":  # a glued "(" multiplies: 2(3 + 4)
                self.i += 1
            right = self.factor()
            if tok[0] == "mod":
                if right == 0:
                    raise _Unjudged
                value = value % right
            else:
                value = _bounded(value * right)
            self.ops += 1
        return value

    def factor(self) -> int:
        tok = self.peek()
        if tok is None:
            raise _Unjudged
        self.i += 1
        kind, text, _ = tok
        if kind == "num":
            digits = text.replace(",", "")
            if len(digits) > MAX_DIGITS:
                raise _Unjudged
            return int(digits)
        if kind == "add" and text != "+":  # unary minus, glued to what it negates
            nxt = self.peek()
            if nxt is None or nxt[2]:
                raise _Unjudged
            return -self.factor()
        if kind == "lp":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Unjudged
            value = self.expr()
            close = self.peek()
            if close is None or close[0] != "rp":
                raise _Unjudged
            self.i += 1
            self.depth -= 1
            return value
        raise _Unjudged


def _bounded(value: int) -> int:
    if value.bit_length() > MAX_BITS:
        raise _Unjudged
    return value


def _evaluate(tokens: list[tuple[str, str, bool]]) -> tuple[int, int] | None:
    """``(value, operations)`` of one expression, or None when it is not judged."""
    parser = _Parser(tokens)
    try:
        return parser.parse(), parser.ops
    except (_Unjudged, RecursionError):
        return None


def _strip_parens(tokens: list, *, leading: bool) -> list:
    """An unbalanced outer parenthesis belongs to the prose around the chain: ``(3 + 4 = 7)``."""
    tokens = list(tokens)
    opens, closes = sum(t[0] == "lp" for t in tokens), sum(t[0] == "rp" for t in tokens)
    if leading:
        while tokens and tokens[0][0] == "lp" and opens > closes:
            tokens.pop(0)
            opens -= 1
    else:
        while tokens and tokens[-1][0] == "rp" and closes > opens:
            tokens.pop()
            closes -= 1
    return tokens


def _segments(run: str) -> Iterator[tuple[list, bool, bool]]:
    """Chains of one run: ``(tokens, left_cut, right_cut)``, split where two operands stand apart
    (``= 56 3 * 8``) or where a character the run admits but no token reads sits (``1234,567``)."""
    current: list = []
    left_cut = delimited = False
    for m in _TOKEN.finditer(run):
        kind = m.lastgroup
        spaced = bool(m.group(1)) or delimited
        delimited = kind == "delim"  # \( and \[ are spacing
        if delimited:
            continue
        if kind == "other":
            yield current, left_cut, True
            current, left_cut = [], True
            continue
        if current and spaced and current[-1][0] in ("num", "rp") and kind in ("num", "lp"):
            yield current, left_cut, False
            current, left_cut = [], False
        current.append((kind, m.group(kind), spaced))
    yield current, left_cut, False


def claims(text: str) -> Iterator[tuple[str, str, bool]]:
    """``(left, right, true)`` for each arithmetic claim of ``text``, in order (see the module docstring)."""
    found = 0
    for m in _RUN.finditer(text):
        run = m.group()
        if "=" not in run or len(run) > MAX_RUN or _DIGIT.search(run) is None:
            continue
        # (a run that starts with a backslash starts with \( or an operator, cut below either way)
        start_cut = run[0] not in " \t\n\\" and _glued_left(text, m.start())
        end_cut = not run[-1].isspace() and _glued_right(text, m.end())
        for claim in _run_claims(run, start_cut, end_cut):
            yield claim
            found += 1
            if found >= MAX_CLAIMS:
                return


@lru_cache(maxsize=CACHE_SIZE)
def _run_claims(run: str, start_cut: bool, end_cut: bool) -> tuple[tuple[str, str, bool], ...]:
    """The claims of one run (remembered: the samples of a GRPO group repeat each other's lines)."""
    segments = list(_segments(run))
    out = []
    for k, (tokens, left_cut, right_cut) in enumerate(segments):
        left_cut = left_cut or (k == 0 and start_cut)
        right_cut = right_cut or (k == len(segments) - 1 and end_cut)
        out += _links(tokens, left_cut, right_cut)
    return tuple(out)


def _links(tokens: list, left_cut: bool, right_cut: bool) -> Iterator[tuple[str, str, bool]]:
    sides: list[list] = [[]]
    for tok in tokens:
        if tok[0] == "eq":
            sides.append([])
        else:
            sides[-1].append(tok)
    if len(sides) < 2:
        return
    sides[0] = _strip_parens(sides[0], leading=True)
    sides[-1] = _strip_parens(sides[-1], leading=False)
    values = [_evaluate(side) for side in sides]
    # A first side that begins with an operator continues text before the run ("x - 3 = 4", "2x + 3").
    first = sides[0]
    if left_cut or (
        first
        and (
            first[0][0] in ("mul", "mod")
            or (first[0][0] == "add" and (first[0][1] == "+" or len(first) < 2 or first[1][2]))
        )
    ):
        values[0] = None
    if right_cut:
        values[-1] = None
    for (a, va), (b, vb) in zip(zip(sides, values), zip(sides[1:], values[1:])):
        if va is None or vb is None or not (va[1] or vb[1]):
            continue
        yield _render(a), _render(b), va[0] == vb[0]


def _render(tokens: list) -> str:
    out = ""
    for kind, text, spaced in tokens:
        out += (" " if spaced and out else "") + text
    return out


def score(text: str | None) -> tuple[int, int]:
    """``(true claims, claims)`` of ``text``."""
    true = total = 0
    for _, _, ok in claims(text or ""):
        total += 1
        true += ok
    return true, total
