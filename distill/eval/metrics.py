"""Evaluation metrics over k samples per problem: pass@1 (mean, std, bootstrap CI), cons@k, pass@k,
and the paired difference of two runs on the same problems (paired bootstrap, sign test).

Conventions follow DeepSeek-R1's report: pass@1 is the accuracy averaged over the k samples of
each problem; cons@k is a majority vote (over answers grouped by the verifier's equivalence,
distill/eval/vote.py); pass@k uses the unbiased estimator of Chen et al. (2021), over the problems
with at least k samples (eval counts the others apart). A sample whose answer could not be
verified (``correct is None``) counts as not correct.

>>> pass_at_k(n=4, c=1, k=2)
0.5
>>> majority(["7", "07", None, "8"], normalize=lambda a: a.lstrip("0"))
'7'
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

H = TypeVar("H", bound=Hashable)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k, ``1 - C(n-c, k) / C(n, k)``, as a numerically stable product.

    The product form avoids the huge binomials of n = 64 samples:
    C(n-c, k)/C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def ks_for(n: int) -> list[int]:
    """The k reported for n samples: 1, 2, 4, ... up to n, and n itself.

    >>> ks_for(6)
    [1, 2, 4, 6]
    """
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    if ks[-1] != n:
        ks.append(n)
    return ks


def majority(answers: Sequence[H | None], normalize: Callable[[H], H] = lambda a: a) -> H | None:
    """The most common normalised answer, ignoring samples with no answer.

    Ties go to the tied answer that occurs first in sample order (for eval's vote groups, named by
    their first member: the group whose first member comes earliest), so the vote does not depend
    on hash order. Voting on extracted answers, not raw completions: two long traces that reach
    ``\\boxed{7}`` by different paths agree on 7 but never on their text.

    >>> majority(["5", "6", "6", "5"]), majority([3, 0, 0, 3, None, None, None])
    ('5', 3)
    """
    keys = [normalize(a) for a in answers if a is not None]
    if not keys:
        return None
    counts = Counter(keys)
    best = max(counts.values())
    return next(k for k in keys if counts[k] == best)


def pass1_stats(correct: Sequence[Sequence[bool | None]], *, bootstrap: int = 1000, seed: int = 0) -> dict:
    """pass@1 over problems x samples: mean, std across sample rounds, bootstrap 95% CI over problems.

    ``correct[p][j]`` is sample j of problem p. The std is over the k "rounds" (round j = every
    problem's j-th sample), which is how R1-style reports state run-to-run spread.
    """
    if not correct:
        return {"pass@1": 0.0, "pass@1_std": 0.0, "pass@1_ci95": [0.0, 0.0]}
    per_problem = [sum(bool(x) for x in row) / len(row) for row in correct]
    mean = sum(per_problem) / len(per_problem)
    k = min(len(row) for row in correct)
    rounds = [sum(bool(row[j]) for row in correct) / len(correct) for j in range(k)]
    std = _std(rounds)
    rng = random.Random(seed)
    n = len(per_problem)
    boots = sorted(sum(per_problem[rng.randrange(n)] for _ in range(n)) / n for _ in range(bootstrap))
    ilo, ihi = ci95_positions(bootstrap)
    lo, hi = boots[ilo], boots[ihi]
    return {"pass@1": mean, "pass@1_std": std, "pass@1_ci95": [lo, hi]}


def ci95_positions(rounds: int) -> tuple[int, int]:
    """Where the 2.5th and 97.5th percentiles sit in ``rounds`` sorted bootstrap values (both
    bootstraps here use the same rule, so their intervals read alike).

    >>> ci95_positions(10_000)
    (249, 9750)
    """
    return int(0.025 * (rounds - 1)), int(math.ceil(0.975 * (rounds - 1)))


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, rounds: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """``(diff, lo, hi)``: mean(b) - mean(a) over paired problems and its percentile 95% interval.

    ``a[i]`` and ``b[i]`` are the same problem's score in two runs (pass@1: the share of its k
    samples correct). Each round resamples problem indices with replacement and uses the *same*
    indices for both runs, so what one problem is worth (its difficulty) cancels and only the
    difference between the runs varies: far tighter than two independent intervals. Resampling
    the per-problem differences ``b[i] - a[i]`` is that same computation, done here. The indices
    are ``numpy.random.default_rng(seed).integers(0, n, size=(rounds, n))``, drawn in chunks of
    rows (the same stream) so 5,000 problems do not need 400 MB.

    >>> paired_bootstrap([0.5, 0.5, 0.0], [0.5, 0.5, 0.0])
    (0.0, 0.0, 0.0)
    >>> diff, lo, hi = paired_bootstrap([0, 0, 0, 0.25] * 15, [1, 0, 0, 0.25] * 15, rounds=2000)
    >>> round(diff, 3), 0 < lo < diff < hi
    (0.25, True)
    """
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired_bootstrap: {len(a)} and {len(b)} scores; pairs need the same problems")
    if rounds < 1:
        raise ValueError(f"paired_bootstrap: rounds must be at least 1, got {rounds}")
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = len(d)
    if n == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    chunk = max(1, (1 << 22) // n)  # rows of indices per draw: at most 4M indices (32 MB) at a time
    means = np.concatenate(
        [d[rng.integers(0, n, size=(min(chunk, rounds - start), n))].mean(axis=1) for start in range(0, rounds, chunk)]
    )
    means.sort()
    ilo, ihi = ci95_positions(rounds)
    return float(d.mean()), float(means[ilo]), float(means[ihi])


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test of ``wins`` against ``losses`` (ties left out): the chance of a
    split at least this uneven if each problem were a fair coin. On per-problem wins this is the
    exact McNemar test; a second opinion beside the bootstrap, blind to how large each win is.

    >>> sign_test(0, 0), round(sign_test(9, 1), 4), sign_test(3, 3)
    (1.0, 0.0215, 1.0)
    """
    m = wins + losses
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(wins, losses) + 1)) / 2**m
    return min(1.0, 2 * tail)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
