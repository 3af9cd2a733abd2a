"""What every pre-training check shares: the finding it reports and the few token helpers the checks use.

distill/lint/checks.py runs the checks; student.py, prompt.py and memory.py add theirs. They all import
this module and it imports none of them, so the lint family has no circle.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Finding:
    check: str
    message: str


def chat_ids(tok, messages, **kwargs) -> list[int]:
    return list(tok.apply_chat_template(messages, tokenize=True, return_dict=True, **kwargs)["input_ids"])


def stop_at_end(tok, trained: list[int], stops: set[int]) -> int | None:
    """The stop token ending the span, ignoring trailing whitespace tokens (``<|im_end|>\\n``); None if none."""
    for token in reversed(trained):
        if token in stops:
            return token
        if tok.decode([token]).strip():
            return None
    return None


def sample_rows(table: pa.Table, limit: int):
    n = table.num_rows
    picks = list(range(n)) if n <= limit else sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return zip(picks, table.take(picks).to_pylist(), strict=True)
