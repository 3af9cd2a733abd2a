r"""The math-verify side of verification: what one pool worker runs per (prediction, gold) pair.

Follows math-verify's contract (``parse`` the gold first, then ``verify(gold, pred)``, which is not
symmetric) with two changes that make the result honest:

- math-verify's own SIGALRM timeouts are off (``None``): on timeout they answer ``False``, which
  would call an unverifiable sample wrong. The pool's deadline answers ``None`` instead.
- a gold or a prediction that parses to nothing usable answers ``None`` with a reason, not ``False``.

Gold answers are parsed once per worker (an LRU cache): the pool sends a prompt's samples together.

>>> check_math(r"\frac{2}{4}", r"\frac{1}{2}")
(True, None)
>>> check_math("(1,2]", "[1, 2]")
(False, None)
>>> check_math("", "3")
(None, 'unparseable_pred')
"""

from __future__ import annotations

import logging
from functools import lru_cache

from math_verify import parse, verify

from reasonkit.filters.math.spelling import canonical, gold_text

# With timeouts off, math-verify warns once per process; the pool owns the timeout.
logging.getLogger("math_verify").setLevel(logging.ERROR)


@lru_cache(maxsize=4096)
def parse_gold(gold: str) -> tuple:
    r"""A gold answer parsed once, as :func:`~reasonkit.filters.math.spelling.gold_text` writes it: bare
    LaTeX wrapped in ``$...$`` (math-verify reads an unanchored ``2\sqrt{2}`` as ``2``), a plain
    expression (``3**(1/2)``) or a flipped equation (``2=x``) read as meant."""
    return tuple(parse(gold_text(gold), parsing_timeout=None))


def _usable(parsed) -> bool:
    return any(not isinstance(p, str) for p in parsed)


def check_math(pred: str, gold: str) -> tuple[bool | None, str | None]:
    """``(True|False, None)`` or ``(None, reason)`` for an extracted answer against a gold answer."""
    golds = list(parse_gold(gold))
    if not golds:
        return None, "unparseable_gold"
    preds = parse("\\boxed{" + canonical(pred) + "}", parsing_timeout=None) if pred.strip() else []
    if not preds or (_usable(golds) and not _usable(preds)):
        return None, "unparseable_pred"
    return bool(verify(golds, preds, timeout_seconds=None)), None


def check_response(response: str, gold: str) -> tuple[bool | None, str | None]:
    """math-verify alone (default ``parse`` of the gold and of the whole response, then ``verify``), as
    open-r1's accuracy reward does it: the baseline
    our extractor is measured against (tests/filters/math/test_answer_cases.py), not a path the filter takes.

    >>> check_response(r"So $x = \\boxed{-3}$ or $x = \\boxed{3}$.", "$-3, 3$")
    (True, None)
    """
    golds = parse(gold, parsing_timeout=None)
    if not golds:
        return None, "unparseable_gold"
    preds = parse(response, parsing_timeout=None)
    if not preds:
        return None, "unparseable_pred"
    return bool(verify(golds, preds, timeout_seconds=None)), None
