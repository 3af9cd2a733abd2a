r"""Exact verdicts without sympy, for answers whose value a few lines of Python read exactly.

math-verify parses a prediction with ANTLR (~8 ms) before comparing it. Most non-integer answers
to MATH-style problems are a fraction, a radical, a decimal, or an interval or tuple of those:
here they are read as exact numbers (``Fraction`` times ``sqrt(n)``) in microseconds, in the
filter's own process. :func:`exact_verdict` answers only where math-verify (0.9, as ``check_math``
calls it) is certain to give the same verdict, and ``None`` ("ask math-verify") everywhere else:

- A grammar, nothing more: integers, decimals, ``\frac{a}{b}`` (``\dfrac``, ``\tfrac``, ``\frac12``),
  ``a/b``, ``k\sqrt{n}``, ``\frac{k\sqrt{n}}{m\sqrt{r}}``, one sign in front or inside, and
  ``(``/``[`` brackets of those (``\left``/``\right`` allowed; ``-\infty`` / ``\infty`` as interval
  ends). Text, units, percent, ``\sqrt 10`` (math-verify reads ``\sqrt{1}0``), mixed numbers
  (``2\frac12``), nested braces, sets, bare lists: ``None``.
- Brackets as latex2sympy builds them: two items with ``lo < hi`` are an interval (infinite ends
  are open), ``(a, b)`` or ``[a, b]`` with ``a >= b`` (``[a, a]`` aside) and three or more items
  a tuple; anything else (an empty half-open interval, ``(1, 2, 3]``) is ``None``. An open
  interval equals a 2-tuple item by item; other intervals never equal a tuple; a number never
  equals a bracket.
- Numbers as math-verify compares them: exactly, except that a decimal is a float compared after
  rounding to 6 places. So a decimal is equal only when it is exactly the other value and has at
  most 6 decimals, unequal only when 1e-5 away; exact values unequal only when 1e-9 away (sympy
  chops differences under ~2e-15 to zero). Between those: ``None``.

tests/filters/math/test_exact.py checks every decided verdict against ``check_math`` itself.

>>> exact_verdict(r"\dfrac{56}{212}", r"\frac{14}{53}"), exact_verdict("29/91", r"\frac{91}{29}")
(True, False)
>>> exact_verdict(r"\sqrt{24}", r"2\sqrt{6}"), exact_verdict(r"\frac{\sqrt{3}}{3}", r"\frac{1}{\sqrt{3}}")
(True, True)
>>> exact_verdict("[-15,18]", "[-15, 18]"), exact_verdict("(-15, 18]", "[-15, 18]")
(True, False)
>>> exact_verdict("0.25", r"\frac14"), exact_verdict("0.3333", r"\frac{1}{3}"), exact_verdict("0.3333333", r"\frac{1}{3}")
(True, False, None)
>>> exact_verdict(r"5 \sqrt 10", r"5\sqrt{10}"), exact_verdict("x = 3", "3"), exact_verdict("50\\%", "50")
(None, None, None)
"""  # noqa: E501

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from math import isqrt

# Digits in one number, and significant digits of a decimal (a sympy Float keeps 15).
MAX_DIGITS = 30
MAX_DECIMAL_DIGITS = 15
DECIMAL_EQUAL_PLACES = 6  # math-verify's float_rounding
DECIMAL_MARGIN = Fraction(1, 10**5)
EXACT_MARGIN = Fraction(1, 10**9)

_SPELLINGS = [
    (re.compile(r"\\[dt]frac(?![a-zA-Z])"), r"\\frac"),
    (re.compile(r"\\left\s*([(\[])"), r"\1"),
    (re.compile(r"\\right\s*([)\]])"), r"\1"),
]
# One token per match; a character no alternative matches makes the answer undecided. \frac12
# (one digit each) and \sqrt2 (one digit) are what math-verify's normalisation reads them as.
_TOKEN = re.compile(
    r"\s*(?:(?P<frac2>\\frac\s*(\d)(\d)(?![\d.]))|(?P<sqrt1>\\sqrt\s*(\d)(?![\d.]))"
    r"|(?P<cmd>\\frac|\\sqrt|\\infty)(?![a-zA-Z])|(?P<num>\d+(?:\.\d+)?)|(?P<sym>[{}()\[\],+\-/]))"
)


class _Undecided(Exception):
    """The answer is outside the grammar, or a verdict could differ from math-verify's."""


