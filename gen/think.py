"""Splitting a raw completion into its reasoning (inside ``<think>``) and its response (after).

R1-style models write ``<think>\\n...\\n</think>\\n\\nanswer``. Templates that prefill ``<think>\\n``
(R1's own since 2025-01, Qwen3's, our ``--prefill-think``) leave only the closing tag in the
completion, so a lone ``</think>`` also closes a reasoning block that began before the text.

>>> split("<think>\\n12 * 3 = 36\\n</think>\\nThe answer is \\\\boxed{36}.")
('12 * 3 = 36', 'The answer is \\\\boxed{36}.')
>>> split("12 * 3 = 36</think>\\n\\n36")   # <think> was prefilled by the prompt
('12 * 3 = 36', '36')
>>> split("<think>\\nstill thinking when max_tokens ran out")   # truncated: all reasoning
('still thinking when max_tokens ran out', '')
>>> split("no think block at all")
(None, 'no think block at all')
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


def split(text: str, *, prefilled: bool = False) -> tuple[str | None, str]:
    """``(reasoning, response)`` of one completion.

    ``reasoning`` is None when the text has no think block at all (a model that does not
    reason); an unclosed block (a truncation, or ``prefilled`` with no ``</think>``) gives
    ``(all of it, "")`` so the filters see an empty response and the ``length`` finish reason.
    Surrounding whitespace is stripped from both parts; ``completion`` keeps the raw text.

    >>> split("truncated, but the prompt opened the block", prefilled=True)
    ('truncated, but the prompt opened the block', '')
    """
    start = text.find(OPEN)
    end = text.find(CLOSE)
    if start != -1 and (end == -1 or start < end):
        body = text[start + len(OPEN) :]
        end = body.find(CLOSE)
        if end == -1:
            return body.strip(), ""
        return body[:end].strip(), body[end + len(CLOSE) :].strip()
    if end != -1:  # only the closing tag: the opening one was in the prompt
        return text[:end].strip(), text[end + len(CLOSE) :].strip()
    if prefilled:
        return text.strip(), ""
    return None, text.strip()


def join(reasoning: str | None, response: str) -> str:
    """The raw completion of a server that returned reasoning separately (``reasoning_content``).

    >>> join("12 * 3 = 36", "36")
    '<think>\\n12 * 3 = 36\\n</think>\\n\\n36'
    >>> join(None, "36")
    '36'
    """
    if reasoning is None:
        return response
    return f"{OPEN}\n{reasoning}\n{CLOSE}\n\n{response}"
