"""A GRPO completion read as the filter reads a traces row: its raw text (string or conversational),
whether the prompt opened the think block, reasoning and response split as generation splits them
(think.py), and whether it was cut at the token limit. The rewards (reward/functions.py) and the
rollouts (distill/rl/grpo.py) both read completions through here, so they see the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """One completion as the filter would see it in a traces row."""

    text: str  # the raw completion
    reasoning: str | None  # inside the think block; None when there is none
    response: str  # after it
    truncated: bool  # used every token of the limit without ending
    tokens: int

    @property
    def chain_of_thought(self) -> str:
        """What the language filter reads: the reasoning, or the whole completion without one."""
        return self.reasoning if self.reasoning is not None else self.text


def completion_text(completion) -> str:
    """The raw text of a completion: a string, or the last assistant message of a conversational one.

    >>> completion_text([{"role": "assistant", "content": "4", "reasoning_content": "2 + 2 = 4"}])
    '<think>\\n2 + 2 = 4\\n</think>\\n\\n4'
    """
    if isinstance(completion, str):
        return completion
    messages = [m for m in completion if m.get("role", "assistant") == "assistant"] or list(completion)
    if not messages:
        return ""
    message = messages[-1]
    content = message.get("content") or ""
    if not isinstance(content, str):  # content blocks: [{"type": "text", "text": ...}]
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    reasoning = message.get("reasoning_content") or message.get("reasoning") or message.get("thinking")
    if reasoning:  # a response parser split the think block off: put it back as the model wrote it
        from reasonkit.think import join

        return join(reasoning.strip(), content.strip())
    return content


def prompt_opens_think(prompt) -> bool:
    """Whether a prompt leaves a think block open: a rendered string whose generation prompt ends in
    ``<think>``, or a conversational prompt ending with an assistant prefill that opens one."""
    from reasonkit.think import opens_think

    if isinstance(prompt, str):
        return opens_think(prompt)
    if prompt and isinstance(prompt[-1], dict) and prompt[-1].get("role") == "assistant":
        content = prompt[-1].get("content")
        return isinstance(content, str) and opens_think(content)
    return False


def samples(
    prompts: Sequence,
    completions: Sequence,
    completion_ids: Sequence | None,
    *,
    prefilled: bool = False,
    limit: int | None = None,
    eos_token_ids: Sequence[int] = (),
) -> list[Sample]:
    """Each completion split as generation splits a trace (think.py), with its truncation at
    ``limit`` tokens (TRL's max_completion_length) unless it ends with one of ``eos_token_ids``.

    >>> [s.reasoning for s in samples(["p"], ["<think>a</think>b"], None)]
    ['a']
    """
    from reasonkit.think import split

    out = []
    eos = set(eos_token_ids)
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        text = completion_text(completion)
        reasoning, response = split(text, prefilled=prefilled or prompt_opens_think(prompt))
        ids = completion_ids[i] if completion_ids is not None else None
        tokens = len(ids) if ids is not None else len(text.split())
        # As TRL tells a truncated completion (no EOS at the end), knowing only the limit: an
        # EOS that falls exactly on the limit is read as a cut unless the EOS ids are given.
        truncated = (
            ids is not None
            and limit is not None
            and len(ids) >= limit
            and not (eos and len(ids) and int(ids[-1]) in eos)
        )
        out.append(Sample(text, reasoning, response, truncated, tokens))
    return out
