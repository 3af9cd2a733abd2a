"""Text normalisation and stable, vectorised n-gram hashing shared by dedup, decontam and format.

Every hash here is a pure function of the text's UTF-8 bytes, so it is the same on every machine,
Python version and process (unlike ``hash()``, which is salted per process, or polars' ``hash``,
which changes between versions).

Word n-grams are hashed without building a Python string per word or per n-gram, for many texts at
once: the lowercased texts are joined into one byte array, words are the runs of non-whitespace
bytes (ASCII whitespace), a polynomial prefix hash over the bytes gives every word's hash in O(1),
and a second prefix hash over the word hashes gives every n-gram's. numpy does all of it; a batch
of long traces hashes at roughly 30 ns per byte on one core.

>>> normalize("  Hello\\n\\tWORLD  ")
'hello world'
>>> a, b = ngram_hashes("the cat sat on the mat", 2), ngram_hashes("THE cat  sat on the mat", 2)
>>> len(a), bool((a == b).all()), int(a[0]) == int(a[3])  # 5 bigrams; "the cat" != "the mat"
(5, True, False)
>>> len(ngram_hashes("too short", 8))  # fewer words than n: the whole text is one n-gram
1
"""

from __future__ import annotations

import hashlib

import numpy as np

_U64 = np.uint64
_P = 0x100000001B3  # odd, so invertible mod 2**64
_P_INV = pow(_P, -1, 1 << 64)
_LEN = 0x9E3779B97F4A7C15
_pow = np.ones(1, _U64)  # _pow[j] = P**j mod 2**64, grown on demand
_ipow = np.ones(1, _U64)


def normalize(text: str) -> str:
    """Lowercase and collapse every run of whitespace to one space (the dedup/decontam form)."""
    return " ".join(text.lower().split())


def to_bytes(text: str) -> bytes:
    """UTF-8 bytes; a lone surrogate is kept as its 3-byte form instead of raising."""
    return text.encode("utf-8", "surrogatepass")


def stable_hash64(text: str) -> int:
    """A 64-bit hash of ``text`` that never changes (blake2b), as an unsigned int.

    >>> stable_hash64("abc") == stable_hash64("abc"), stable_hash64("abc") < 2**64
    (True, True)
    """
    return int.from_bytes(hashlib.blake2b(to_bytes(text), digest_size=8).digest(), "little")


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over every output bit (uint64 in and out)."""
    # Array arithmetic wraps mod 2**64 without a warning (only NumPy scalars warn), so no
    # np.errstate here: entering one costs more than mixing a short array.
    x = np.atleast_1d(np.asarray(x, dtype=_U64))
    x = x ^ (x >> _U64(30))
    x = x * _U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U64(27))
    x = x * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``P**j`` and ``P**-j`` mod 2**64 for ``j < n`` (cached, grown on demand)."""
    global _pow, _ipow
    if len(_pow) < n:
        size = max(n, 2 * len(_pow))
        _pow, _ipow = _cumprod_of(_P, size), _cumprod_of(_P_INV, size)
    return _pow, _ipow


