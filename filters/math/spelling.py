r"""Spellings of an answer that math-verify misreads, rewritten to ones it reads as meant.

Pure string functions, applied to a gold and a prediction before math-verify parses them (in the
pool worker, filters/math/check.py), so both sides are read alike:

- thousands separated by a thin space (``2\,345.6``, also ``\;``, ``\ ``, ``~``) are one number
  (math-verify reads ``2 \cdot 345.6``); ``2{,}345.6`` it already reads;
- ``°`` is ``^\circ`` (math-verify reads ``60°`` inside a box as text);
- "percent" written as a word (``\text{ percent}``, ``28 percent``) is ``\%`` (math-verify drops
  the word, so ``\frac{1}{4}\text{ percent}`` was 1/4, not 0.0025);
- a plain expression (``3**(1/2)``, ``pi/2``): ``**`` is a power and ``pi`` is π, as Python and
  math-verify's expression reader mean them (read as LaTeX, ``3**(1/2)`` is 3).

And for a gold alone, :func:`gold_text`: an equation ``2 = x`` is ``x = 2`` (math-verify's verify
compares a value with an assignment's right side only when its left side is the variable), and
bare LaTeX is wrapped in ``$...$`` so that math-verify reads all of it (unwrapped, ``2\sqrt{2}``
reads as 2); an escaped ``\$`` is a dollar sign, not a delimiter.

>>> canonical(r"2\,345.6"), canonical(r"60°"), canonical(r"\frac{1}{4}\text{ percent}")
('2345.6', '60^\\circ', '\\frac{1}{4}\\%')
>>> canonical("3**(1/2)"), canonical("pi/2"), canonical(r"\pi/2"), canonical(r"(1,\ 234)")
('3^(1/2)', '\\pi/2', '\\pi/2', '(1,\\ 234)')
>>> gold_text("2=x"), gold_text("x = 2"), gold_text(r"\$25"), gold_text("$5$"), gold_text(r"\boxed{5}")
('$x=2$', '$x = 2$', '$\\$25$', '$5$', '\\boxed{5}')
"""

from __future__ import annotations

import re

# Groups of exactly three digits after a 1-3 digit head, separated by one spacing command each.
_SPACED_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:(?:\\[,;: ]|~)\d{3})+(?![\d])")
_SPACING = re.compile(r"\\[,;: ]|~")
_DEGREE = re.compile(r"\s*°")
_PERCENT_WORD = re.compile(
    r"\s*(?:\\(?:text|textrm|mathrm|mbox)\s*\{\s*percent(?:age)?\s*\}|(?<![a-zA-Z\\])percent\b)", re.IGNORECASE
)
_PI = re.compile(r"(?<![a-zA-Z\\])pi(?![a-zA-Z])")
_FLIPPED_EQUATION = re.compile(r"\s*([^=a-zA-Z\\]+?)\s*=\s*([a-zA-Z])\s*")
_DELIMITED = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed|\\fbox")


def canonical(text: str, *, expression: bool = True) -> str:
    """``text`` with the spellings math-verify misreads rewritten (module docstring). ``expression``
    False leaves ``**`` and ``pi`` alone (a whole solution, where ``**`` is Markdown bold)."""
    if "\\" in text or "~" in text:
        text = _SPACED_THOUSANDS.sub(lambda m: _SPACING.sub("", m.group(0)), text)
    if "°" in text:
        text = _DEGREE.sub(r"^\\circ", text)
    if "ercent" in text or "ERCENT" in text:
        text = _PERCENT_WORD.sub(r"\\%", text)
    if not expression:
        return text
    if "**" in text:
        text = text.replace("**", "^")
    if "pi" in text:
        text = _PI.sub(r"\\pi", text)
    return text


def gold_text(gold: str) -> str:
    """A gold answer as math-verify should parse it: a solution with its own math delimiters as it
    is, anything else canonical and wrapped in ``$...$`` (module docstring)."""
    if _DELIMITED.search(gold):
        return canonical(gold, expression=False)
    gold = canonical(gold.strip())
    flipped = _FLIPPED_EQUATION.fullmatch(gold)
    if flipped:
        gold = f"{flipped.group(2)}={flipped.group(1)}"
    return f"${gold}$"
