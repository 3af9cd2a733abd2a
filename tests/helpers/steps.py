"""Helpers of the label-steps and Step-DPO tests: a traces stage of the task's worked solutions, one of
them with a wrong number in a chosen line."""

import re

import pyarrow as pa

from reasonkit.recipes.tasks.math import make_problems, solution, user_content
from reasonkit.schema import validate
from reasonkit.store import StageWriter
from reasonkit.think import split


def corrupt(text: str, line: int) -> str:
    """``text`` with an arithmetic slip on reasoning line ``line`` (1-based): the line's result one
    too large, and its digit and carry following from the wrong result, as a model's slip would.

    >>> corrupt("<think>\\n7 * 8 = 56: units 6, carry 5\\nthousands 1\\n</think>", 1)
    '<think>\\n7 * 8 = 57: units 7, carry 5\\nthousands 1\\n</think>'
    """
    lines = text.split("\n")  # line 0 is "<think>"
    m = re.search(r"= (\d+): (\w+) \d, carry \d+$", lines[line])
    assert m, f"line {line} has no 'R: place D, carry C' result: {lines[line]!r}"
    wrong = int(m.group(1)) + 1
    lines[line] = lines[line][: m.start()] + f"= {wrong}: {m.group(2)} {wrong % 10}, carry {wrong // 10}"
    return "\n".join(lines)


def reasoning_lines(text: str) -> list[str]:
    return split(text)[0].split("\n")


def traces_stage(path, problems: list[dict], texts: list[str], *, answers: list | None = None) -> str:
    """A finished traces stage directory of the given completion texts; a problem listed twice has samples 0, 1."""
    rows = []
    for i, (p, text) in enumerate(zip(problems, texts)):
        reasoning, response = split(text)
        rows.append(
            {
                "id": p["id"],
                "sample": sum(r["id"] == p["id"] for r in rows),
                "messages": [{"role": "user", "content": user_content(p["problem"])}],
                "completion": text,
                "reasoning": reasoning,
                "response": response,
                "finish_reason": "stop",
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "teacher": "t",
                "gen_config": "g",
                "answer": p["answer"] if answers is None else answers[i],
                "source": p["source"],
            }
        )
    writer = StageWriter(path, stage="generate", kind="traces", config={}, keys=("id", "sample"))
    writer.commit(validate(pa.Table.from_pylist(rows), "traces"))
    writer.finish()
    return str(path)


def problems(n: int = 1) -> list[dict]:
    return make_problems(n, seed=0, variant="mul")


def corrupted_stage(path, line: int = 3) -> tuple[str, dict, str]:
    """A traces stage of one problem whose solution has a wrong number on reasoning line ``line``."""
    p = problems(1)[0]
    text = corrupt(solution(p), line)
    return traces_stage(path, [p], [text]), p, text
