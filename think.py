"""The student's text layout, R1's: ``<think>\\n{reasoning}\\n</think>\\n\\n{response}``, in one place.

Generation splits a raw completion into its reasoning (inside ``<think>``) and its response (after)
(:func:`split`); the filter writes a kept trace back as the SFT row's assistant turn
(:func:`assistant_turn`); pairs, judges and the reward scorer read a trace's turn (:func:`candidate_text`).
One module, low in the spine (it imports nothing), so every stage lays the text out the same way.

R1-style models write ``<think>\\n...\\n</think>\\n\\nanswer``. Prompts that open the block
themselves (R1's chat template since 2025-01, QwQ's, Qwen3 Thinking-2507's, our ``--prefill-think``)
leave only the closing tag in the completion, so a lone ``</think>`` also closes a reasoning block
that began before the text.

What the text alone cannot say: a completion cut by ``max_tokens`` before its ``</think>``, after
a prompt that opened the block, holds no tag at all and reads like a model that does not reason.
Only the prompt tells them apart, so the caller passes ``prefilled`` -- true for ``--prefill-think``
and for any rendered prompt :func:`opens_think` says leaves the block open. Evaluation does not
depend on it: a sample whose ``finish_reason`` is ``length`` has no answer there (R1's protocol).

>>> split("<think>\\n12 * 3 = 36\\n</think>\\nThe answer is \\\\boxed{36}.")
('12 * 3 = 36', 'The answer is \\\\boxed{36}.')
>>> split("12 * 3 = 36</think>\\n\\n36")   # <think> was prefilled by the prompt
('12 * 3 = 36', '36')
>>> split("<think>\\nstill thinking when max_tokens ran out")   # truncated: all reasoning
('still thinking when max_tokens ran out', '')
>>> split("no think block at all")
(None, 'no think block at all')
>>> split("still thinking when max_tokens ran out", prefilled=opens_think("<|Assistant|><think>\\n"))
('still thinking when max_tokens ran out', '')
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


def split(text: str, *, prefilled: bool = False) -> tuple[str | None, str]:
    """``(reasoning, response)`` of one completion.

    ``reasoning`` is None when the text shows no think block at all: a model that does not
    reason, or a truncated one whose prompt opened the block and ``prefilled`` was not passed
    (the text cannot tell those apart). An unclosed block (a truncation, or ``prefilled`` with no
    ``</think>``) gives ``(all of it, "")`` so the filters see an empty response and the ``length``
    finish reason.
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


def opens_think(prompt: str) -> bool:
    """Whether a rendered prompt ends inside an open think block, so the completion starts in it.

    True for a template that adds ``<think>\\n`` to the generation prompt (R1's, QwQ's); false for
    one that adds nothing, and for Qwen3's non-thinking mode, which closes an empty block itself.

    >>> opens_think("<|User|>What is 2+2?<|Assistant|><think>\\n")
    True
    >>> opens_think("<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n"), opens_think("<|im_start|>assistant\\n")
    (False, False)
    """
    return prompt.rfind(OPEN) > prompt.rfind(CLOSE)


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


def assistant_turn(reasoning: str | None, response: str) -> str:
    r"""The assistant turn an SFT row carries for a kept trace: R1's layout
    ``<think>\n{reasoning}\n</think>\n\n{response}`` when the trace had a think block (a prefilled
    one included: ``reasoning`` holds it), the response alone when it had none -- a non-reasoning
    teacher's answer is not wrapped in a block it never wrote.

    >>> assistant_turn("2 * 3 = 6", "\\boxed{6}")
    '<think>\n2 * 3 = 6\n</think>\n\n\\boxed{6}'
    >>> assistant_turn(None, "\\boxed{6}")
    '\\boxed{6}'
    """
    return join(None if reasoning is None else reasoning.strip(), response.strip())


def candidate_text(row: dict, include_reasoning: bool = True) -> str:
    """The assistant turn of a traces/verdicts row.

    >>> candidate_text({"reasoning": "2 * 3 = 6", "response": "6", "completion": "..."})
    '<think>\\n2 * 3 = 6\\n</think>\\n\\n6'
    >>> candidate_text({"reasoning": "2 * 3 = 6", "response": "6"}, include_reasoning=False)
    '6'
    >>> candidate_text({"completion": " raw text "})
    'raw text'
    """
    if "response" in row and row.get("response") is not None:
        reasoning = row.get("reasoning") if include_reasoning else None
        return join(reasoning, row["response"]).strip()
    return (row.get("completion") or "").strip()
