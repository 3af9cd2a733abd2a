"""Deduplication of completions: exact (normalised text) and near-duplicate (MinHash LSH).

Both work in two steps so a dataset never has to sit in memory: :meth:`Deduper.keys` turns each
row into a few 64-bit keys (one exact hash; one hash per LSH band), then :meth:`Deduper.decide`
sees only those keys, for every row at once (~8 bytes per row per key). Which row of a group is
kept is deterministic: the first in input order. Near-duplicate groups are connected components of
band collisions (union-find, as datatrove's MinHash stages), so the same rule holds for chains.

MinHash here is the classic one (``num_perm`` hash functions, min over 5-word shingles), computed
with numpy over a whole batch of documents at once: shingles are hashed from the bytes without
building strings (text.py), folded to 32 bits, permuted as ``a*x + b mod 2**32`` with odd ``a``
(a bijection; the inputs are already well mixed) and reduced per document with
``np.minimum.reduceat``. The exact key is the hash of a text's whole word sequence, from the same
pass.

>>> d = Deduper("minhash", threshold=0.7)
>>> base = "let me compute the product of the two numbers step by step and then check it " * 4
>>> keys = d.keys([base, base.upper(), base + " done", "a different trace entirely about other things"])
>>> d.decide(keys, [True, True, True, True])
[None, 'duplicate', 'near_duplicate', None]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from reasonkit.filters.base import RowFilter
from reasonkit.filters.text import mix64, ngram_hashes_many

MODES = ("exact", "minhash", "none")
_U64 = np.uint64
_U32 = np.uint32
_MAX = np.iinfo(np.uint32).max
#: Shingles per numpy block: num_perm x CHUNK uint32 values (128 x 8192 x 4 B = 4 MB).
CHUNK = 8192


def lsh_params(threshold: float, num_perm: int) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` minimising false positives plus false
    negatives around ``threshold`` (the criterion datasketch uses, equal weights).

    >>> lsh_params(0.8, 128)
    (9, 13)
    """
    xs = np.linspace(0, 1, 201)
    best, best_err = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            p = 1 - (1 - xs**r) ** b
            fp = np.trapezoid(p[xs < threshold], xs[xs < threshold])
            fn = np.trapezoid(1 - p[xs >= threshold], xs[xs >= threshold])
            if fp + fn < best_err:
                best, best_err = (b, r), fp + fn
    return best


def _fold32(x: np.ndarray) -> np.ndarray:
    return ((x >> _U64(32)) ^ x).astype(_U32)


