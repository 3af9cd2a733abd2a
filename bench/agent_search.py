"""Benchmark: the search tool's BM25 (bm25s) against rank-bm25 on one synthetic corpus, in one run.

    python bench/agent_search.py [PASSAGES] [QUERIES] [BASELINE_QUERIES]   # defaults 100000 1000 200

The corpus: PASSAGES passages of 40-80 words drawn Zipf-like (s=1.1) from a 50,000-word vocabulary of made-up words,
seeded. Queries: 2-5 words of a random passage (literal lookups, as the agent makes). Both packages index the same
tokens (``search.tokenize``, timed alone too: it is in both build times) with k1=1.5, b=0.75 (bm25s: Lucene's IDF, its
default and the tool's; rank-bm25: BM25Okapi's IDF). What is timed for bm25s is the tool's own path (``Bm25Index``:
text in, scores, then the top-k), for rank-bm25 ``BM25Okapi`` on the tokens and ``get_scores`` then the same top-k.
rank-bm25 scores each query term in a Python loop over every passage, so it runs on BASELINE_QUERIES of the same
queries (p50/p99 over those); both must put the same passage first on every shared query (the printed ``same top-1``).

Measured here (2 CPU cores shared with other jobs at load ~10, so CPU time is the steadier figure;
Python 3.11, bm25s 0.3.16 with scipy 1.17, rank-bm25 0.2.2), defaults::

    tokenize (in both builds):   8.69 s (CPU   3.00 s) bm25s (ours):         index  26.56 s (CPU   6.18 s) | query p50
    1.80 ms  p99   16.59 ms  (CPU p50    1.52 ms; 1000 queries) rank-bm25 (baseline): index  19.12 s (CPU   5.05 s) |
    query p50  465.67 ms  p99 3352.68 ms  (CPU p50  179.02 ms; 200 queries) source passage first: bm25s 444/1000,
    rank-bm25 90/200; same top-1: 140/200 ratio rank-bm25 / bm25s on the same 200 queries: query p50 279x wall, 125x
    CPU; index build 0.72x wall, 0.82x CPU

Queries are 2-5 Zipf-drawn words, often common ones, so their own passage comes first about half the
time with either package (the IDFs differ, hence top-1 agreeing on 70%); the agent's queries are
rare names and titles (tests/gen/tools/test_search.py).
"""

import sys
import time

import numpy as np


def synthetic_corpus(n: int, seed: int = 0, vocab: int = 50_000) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=rng.integers(3, 10))) for _ in range(vocab)]
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    lengths = rng.integers(40, 81, size=n)
    drawn = rng.choice(vocab, size=int(lengths.sum()), p=p)
    out, at = [], 0
    for length in lengths:
        out.append(" ".join(words[j] for j in drawn[at : at + length]))
        at += length
    return out


def queries_from(corpus: list[str], n: int, seed: int = 1) -> tuple[list[str], list[int]]:
    """Queries and the passage each was taken from."""
    rng = np.random.default_rng(seed)
    out, sources = [], [int(i) for i in rng.integers(0, len(corpus), size=n)]
    for i in sources:
        words = corpus[i].split()
        start = int(rng.integers(0, len(words) - 5))
        out.append(" ".join(words[start : start + int(rng.integers(2, 6))]))
    return out, sources


def timed_queries(fn, queries: list[str]) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    """Results, wall ms and CPU ms per query (CPU time: what the figure is on a machine shared with others)."""
    results, wall, cpu = [], [], []
    for q in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        results.append(fn(q))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return results, np.array(wall) * 1000, np.array(cpu) * 1000


class Clock:
    """Wall and CPU seconds of a block."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.t0, time.process_time() - self.c0

    def __str__(self):
        return f"{self.wall:6.2f} s (CPU {self.cpu:6.2f} s)"


def line(name: str, build: Clock, wall: np.ndarray, cpu: np.ndarray) -> str:
    return (
        f"{name:<21} index {build} | query p50 {np.percentile(wall, 50):7.2f} ms  p99 "
        f"{np.percentile(wall, 99):7.2f} ms  (CPU p50 {np.percentile(cpu, 50):7.2f} ms; {len(wall)} queries)"
    )


def main():
    import bm25s  # noqa: F401  imported before the clock starts, as rank_bm25 is
    from rank_bm25 import BM25Okapi

    from reasonkit.gen.tools.search import Bm25Index, best, tokenize

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    nq = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    nb = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    k = 3
    t0 = time.perf_counter()
    corpus = synthetic_corpus(n)
    queries, sources = queries_from(corpus, nq)
    print(
        f"corpus: {n} passages, {sum(len(c.split()) for c in corpus) / n:.0f} words each "
        f"(made in {time.perf_counter() - t0:.1f} s); {nq} queries, {nb} for the baseline",
        flush=True,
    )

    with Clock() as tok:
        tokens = [tokenize(c) for c in corpus]
    print(f"tokenize (in both builds): {tok}", flush=True)
    del tokens

    with Clock() as build_ours:
        index = Bm25Index(corpus)
    ours, wall_ours, cpu_ours = timed_queries(lambda q: [i for i, _ in index.top(q, k)], queries)  # noqa: F821 (runs before the del below)
    print(line("bm25s (ours):", build_ours, wall_ours, cpu_ours), flush=True)
    del index

    with Clock() as build_base:
        baseline = BM25Okapi([tokenize(c) for c in corpus], k1=1.5, b=0.75)
    theirs, wall_base, cpu_base = timed_queries(lambda q: best(baseline.get_scores(tokenize(q)), k), queries[:nb])
    print(line("rank-bm25 (baseline):", build_base, wall_base, cpu_base), flush=True)

    same = sum(a[:1] == b[:1] for a, b in zip(ours, theirs))
    found_ours = sum(r[:1] == [s] for r, s in zip(ours, sources))
    found_base = sum(r[:1] == [s] for r, s in zip(theirs, sources))
    print(f"source passage first: bm25s {found_ours}/{nq}, rank-bm25 {found_base}/{nb}; same top-1: {same}/{nb}")
    cpu50 = np.percentile(cpu_base, 50) / np.percentile(cpu_ours[:nb], 50)
    wall50 = np.percentile(wall_base, 50) / np.percentile(wall_ours[:nb], 50)
    print(
        f"ratio rank-bm25 / bm25s on the same {nb} queries: query p50 {wall50:.0f}x wall, {cpu50:.0f}x CPU; "
        f"index build {build_base.wall / build_ours.wall:.2f}x wall, {build_base.cpu / build_ours.cpu:.2f}x CPU"
    )


if __name__ == "__main__":
    main()
