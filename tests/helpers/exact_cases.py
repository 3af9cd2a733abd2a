r"""Answer spellings for the exact fast path's tests (tests/filters/math/test_exact.py) and its
offline sweep: pairs of answers whose value is the same or close, in every shape
filters/math/exact.py reads and some it must refuse.

>>> import random
>>> len(random_pairs(random.Random(0), 5))
5
"""

from __future__ import annotations

import random
from fractions import Fraction


def _int(rng: random.Random) -> int:
    return rng.choice([rng.randrange(0, 10), rng.randrange(10, 1000), rng.randrange(1, 10 ** rng.randrange(4, 25))])


def rational_spellings(rng: random.Random, v: Fraction) -> list[str]:
    """Ways a model writes the rational ``v`` (each exactly ``v`` unless it is a decimal cut short)."""
    p, q = abs(v.numerator), v.denominator
    neg = v < 0
    k = rng.randrange(2, 9)
    sign = "-" if neg else ""
    frac = rng.choice([r"\frac", r"\dfrac", r"\tfrac"])
    out = [
        f"{sign}{frac}{{{p}}}{{{q}}}",
        f"{sign}{frac}{{{p * k}}}{{{q * k}}}",
        f"{sign}{p}/{q}",
        (rf"\frac{{-{p}}}{{{q}}}" if neg else rf"\frac{{{p}}}{{{q}}}"),
        (rf"\frac{{{p}}}{{-{q}}}" if neg else rf"-\frac{{-{p}}}{{{q}}}"),
        (f"{sign}{p}" if q == 1 else f"{sign}{frac} {{{p}}} {{{q}}}"),
    ]
    if p < 10 and q < 10:
        out.append(rf"{sign}\frac{p}{q}")
    # Decimals: exact where v terminates, otherwise cut after 1-9 places (the near-a-fraction trap).
    places = rng.randrange(1, 10)
    scaled = abs(v) * 10**places
    digits = str(int(scaled) + rng.choice([0, 0, 1]))
    digits = digits.rjust(places + 1, "0")
    out.append(f"{sign}{digits[:-places]}.{digits[-places:]}")
    return out


def radical_spellings(rng: random.Random, k: int, n: int, m: int) -> list[str]:
    """Ways to write ``k sqrt(n) / m``."""
    s = rng.choice(["", "-"])
    out = [
        rf"{s}\frac{{{k}\sqrt{{{n}}}}}{{{m}}}",
        rf"{s}\frac{{\sqrt{{{k * k * n}}}}}{{{m}}}",
        rf"\frac{{{s}{k}\sqrt{{{n}}}}}{{{m}}}",
        rf"{s}\frac{{{k}}}{{{m}\sqrt{{{n}}}}}",
    ]
    if m == 1:
        out += [
            rf"{s}{k}\sqrt{{{n}}}",
            rf"{s}{k} \sqrt{{{n}}}",
            rf"{s}\sqrt{{{k * k * n}}}",
            rf"{s}{k}\sqrt {n}",
            rf"{s}{k}\sqrt{n}",
            rf"{s}\sqrt{{{n}}}",
        ]
    return out


def _scalar(rng: random.Random) -> list[str]:
    """Spellings of one value, or of values close to it."""
    kind = rng.randrange(3)
    if kind == 0:
        v = Fraction(rng.randrange(-60, 60), rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 10, 16, 25, 40, 91, 1000, 3125]))
        spellings = rational_spellings(rng, v)
        if rng.random() < 0.4:  # a near miss: 1/q apart, or reversed
            w = v + Fraction(1, v.denominator) if v.numerator == 0 or rng.random() < 0.5 else 1 / v
            spellings += rational_spellings(rng, w)
        return spellings
    if kind == 1:
        k, n, m = rng.randrange(1, 7), rng.choice([2, 3, 5, 6, 7, 10, 11, 12, 8, 4, 1000001]), rng.choice([1, 1, 2, 3])
        spellings = radical_spellings(rng, k, n, m)
        if rng.random() < 0.4:
            spellings += radical_spellings(rng, k, n + 1, m) + radical_spellings(rng, k + 1, n, m)
        return spellings
    big = _int(rng)
    return [str(big), f"{big}.0", f"0{big}", str(big + 1), f"-{big}", f"+{big}", f"{big}.5"]


def _bracketed(rng: random.Random) -> tuple[str, str]:
    n = rng.choice([2, 2, 2, 3])
    cols = [_scalar(rng) for _ in range(n)]
    if n == 2 and rng.random() < 0.2:
        cols[0] = [r"-\infty", r"-\infty", *cols[0][:2]]
    if n == 2 and rng.random() < 0.2:
        cols[1] = [r"\infty", r"+\infty", *cols[1][:2]]
    sides = []
    for _ in range(2):
        left, right = rng.choice("(["), rng.choice(")]")
        sep = rng.choice([",", ", ", " , "])
        body = sep.join(rng.choice(c) for c in cols)
        if rng.random() < 0.2:
            left, right = r"\left" + left, r"\right" + right
        sides.append(f"{left}{body}{right}")
    return sides[0], sides[1]


def random_pairs(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """``n`` (pred, gold) pairs: mostly the same or a nearby value spelled two ways."""
    pairs = []
    while len(pairs) < n:
        if rng.random() < 0.35:
            pairs.append(_bracketed(rng))
        else:
            s = _scalar(rng)
            pairs.append((rng.choice(s), rng.choice(s)))
    return pairs
