r"""Format: the cheap structural checks R1's rejection sampling starts with.

In order (the first failing check names the drop): generation error, truncated (``finish_reason``
``length``), think block opened and never closed (``unclosed_think``) or, with ``think="required"``,
never written (``no_think``), empty response, no ``\boxed`` answer (only if required), token bounds,
and degenerate repetition.

A think block is optional by default: R1's distillation data always has one, but a generic teacher
(an instruct model behind an OpenAI-compatible server) writes none, and requiring it would drop all
of that teacher's rows. ``think="required"`` keeps only traces that reasoned in a block.

The repetition score is the share of repeated word n-grams: ``1 - distinct / total`` over the
completion's word 8-grams (normalised like dedup). A reasoning loop that says the same paragraph
k times scores about ``1 - 1/k``; ordinary reasoning scores near 0.

>>> repetition_score("one two three four five six seven eight nine ten")
0.0
>>> round(repetition_score("wait let me check that again " * 20), 2)  # the same 6 words, 20 times
0.95
>>> format_reason("<think>ok</think>The answer is 4.", "The answer is 4.", "stop", 9)
>>> format_reason("<think>ok</think>", "", "stop", 9)
'empty_response'
>>> format_reason("<think>ok, so", "", "length", 4096)
'truncated'
>>> format_reason("The answer is 4.", "The answer is 4.", "stop", 9)   # no think block: fine by default
>>> format_reason("The answer is 4.", "The answer is 4.", "stop", 9, think="required")
'no_think'
>>> format_reason("<think>ok</think>4", "4", "stop", 9, require_boxed=True)
'no_boxed'
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from reasonkit.filters.base import RowFilter
from reasonkit.filters.text import ngram_hashes, repetition_scores

REASONS = (
    "gen_error",
    "truncated",
    "unclosed_think",
    "no_think",
    "empty_response",
    "no_boxed",
    "too_short",
    "too_long",
    "repetitive",
)
THINK = ("optional", "required")
REPETITION_NGRAM = 8


def repetition_score(text: str, n: int = REPETITION_NGRAM) -> float:
    """Share of the word ``n``-grams of ``text`` that repeat an earlier one (0.0 for short text)."""
    hashes = ngram_hashes(text, n)
    if len(hashes) < 2:
        return 0.0
    return 1.0 - len(np.unique(hashes)) / len(hashes)


def format_reason(
    completion: str,
    response: str | None,
    finish_reason: str,
    completion_tokens: int,
    *,
    drop_truncated: bool = True,
    require_boxed: bool = False,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
    max_repetition: float | None = None,
    repetition_ngram: int = REPETITION_NGRAM,
    think: str = "optional",
    opened: bool | None = None,
) -> str | None:
    """The first format problem of one completion, or None.

    ``opened``: whether a think block was opened, in the completion or by the prompt (a template or
    ``--prefill-think`` that writes ``<think>`` leaves only ``</think>`` in the text). None: judged
    from the completion alone. Traces say it by ``reasoning``: None means no block at all.
    """
    if think not in THINK:
        raise ValueError(f"think must be 'required' or 'optional', got {think!r}")
    if finish_reason == "error":
        return "gen_error"
    if finish_reason == "length" and drop_truncated:
        return "truncated"
    if "</think>" not in completion:
        block_opened = ("<think>" in completion) if opened is None else opened
        if block_opened:
            return "unclosed_think"
        if think == "required":
            return "no_think"
    if not (response or "").strip():
        return "empty_response"
    if require_boxed and "\\boxed" not in response and "\\fbox" not in response:
        return "no_boxed"
    if min_tokens is not None and completion_tokens < min_tokens:
        return "too_short"
    if max_tokens is not None and completion_tokens > max_tokens:
        return "too_long"
    if max_repetition is not None and repetition_score(completion, repetition_ngram) > max_repetition:
        return "repetitive"
    return None


class FormatFilter(RowFilter):
    """:func:`format_reason` over a batch; the options are :func:`format_reason`'s keywords."""

    name = "format"
    reasons = REASONS

    def __init__(self, **options):
        self.options = options
        format_reason("</think>x", "x", "stop", 1, **options)  # bad keywords fail now, not mid-run

    def judge(self, batch: pa.Table, rows: list[int]):
        cols = [batch.column(c).to_pylist() for c in ("completion", "response", "finish_reason", "completion_tokens")]
        reasoning = batch.column("reasoning").to_pylist()
        # format_reason's last check, repetition, runs for the whole batch in one numpy pass
        # (text.repetition_scores: the same scores, ~6x faster than text by text).
        limit = self.options.get("max_repetition")
        reasons = [
            format_reason(
                *(c[i] for c in cols), opened=reasoning[i] is not None, **{**self.options, "max_repetition": None}
            )
            for i in rows
        ]
        if limit is not None:
            n = self.options.get("repetition_ngram", REPETITION_NGRAM)
            scores = repetition_scores([cols[0][i] for i in rows], n)
            reasons = [r if r is not None or s <= limit else "repetitive" for r, s in zip(reasons, scores)]
        return reasons
