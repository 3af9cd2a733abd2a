"""Decontamination: drop training problems that share a word n-gram with an evaluation problem.

Text is lowercased and its whitespace collapsed; words are what lies between spaces; n = 8 by
default, as open-r1's decontamination script. A problem shorter than n words is one "n-gram" of
its whole text, so a short training problem matches only a short benchmark problem that equals it.
The reason names the benchmark (``contaminated:aime24``) so the report can count per benchmark.

>>> s = EvalSet.from_problems("aime24", ["Find the number of ordered pairs of positive integers (m, n) with m + n = 100."])
>>> contaminated_by("Let's solve: find the number of ORDERED pairs of positive integers (m, n) with m+n=7.", [s])
'aime24'
>>> contaminated_by("Find the remainder when 37 * 48 is divided by 1000.", [s]) is None
True
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.filters.base import RowFilter
from reasonkit.filters.text import ngram_hashes


@dataclass(frozen=True)
class EvalSet:
    """One benchmark's problem n-grams, as a sorted array of stable 64-bit hashes."""

    name: str
    hashes: np.ndarray
    problems: int
    n: int = 8

    @classmethod
    def from_problems(cls, name: str, problems: Sequence[str], n: int = 8) -> EvalSet:
        parts = [ngram_hashes(p, n) for p in problems if isinstance(p, str) and p.strip()]
        hashes = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
        return cls(name, hashes, len(parts), n)

    def overlaps(self, hashes: np.ndarray) -> bool:
        if len(hashes) == 0 or len(self.hashes) == 0:
            return False
        pos = np.searchsorted(self.hashes, hashes)
        pos[pos == len(self.hashes)] = 0
        return bool((self.hashes[pos] == hashes).any())


def parse_spec(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` or ``PATH`` (named by its file stem, a dataset by its own name) -> ``(name, path)``.

    PATH is anything readers.read_table reads, a Hugging Face dataset included
    (``math500=HuggingFaceH4/MATH-500:test``; dataset_ref.py).

    >>> parse_spec("HuggingFaceH4/aime_2024:train")
    ('aime_2024', 'HuggingFaceH4/aime_2024:train')
    """
    from reasonkit.dataset_ref import parse

    if "=" in spec and not Path(spec).exists():
        name, path = spec.split("=", 1)
        if not name.strip() or not path.strip():
            raise UserError(f"--decontam {spec!r}: expected PATH or NAME=PATH")
        return name.strip(), path.strip()
    ref = parse(spec)
    if ref is not None:
        return ref.short_name, spec
    path = Path(spec)
    return (path.stem if path.suffix else path.name), spec


def load_eval_set(spec: str, column: str = "problem", n: int = 8) -> EvalSet:
    """Read a benchmark (Parquet/JSONL/CSV, a stage directory, or a Hugging Face dataset by Hub id
    or Hub-layout folder, its only split unless ``:SPLIT`` names one) and hash its problems."""
    from reasonkit.readers import read_table

    name, path = parse_spec(spec)
    table, where = read_table(path)
    if column not in table.column_names:
        raise UserError(
            f"{where}: no {column!r} column to decontaminate against; found columns {table.column_names} "
            "(name the problem column with --set decontam_column=NAME)"
        )
    return EvalSet.from_problems(name, table.column(column).to_pylist(), n)


def load_eval_sets(specs: Sequence[str], column: str = "problem", n: int = 8) -> list[EvalSet]:
    sets = [load_eval_set(s, column, n) for s in specs]
    names = [s.name for s in sets]
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise UserError(f"--decontam: two benchmarks named {dupes[0]!r}; name them with NAME=PATH")
    return sets


def contaminated_by(problem: str, sets: Sequence[EvalSet]) -> str | None:
    """Name of the first benchmark sharing an n-gram (of that benchmark's n) with ``problem``, or None."""
    hashes: dict[int, np.ndarray] = {}
    for s in sets:
        if s.n not in hashes:
            hashes[s.n] = ngram_hashes(problem, s.n)
        if s.overlaps(hashes[s.n]):
            return s.name
    return None


def problem_texts(batch: pa.Table) -> list[str]:
    """The problem of each row: the ``problem`` column if the prompts had one, else the last user turn."""
    if "problem" in batch.column_names and pa.types.is_string(batch.schema.field("problem").type):
        problems = batch.column("problem").to_pylist()
    else:
        problems = [None] * batch.num_rows
    messages = batch.column("messages").to_pylist()
    out = []
    for p, turns in zip(problems, messages):
        if p is None:
            users = [t["content"] for t in turns or [] if t["role"] == "user"]
            p = users[-1] if users else ""
        out.append(p or "")
    return out


class DecontamFilter(RowFilter):
    """Drops rows whose problem overlaps an evaluation set (reason ``contaminated:<name>``)."""

    name = "decontam"

    def __init__(self, sets: Sequence[EvalSet]):
        self.sets = list(sets)
        self.reasons = tuple(f"contaminated:{s.name}" for s in self.sets)

    def judge(self, batch: pa.Table, rows: list[int]):
        problems = problem_texts(batch)
        ids = batch.column("id").to_pylist()
        seen: dict[str, str | None] = {}  # once per prompt, not per sample
        reasons = []
        for i in rows:
            if ids[i] not in seen:
                hit = contaminated_by(problems[i], self.sets)
                seen[ids[i]] = None if hit is None else f"contaminated:{hit}"
            reasons.append(seen[ids[i]])
        return reasons