@dataclass(frozen=True)
class Number:
    """``coef * sqrt(radicand)``; ``places`` is the count of decimals of a decimal, else None."""

    coef: Fraction
    radicand: int = 1
    places: int | None = None

    def approx(self) -> Fraction:
        """The value to ~40 significant digits (for margins and order, never for equality)."""
        if self.radicand == 1:
            return self.coef
        with localcontext() as ctx:
            ctx.prec = 80
            root = Decimal(self.radicand).sqrt()
        return self.coef * Fraction(root)

    def __eq__(self, other) -> bool:  # exact: c1^2 n1 == c2^2 n2 with the same sign
        if not isinstance(other, Number):
            return NotImplemented
        same_sign = (self.coef > 0) - (self.coef < 0) == (other.coef > 0) - (other.coef < 0)
        return same_sign and self.coef * self.coef * self.radicand == other.coef * other.coef * other.radicand

    __hash__ = None  # type: ignore[assignment]


INF, NEG_INF = "oo", "-oo"


@dataclass(frozen=True)
class Interval:
    lo: Number | str
    hi: Number | str
    left_open: bool
    right_open: bool


def _number(coef: Fraction, radicand: int = 1, places: int | None = None) -> Number:
    if radicand == 0 or coef == 0:
        return Number(Fraction(0), 1, places)
    root = isqrt(radicand)
    if root * root == radicand:
        return Number(coef * root, 1, places)
    return Number(coef, radicand, places)


def _tokens(text: str) -> list[tuple[str, str | tuple[str, ...]]]:
    for pattern, repl in _SPELLINGS:
        text = pattern.sub(repl, text)
    out, pos, end = [], 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Undecided
        kind = m.lastgroup
        if kind == "frac2":
            out.append(("frac2", (m.group(2), m.group(3))))
        elif kind == "sqrt1":
            out.append(("sqrt1", m.group(5)))
        else:
            out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Reader:
    """Recursive descent over the tokens of one answer (grammar in the module docstring)."""

    def __init__(self, tokens):
        self.tokens, self.i = tokens, 0

    def peek(self, k: int = 0):
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else (None, None)

    def take(self, kind: str, value: str | None = None):
        tok = self.peek()
        if tok[0] != kind or (value is not None and tok[1] != value):
            raise _Undecided
        self.i += 1
        return tok[1]

    def at(self, kind: str, value: str | None = None) -> bool:
        tok = self.peek()
        return tok[0] == kind and (value is None or tok[1] == value)

    def sign(self) -> int:
        if self.at("sym", "-"):
            self.i += 1
            return -1
        if self.at("sym", "+"):
            self.i += 1
        return 1

    def integer(self) -> int:
        digits = self.take("num")
        if "." in digits or len(digits) > MAX_DIGITS:
            raise _Undecided
        return int(digits)

    def root(self) -> int:
        """``\\sqrt{n}`` or ``\\sqrt2``: the radicand."""
        if self.at("sqrt1"):
            return int(self.take("sqrt1"))
        self.take("cmd", "\\sqrt")
        self.take("sym", "{")
        n = self.integer()
        self.take("sym", "}")
        return n

    def term(self) -> tuple[int, int]:
        """``[sign] k``, ``[sign] \\sqrt{n}`` or ``[sign] k\\sqrt{n}`` as (signed k, n)."""
        s, start = self.sign(), self.i
        k = self.integer() if self.at("num") else 1
        n = self.root() if self.at("sqrt1") or self.at("cmd", "\\sqrt") else 1
        if self.i == start:  # a sign, or nothing, where a number belongs
            raise _Undecided
        return s * k, n

    def scalar(self) -> Number | str:
        s = self.sign()
        if self.at("cmd", "\\infty"):
            self.i += 1
            return NEG_INF if s < 0 else INF
        if self.at("frac2"):
            a, b = self.take("frac2")
            if int(b) == 0:
                raise _Undecided
            return _number(Fraction(s * int(a), int(b)))
        if self.at("cmd", "\\frac"):
            self.i += 1
            self.take("sym", "{")
            k1, n1 = self.term()
            self.take("sym", "}")
            self.take("sym", "{")
            k2, n2 = self.term()
            self.take("sym", "}")
            if k2 == 0 or n2 == 0:
                raise _Undecided
            return _number(Fraction(s * k1, k2 * n2), n1 * n2)
        if self.at("num") and "." in self.peek()[1]:
            text = self.take("num")
            whole, places = text.split(".")
            if len(whole.lstrip("0") + places) > MAX_DECIMAL_DIGITS:
                raise _Undecided
            return _number(s * Fraction(text), 1, len(places))
        if self.at("num") and self.peek(1) == ("sym", "/"):
            a = self.integer()
            self.i += 1
            b = self.integer()
            if b == 0:
                raise _Undecided
            return _number(Fraction(s * a, b))
        if self.at("sym", "-") or self.at("sym", "+"):
            raise _Undecided  # two signs
        k, n = self.term()
        return _number(Fraction(s * k), n)