class MinHasher:
    """``num_perm`` min-wise hashes of word-shingle sets, a batch of texts at a time."""

    def __init__(self, num_perm: int = 128, shingle: int = 5, seed: int = 1):
        rng = np.random.default_rng(seed)
        self.num_perm, self.shingle = num_perm, shingle
        self.a = (rng.integers(0, _MAX, num_perm, dtype=_U32, endpoint=True) | _U32(1))[:, None]
        self.b = rng.integers(0, _MAX, num_perm, dtype=_U32, endpoint=True)[:, None]

    def _permuted(self, x: np.ndarray) -> np.ndarray:
        # 32-bit values, like datasketch's; uint32 multiplies vectorise where uint64 ones do not.
        # x is already well mixed (text.py), so an affine bijection per permutation is enough.
        with np.errstate(over="ignore"):
            h = np.multiply(self.a, x[None, :])
            h += self.b
            return h

    def signatures(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), num_perm)`` uint32; a text without words gets all-max values."""
        hashes, counts = ngram_hashes_many(list(texts), self.shingle)
        return self.signatures_of(hashes, counts)

    def signatures_of(self, hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Signatures from the shingle hashes of :func:`ngram_hashes_many` (``counts`` per text)."""
        x = _fold32(hashes)
        n = len(counts)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        out = np.full((len(counts), self.num_perm), _MAX, dtype=_U32)
        i = 0
        while i < n:
            j = i + 1  # documents i..j-1 form one block of at most CHUNK shingles (or one long document)
            while j < n and bounds[j + 1] - bounds[i] <= CHUNK:
                j += 1
            docs = [k for k in range(i, j) if counts[k]]
            if len(docs) == 1 and counts[docs[0]] > CHUNK:  # a long document: running min over slices
                d = docs[0]
                for s in range(bounds[d], bounds[d + 1], CHUNK):
                    part = self._permuted(x[s : min(s + CHUNK, bounds[d + 1])]).min(axis=1)
                    out[d] = np.minimum(out[d], part)
            elif docs:
                block = x[bounds[i] : bounds[j]]
                starts = bounds[docs] - bounds[i]
                out[docs] = np.minimum.reduceat(self._permuted(block), starts, axis=1).T
            i = j
        return out

    @staticmethod
    def bands(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
        """``(n, bands)`` uint64: each band's ``rows`` values folded into one hash."""
        out = np.empty((len(signatures), bands), dtype=_U64)
        for j in range(bands):
            h = np.zeros(len(signatures), dtype=_U64)
            for k in range(rows):
                h = mix64(h ^ signatures[:, j * rows + k].astype(_U64))
            out[:, j] = h
        return out


def components(columns: Iterable[np.ndarray], valid: np.ndarray) -> np.ndarray:
    """Root of each row after joining rows equal in any column (root = smallest row index).

    Memory is one int64 per row plus the column being read; Python only loops over collisions.

    >>> components([np.array([5, 7, 5, 9]), np.array([1, 2, 3, 2])], np.array([True, True, True, True])).tolist()
    [0, 1, 0, 1]
    """
    parent = np.arange(len(valid), dtype=np.int64)

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    idx = np.flatnonzero(valid)
    for col in columns:
        order = idx[np.argsort(col[idx], kind="stable")]
        values = col[order]
        same = np.flatnonzero(values[1:] == values[:-1])
        for a, b in zip(order[same].tolist(), order[same + 1].tolist()):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    while True:  # pointer jumping until every row points at its root
        nxt = parent[parent]
        if (nxt == parent).all():
            return parent
        parent = nxt


class Deduper:
    """Exact and/or near-duplicate detection in two steps: :meth:`keys`, then :meth:`decide`."""

    def __init__(
        self,
        mode: str = "exact",
        *,
        threshold: float = 0.8,
        num_perm: int = 128,
        bands: int | None = None,
        shingle: int = 5,
        seed: int = 1,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown dedup mode {mode!r}; expected one of {MODES}")
        self.mode = mode
        if mode != "minhash":  # only MinHash has bands (searching the best costs ~40 ms)
            self.n_bands = self.rows = 0
        elif bands is None:
            self.n_bands, self.rows = lsh_params(threshold, num_perm)
        else:
            self.n_bands, self.rows = bands, num_perm // bands
        self.hasher = MinHasher(num_perm, shingle, seed) if mode == "minhash" else None

    @property
    def columns(self) -> list[str]:
        """Names of the key columns (uint64, null for rows that were not keyed)."""
        if self.mode == "none":
            return []
        return ["_exact"] + ([f"_mh{j}" for j in range(self.n_bands)] if self.mode == "minhash" else [])

    def keys(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self.mode == "none":
            return out
        shingle = self.hasher.shingle if self.hasher is not None else 1
        hashes, counts, whole = ngram_hashes_many(list(texts), shingle, whole=True)
        out["_exact"] = whole  # equal exactly when the normalised texts are equal
        if self.hasher is not None:
            sig = self.hasher.signatures_of(hashes, counts)
            bands = MinHasher.bands(sig, self.n_bands, self.rows)
            empty = (sig == _MAX).all(axis=1)
            for j in range(self.n_bands):
                col = bands[:, j]
                col[empty] = out["_exact"][empty]  # no words: only an exact match is a duplicate
                out[f"_mh{j}"] = col
        return out

    def decide(self, keys: Mapping[str, np.ndarray], alive: Sequence[bool]) -> list[str | None]:
        """For every row: None, ``duplicate`` or ``near_duplicate`` (rows not alive: None)."""
        alive = np.asarray(alive, dtype=bool).copy()
        reasons: list[str | None] = [None] * len(alive)
        if self.mode == "none" or not alive.any():
            return reasons
        idx = np.flatnonzero(alive)
        _, first = np.unique(keys["_exact"][idx], return_index=True)
        dup = np.setdiff1d(idx, idx[first])
        for i in dup.tolist():
            reasons[i] = "duplicate"
        alive[dup] = False
        if self.mode == "minhash":
            # A generator: a caller's lazy mapping reads one band column at a time.
            roots = components((keys[f"_mh{j}"] for j in range(self.n_bands)), alive)
            for i in np.flatnonzero(alive & (roots != np.arange(len(alive)))).tolist():
                reasons[i] = "near_duplicate"
        return reasons


class DedupFilter(RowFilter):
    """In-memory dedup of one table (the stage runs :class:`Deduper` over the whole dataset)."""

    name = "dedup"
    reasons = ("duplicate", "near_duplicate")

    def __init__(self, mode: str = "exact", **options):
        self.deduper = Deduper(mode, **options)

    def judge(self, batch: pa.Table, rows: list[int]):
        texts = batch.column("completion").to_pylist()
        keys = self.deduper.keys([texts[i] for i in rows])
        return self.deduper.decide(keys, [True] * len(rows))
