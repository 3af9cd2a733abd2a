r"""A solution's steps, as a process reward model reads them: cut as ``distill label-steps`` labels them, and
encoded as ``distill train --method prm`` trains on them and the scorer (reward/scorer.py) scores them.

A solution is the assistant turn after what the prompt string already holds. For a reasoning
trace that is ``reasoning + "\n</think>\n" + response`` and the prompt string ends with the
``<think>\n`` that opened it. Cut at the separator (a line by default), empty pieces skipped, a
lone ``</think>`` glued to the step after it (it opens the response; it is no step of its own),
so ``prompt + "".join(step + separator for step in steps)`` is the text the model wrote, up to
blank lines.

>>> split_steps("7 * 8 = 56\n\n3 * 4 = 12\n</think>\nThe answer is \\boxed{56}.")
['7 * 8 = 56', '3 * 4 = 12', '</think>\nThe answer is \\boxed{56}.']
"""

from __future__ import annotations

from reasonkit.think import CLOSE, OPEN, split

SEPARATOR = "\n"


def split_steps(text: str, separator: str = SEPARATOR) -> list[str]:
    r"""The steps of ``text``: pieces between separators, stripped, empty ones skipped.

    >>> split_steps("a\n</think>")  # a response that is missing: the tag closes the last step
    ['a\n</think>']
    >>> split_steps("one. two.", separator=". ")
    ['one', 'two.']
    """
    steps: list[str] = []
    glue = None
    for piece in text.split(separator):
        piece = piece.strip()
        if not piece:
            continue
        if piece == CLOSE:
            glue = piece
            continue
        steps.append(piece if glue is None else glue + separator + piece)
        glue = None
    if glue is not None:
        if steps:
            steps[-1] += separator + glue
        else:
            steps.append(glue)
    return steps


def solution_body(row: dict) -> tuple[str, bool]:
    r"""The assistant turn of a traces/verdicts row without its opening ``<think>``, and whether it
    starts inside a think block (then the prompt string must hold the ``<think>\n``).

    >>> solution_body({"reasoning": "7 * 8 = 56", "response": "The answer is 56."})
    ('7 * 8 = 56\n</think>\nThe answer is 56.', True)
    >>> solution_body({"reasoning": None, "response": "56"})
    ('56', False)
    """
    reasoning, response = row.get("reasoning"), row.get("response")
    if response is None:  # a table with the raw completion only
        reasoning, response = split(row.get("completion") or "")
    if reasoning is None:
        return response or "", False
    return f"{reasoning}\n{CLOSE}\n{response or ''}", True


def opening(in_think: bool, template_opens_think: bool) -> str:
    r"""What the prompt string adds after the chat template's generation prompt: the ``<think>\n``
    that opens the reasoning, unless the template writes it itself (R1's, Qwen3's).

    >>> opening(True, False), opening(True, True), opening(False, False)
    ('<think>\n', '', '')
    """
    return f"{OPEN}\n" if in_think and not template_opens_think else ""


def first_error(labels: list[bool]) -> int | None:
    """Index of the first step no rollout could finish correctly (None: every step is good).

    >>> first_error([True, True, False, True]), first_error([True])
    (2, None)
    """
    return next((i for i, good in enumerate(labels) if not good), None)


def encode_steps(tok, prompt: str, steps: list[str], separator: str) -> tuple[list[int], list[int]]:
    """(input ids, the index of each step's last token): where its label is trained and its score read.

    >>> class Tok:  # one id per character
    ...     bos_token_id = 0
    ...     def __call__(self, text, add_special_tokens=False):
    ...         return {"input_ids": [ord(ch) for ch in text]}
    >>> ids, ends = encode_steps(Tok(), "Q", ["ab", "c"], "|")
    >>> ids, ends
    ([0, 81, 97, 98, 124, 99, 124], [4, 6])
    """
    sep = tok(separator, add_special_tokens=False)["input_ids"]
    ids = ([tok.bos_token_id] if tok.bos_token_id is not None else []) + tok(prompt, add_special_tokens=False)[
        "input_ids"
    ]
    ends = []
    for step in steps:
        ids += tok(step, add_special_tokens=False)["input_ids"] + sep
        ends.append(len(ids) - 1)
    return ids, ends
