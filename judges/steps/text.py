r"""Steps of a solution as text: how a step prefix is continued, and the Step-DPO pair a labelled solution
gives. Pure functions on strings (no model); judges/steps/run.py runs the rollouts. How a solution is cut into
steps is reward/steps.py's (a process reward model reads the steps the same way).

>>> steps = split_steps("7 * 8 = 56\n\n3 * 4 = 12\n</think>\nThe answer is \\boxed{56}.")
>>> prefix(steps, 2)
'7 * 8 = 56\n3 * 4 = 12\n'
"""

from __future__ import annotations

from reasonkit.reward.steps import SEPARATOR, first_error, split_steps


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