def _less(a: Number | str, b: Number | str) -> bool:
    """``a < b`` where the two are certainly apart as sympy orders them, else undecided."""
    if isinstance(a, str) or isinstance(b, str):
        if a == NEG_INF and b != NEG_INF or b == INF and a != INF:
            return True
        raise _Undecided
    if a.radicand == b.radicand == 1 and a.places is None and b.places is None:
        return a.coef < b.coef
    gap = b.approx() - a.approx()
    if abs(gap) <= (DECIMAL_MARGIN if a.places is not None or b.places is not None else EXACT_MARGIN):
        raise _Undecided
    return gap > 0


def _bracket(items: list, opening: str, closing: str):
    """An interval or a tuple, as latex2sympy's ``convert_interval`` decides."""
    if len(items) == 2:
        lo, hi = items
        if lo == INF or hi == NEG_INF:
            raise _Undecided
        if lo == NEG_INF and hi == INF:
            raise _Undecided  # sympy's Reals
        if _less(lo, hi):
            return Interval(lo, hi, opening == "(" or lo == NEG_INF, closing == ")" or hi == INF)
        if (opening + closing) not in ("()", "[]") or (opening == "[" and lo == hi):
            raise _Undecided  # an empty set, or {a}
        return tuple(items)
    if (opening + closing) not in ("()", "[]") or any(isinstance(x, str) for x in items):
        raise _Undecided
    return tuple(items)


@lru_cache(maxsize=8192)
def read_exact(text: str):
    """The exact value of an answer: a :class:`Number`, an :class:`Interval`, a tuple of Numbers,
    or None where the answer is outside the grammar.

    >>> read_exact(r"\\left( -\\frac{1}{2}, 3\\sqrt{2} \\right]")
    Interval(lo=Number(coef=Fraction(-1, 2), radicand=1, places=None), hi=Number(coef=Fraction(3, 1), radicand=2, places=None), left_open=True, right_open=False)
    >>> read_exact("(3, 1)"), read_exact(r"2\\frac{1}{2}")
    ((Number(coef=Fraction(3, 1), radicand=1, places=None), Number(coef=Fraction(1, 1), radicand=1, places=None)), None)
    """  # noqa: E501
    if not text or len(text) > 200 or "\n" in text:
        return None
    try:
        tokens = _tokens(text)
        if not tokens:
            return None
        r = _Reader(tokens)
        if tokens[0][0] == "sym" and tokens[0][1] in "([":
            opening = r.take("sym")
            items = [r.scalar()]
            while r.at("sym", ","):
                r.i += 1
                items.append(r.scalar())
            closing = r.take("sym")
            if closing not in ")]" or r.i != len(tokens) or len(items) < 2:
                return None
            return _bracket(items, opening, closing)
        value = r.scalar()
        if r.i != len(tokens) or isinstance(value, str):
            return None
        return value
    except _Undecided:
        return None


def _same(a: Number | str, b: Number | str) -> bool | None:
    """math-verify's ``sympy_expr_eq`` on two numbers, where certain."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    decimal = a.places is not None or b.places is not None
    if a == b:
        if decimal and max(a.places or 0, b.places or 0) > DECIMAL_EQUAL_PLACES:
            return None
        return True
    gap = abs(a.approx() - b.approx())
    return False if gap > (DECIMAL_MARGIN if decimal else EXACT_MARGIN) else None


def _all(verdicts) -> bool | None:
    verdicts = list(verdicts)
    if False in verdicts:
        return False
    return True if all(v is True for v in verdicts) else None


def exact_verdict(pred: str, gold: str) -> bool | None:
    """``check_math(pred, gold)``'s verdict where it is certain without sympy, else None."""
    p, g = read_exact(pred), read_exact(gold)
    if p is None or g is None:
        return None
    if isinstance(p, Interval) and isinstance(g, Interval):
        if (p.left_open, p.right_open) != (g.left_open, g.right_open):
            return False
        return _all((_same(g.lo, p.lo), _same(g.hi, p.hi)))
    if isinstance(p, Interval) or isinstance(g, Interval):
        interval, other = (p, g) if isinstance(p, Interval) else (g, p)
        if not isinstance(other, tuple) or len(other) != 2 or not (interval.left_open and interval.right_open):
            return False
        return _all(_same(x, y) for x, y in zip((interval.lo, interval.hi), other))
    if isinstance(p, tuple) or isinstance(g, tuple):
        if not (isinstance(p, tuple) and isinstance(g, tuple)) or len(p) != len(g):
            return False
        return _all(_same(x, y) for x, y in zip(g, p))
    return _same(g, p)