def _cumprod_of(base: int, size: int) -> np.ndarray:
    steps = np.full(size, base, dtype=_U64)
    steps[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(steps, dtype=_U64)


def _span_hashes(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mixed hashes of the sequences ``values[s:e]`` (any uint dtype), position-independent."""
    pw, ipw = _powers(len(values) + 1)
    prefix = np.zeros(len(values) + 1, _U64)  # arrays wrap mod 2**64 silently (see mix64)
    np.multiply(values, pw[: len(values)], out=prefix[1:], dtype=_U64)
    np.cumsum(prefix, out=prefix)
    raw = (prefix[ends] - prefix[starts]) * ipw[starts]
    return mix64(raw ^ ((ends - starts).astype(_U64) * _U64(_LEN)))


_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True
#: Texts are hashed together in groups of about this many bytes (bounds the prefix arrays).
GROUP_BYTES = 1 << 20


def ngram_hashes(text: str, n: int) -> np.ndarray:
    """Hashes of the word ``n``-grams of ``text`` (lowercased; split on whitespace).

    Text with fewer than ``n`` words (but at least one) gives one hash, of all its words, so a
    short problem can still match a short benchmark problem exactly.
    """
    # One text: the same hashes as ngram_hashes_many, with a third of its numpy calls (the format
    # filter hashes every completion on its own; ~60 small numpy calls a text were most of its time).
    data = np.frombuffer(to_bytes((text or "").lower()) + b" ", dtype=np.uint8)
    word = ~_WHITESPACE[data]
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1  # alternately word starts and word ends
    if word[0]:
        edges = np.concatenate([[0], edges])
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) == 0:
        return np.zeros(0, _U64)
    words = _span_hashes(data, starts, ends)
    if len(words) < n:
        return _span_hashes(words, np.zeros(1, np.int64), np.full(1, len(words)))
    k = np.arange(len(words) - n + 1)
    return _span_hashes(words, k, k + n)


def repetition_scores(texts: list[str], n: int) -> np.ndarray:
    """For each text, the share of its word ``n``-grams that repeat an earlier one (0.0 for text
    with fewer than two), as format.py's ``repetition_score`` gives one by one, for a whole batch
    in a few numpy passes instead of ~60 numpy calls per text.

    >>> repetition_scores(["a b a b a b", "a b c d", "", "x"], 2).tolist()
    [0.6, 0.0, 0.0, 0.0]
    """
    hashes, counts = ngram_hashes_many(texts, n)
    if len(texts) >= 1 << 20:  # the document index takes the top 20 bits of the sort key
        return np.concatenate([repetition_scores(texts[i : i + (1 << 19)], n) for i in range(0, len(texts), 1 << 19)])
    doc = np.repeat(np.arange(len(texts), dtype=_U64), counts)
    # One sort of (document, 44 bits of hash): two n-grams of one text collide with odds ~k^2/2^45.
    key = np.sort((doc << _U64(44)) | (hashes >> _U64(20)))
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    distinct = np.bincount((key[first] >> _U64(44)).astype(np.int64), minlength=len(texts))
    return np.where(counts >= 2, 1.0 - distinct / np.maximum(counts, 1), 0.0)


def ngram_hashes_many(texts: list[str], n: int, *, whole: bool = False):
    """:func:`ngram_hashes` of many texts at once: ``(hashes, counts)``, the hashes of text ``i``
    being the ``counts[i]`` after those of the texts before it. Same values as one by one.

    With ``whole``, also a third array: one hash per text of its whole word sequence (the same
    for two texts exactly when their :func:`normalize` forms are equal, up to 64-bit collisions).

    >>> h, c = ngram_hashes_many(["a b c", "", "A  b"], 2)
    >>> c.tolist(), bool((h[:2] == ngram_hashes("a b c", 2)).all()), bool(h[2] == ngram_hashes("a b", 2)[0])
    ([2, 0, 1], True, True)
    >>> w = ngram_hashes_many(["x  Y", "x y", "x y z"], 2, whole=True)[2]
    >>> bool(w[0] == w[1]), bool(w[0] == w[2])
    (True, False)
    """
    docs = [to_bytes((t or "").lower()) for t in texts]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    i = 0
    while i < len(docs):
        j, size = i, 0
        while j < len(docs) and (j == i or size + len(docs[j]) < GROUP_BYTES):
            size += len(docs[j]) + 1
            j += 1
        parts.append(_many(docs[i:j], n))
        i = j
    if not parts:
        empty = (np.zeros(0, _U64), np.zeros(0, np.int64), np.zeros(0, _U64))
        return empty if whole else empty[:2]
    out = tuple(np.concatenate([p[k] for p in parts]) for k in range(3))
    return out if whole else out[:2]


def _many(docs: list[bytes], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    data = np.frombuffer(b" ".join(docs) + b" ", dtype=np.uint8)  # a space ends every document
    offsets = np.cumsum([0] + [len(d) + 1 for d in docs])
    word = ~_WHITESPACE[data]
    starts = np.flatnonzero(word[1:] & ~word[:-1]) + 1
    if len(word) and word[0]:
        starts = np.concatenate([[0], starts])
    ends = np.flatnonzero(word[:-1] & ~word[1:]) + 1  # data ends with a space: every word ends
    words = _span_hashes(data, starts, ends)
    doc = np.searchsorted(offsets, starts, side="right") - 1
    counts = np.bincount(doc, minlength=len(docs))
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = np.arange(max(len(words) - n + 1, 0))
    k = k[doc[k] == doc[k + n - 1]]
    short = np.flatnonzero((counts > 0) & (counts < n))
    s = np.concatenate([k, first[short]])
    e = np.concatenate([k + n, first[short] + counts[short]])
    d = np.concatenate([doc[k], short])
    if len(short):  # regular n-grams are already in document order; merge the short documents in
        order = np.argsort(d, kind="stable")
        s, e, d = s[order], e[order], d[order]
    return _span_hashes(words, s, e), np.bincount(d, minlength=len(docs)), _span_hashes(words, first, first + counts)
