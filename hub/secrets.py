"""Credential-shaped strings in a table about to be published: defence in depth behind the sandbox.

A model's program output becomes a tool observation, then a dataset row, then a public dataset; a
token that leaked into any string (a trace, a tool result, a card) must stop ``distill push`` before
anything is uploaded. Every string of every column is scanned, nested ones too (``messages[].content``),
with one vectorized RE2 pass per column (pyarrow), so a large table costs seconds.

The patterns: detect-secrets' own (AWS access keys, PEM/OpenSSH/PuTTY private keys, OpenAI's legacy
keys, GitHub tokens: its plugins' ``denylist``, so they stay maintained upstream), plus what it does not
know: Hugging Face tokens (``hf_`` + 34 letters and digits) and OpenAI project / Anthropic style
``sk-`` keys (``sk-proj-...``, ``sk-ant-...``: ``sk-`` and at least 20 more key characters).

>>> import pyarrow as pa
>>> t = pa.table({"id": ["a", "b"], "response": ["fine", "token hf_" + "x" * 34]})
>>> [(f.column, f.ids) for f in find_secrets({"default": t})]
[('response', ['b'])]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# Not in detect-secrets 1.5 (its OpenAI plugin wants the legacy "T3BlbkFJ" marker; no HF plugin).
OWN_PATTERNS = {
    "Hugging Face token": r"\bhf_[A-Za-z0-9]{34}\b",
    "OpenAI/Anthropic-style key": r"\bsk-[A-Za-z0-9_-]{20,}",
}
SHOWN_IDS = 5


@dataclass(frozen=True)
class Finding:
    table: str
    column: str  # a dotted path into nested columns: messages.content
    kinds: tuple[str, ...]
    ids: list[str]  # the rows' ids (``id`` or ``id#sample``), or row numbers when there is no id column
    rows: int

    def line(self) -> str:
        shown = ", ".join(self.ids[:SHOWN_IDS]) + (
            f" and {self.rows - SHOWN_IDS} more" if self.rows > SHOWN_IDS else ""
        )
        return f"table {self.table!r}, column {self.column!r}: {' / '.join(self.kinds)} in row(s) {shown}"


@functools.cache
def patterns() -> dict[str, str]:
    """Kind -> RE2-compatible regex: detect-secrets' plugins' patterns and ours."""
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector

    out = {}
    for plugin in (AWSKeyDetector, PrivateKeyDetector, OpenAIDetector, GitHubTokenDetector):
        # AWS's second pattern (a 40-character secret near the word "aws") uses a lazy-quantified
        # context RE2 reads too; all are plain regexes.
        out[plugin.secret_type] = "|".join(f"(?:{p.pattern})" for p in plugin.denylist)
    out.update(OWN_PATTERNS)
    return out


def _strings(array: pa.Array, path: str):
    """(dotted path, flat string array, row index of each string) for every string inside ``array``."""
    rows = pa.array(range(len(array)), pa.int64())
    stack = [(path, array, rows)]
    while stack:
        name, arr, owner = stack.pop()
        kind = arr.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            yield name, arr, owner
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            parents = pc.list_parent_indices(arr)
            stack.append((name, pc.list_flatten(arr), pc.take(owner, parents)))
        elif pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                stack.append((f"{name}.{kind.field(i).name}", arr.field(i), owner))


def _row_ids(table: pa.Table, rows: list[int]) -> list[str]:
    if "id" not in table.column_names:
        return [f"row {r}" for r in rows]
    ids = table.column("id").take(rows).to_pylist()
    if "sample" in table.column_names:
        return [f"{i}#{s}" for i, s in zip(ids, table.column("sample").take(rows).to_pylist())]
    return [str(i) for i in ids]


def find_secrets(tables: dict[str, pa.Table]) -> list[Finding]:
    """Every (table, column) holding a credential-shaped string, with the rows that hold one."""
    findings = []
    for table_name, table in tables.items():
        for column in table.column_names:
            merged = table.column(column).combine_chunks() if table.num_rows else None
            if merged is None:
                continue
            for path, strings, owner in _strings(merged, column):
                hits: dict[str, set[int]] = {}
                for kind, regex in patterns().items():
                    mask = pc.fill_null(pc.match_substring_regex(strings, regex), False)
                    if pc.any(mask).as_py():
                        hits[kind] = set(pc.filter(owner, mask).to_pylist())
                if hits:
                    rows = sorted(set().union(*hits.values()))
                    findings.append(Finding(table_name, path, tuple(sorted(hits)), _row_ids(table, rows), len(rows)))
    return findings


def find_in_texts(texts: dict[str, str]) -> list[str]:
    """Generated files (the card, provenance.json) holding a credential-shaped string: their names."""
    import re

    return [name for name, text in texts.items() if any(re.search(p, text) for p in patterns().values())]
