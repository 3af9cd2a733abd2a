r"""Steps of a solution as text: how a solution is cut, how a step prefix is continued, and the
Step-DPO pair a labelled solution gives. Pure functions on strings (no model); judges/steps/run.py runs
the rollouts.

A solution is the assistant turn after what the prompt string already holds. For a reasoning
trace that is ``reasoning + "\n</think>\n" + response`` and the prompt string ends with the
``<think>\n`` that opened it. Cut at the separator (a line by default), empty pieces skipped, a
lone ``</think>`` glued to the step after it (it opens the response; it is no step of its own),
so ``prompt + "".join(step + separator for step in steps)`` is the text the model wrote, up to
blank lines.

>>> steps = split_steps("7 * 8 = 56\n\n3 * 4 = 12\n</think>\nThe answer is \\boxed{56}.")
>>> steps
['7 * 8 = 56', '3 * 4 = 12', '</think>\nThe answer is \\boxed{56}.']
>>> prefix(steps, 2)
'7 * 8 = 56\n3 * 4 = 12\n'
"""

from __future__ import annotations

from reasonkit.think import CLOSE, OPEN

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
        from reasonkit.think import split

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


def prefix(steps: list[str], j: int, separator: str = SEPARATOR) -> str:
    """The text of the first ``j`` steps, each closed by the separator (the rollout continues after it)."""
    return "".join(step + separator for step in steps[:j])


def first_step(continuation: str, separator: str = SEPARATOR) -> str | None:
    r"""The first step of a rollout's text, None when it wrote none.

    >>> first_step("\n3 * 4 = 12\nthousands 1\n"), first_step("  ")
    ('3 * 4 = 12', None)
    """
    steps = split_steps(continuation, separator)
    return steps[0] if steps else None


def first_error(labels: list[bool]) -> int | None:
    """Index of the first step no rollout could finish correctly (None: every step is good).

    >>> first_error([True, True, False, True]), first_error([True])
    (2, None)
    """
    return next((i for i, good in enumerate(labels) if not good), None)


def step_dpo_pair(row: dict, separator: str = SEPARATOR) -> tuple[dict | None, str | None]:
    r"""Step-DPO's pair of a labelled solution (a steps row with ``next_steps``), or None and why.

    The prompt is the row's prompt string plus the correct steps before the first wrong one;
    rejected is that wrong step, chosen the first step of a rollout from the same prefix that
    reached the gold answer (``next_steps[k]``), other than the wrong step. Both end with the
    separator, as the model writes a step.

    >>> row = {"id": "p", "sample": 0, "prompt": "Q <think>\n", "completions": ["a = 1", "b = 3", "c = 9"],
    ...        "labels": [True, False, False], "next_steps": [["a = 1"], ["b = 2", "b = 3"], []]}
    >>> pair, why = step_dpo_pair(row)
    >>> pair["prompt"], pair["chosen"], pair["rejected"], pair["step"]
    ('Q <think>\na = 1\n', 'b = 2\n', 'b = 3\n', 1)
    >>> step_dpo_pair({**row, "labels": [True, True, True]})
    (None, 'no_wrong_step')
    """
    k = first_error(row["labels"])
    if k is None:
        return None, "no_wrong_step"
    steps = row["completions"]
    candidates = [s for s in (row.get("next_steps") or [[]] * len(steps))[k] or [] if s != steps[k]]
    if not candidates:
        return None, "no_correct_rollout" if k == 0 else "no_other_correct_step"
    return {
        "id": row["id"],
        "sample": row.get("sample"),
        "prompt": row["prompt"] + prefix(steps, k, separator),
        "chosen": candidates[0] + separator,
        "rejected": steps[k] + separator,
        "strategy": "step-dpo",
        "step": k,
        "answer": row.get("answer"),
        "source": row.get("source"),
    }, None
