"""The synthetic code task: programs that compute the math task's arithmetic, read from stdin.

The code quickstart's data (issue 19, item 5). Each problem is one of the math task's pairs
(recipes/tasks/math.py: the same pair space and held-out split): it asks for a program that reads two
integers from standard input and prints their product (``mul``) or the product's remainder mod 1000
(``aime``), with the pair as the worked example. Its ``tests`` column holds five stdin/stdout tests
in APPS/TACO's ``input_output`` shape: the example and four other pairs, so a program that prints
the example's answer whatever the input fails four of five.

>>> p = make_problems(1, seed=0, variant="aime")[0]
>>> sorted(p), p["id"].startswith("code-aime-"), len(json.loads(p["tests"])["inputs"])
(['id', 'problem', 'source', 'tests'], True, 5)
>>> print(solution({"problem": "Write a Python program that reads two integers a and b from standard input "
...                             "and prints the remainder when a * b is divided by 1000. Example: input 37 48, output 776."}))
<think>
read a and b, multiply, keep the last three digits
37 * 48 = 1776, 1776 mod 1000 = 776
</think>
```python
a, b = map(int, input().split())
print(a * b % 1000)
```
"""  # noqa: E501

from __future__ import annotations

import json
import random
import re

from reasonkit.recipes.tasks import math as task

#: What each variant's program prints, in words (the prompt) and as code (the reference program).
ASKS = {
    "mul": ("their product a * b", "a * b"),
    "aime": ("the remainder when a * b is divided by 1000", "a * b % 1000"),
}
TESTS_PER_PROBLEM = 5
_EXAMPLE = re.compile(r"Example: input (\d+) (\d+), output (\d+)\.")


def _problem(a: int, b: int, variant: str, others: list[tuple[int, int]]) -> dict:
    words = ASKS[variant][0]
    text = (
        f"Write a Python program that reads two integers a and b from standard input and prints {words}. "
        f"Example: input {a} {b}, output {task.answer(a, b, variant)}."
    )
    cases = [(a, b)] + others
    tests = {
        "inputs": [f"{x} {y}\n" for x, y in cases],
        "outputs": [f"{task.answer(x, y, variant)}\n" for x, y in cases],
    }
    return {
        "id": f"code-{variant}-{a}x{b}",
        "problem": text,
        "tests": json.dumps(tests),
        "source": f"reasonkit/code-{variant}",
    }


def make_problems(n: int, seed: int = 0, variant: str = "mul", *, split: str = "train") -> list[dict]:
    """``n`` distinct problems of ``variant`` from ``split`` (the math task's pairs and split); each
    one's four extra tests are pairs of the same split, drawn with a seeded RNG."""
    pool = list(task.pairs(split))
    rng = random.Random(f"code/{seed}/{variant}/{split}")
    chosen = [(p["problem"], task.parse(p["problem"])) for p in task.make_problems(n, seed, variant, split=split)]
    return [_problem(a, b, variant, rng.sample(pool, TESTS_PER_PROBLEM - 1)) for _, (a, b, _) in chosen]


def solution(problem: dict | str) -> str:
    """The reference answer: a short think block working the example, then the program."""
    text = problem if isinstance(problem, str) else problem["problem"]
    m = _EXAMPLE.search(text)
    if m is None:
        raise ValueError(f"not a code task problem: {text!r}")
    a, b = int(m.group(1)), int(m.group(2))
    variant = "aime" if "divided by 1000" in text else "mul"
    work = f"{a} * {b} = {a * b}" + (f", {a * b} mod 1000 = {a * b % 1000}" if variant == "aime" else "")
    plan = "read a and b, multiply" + (", keep the last three digits" if variant == "aime" else "")
    return (
        f"<think>\n{plan}\n{work}\n</think>\n"
        f"```python\na, b = map(int, input().split())\nprint({ASKS[variant][1]})\n```"
    )


def write_prompts(path, n: int, seed: int = 0, variant: str = "mul", *, split: str = "train") -> None:
    """A prompts table (JSONL, or Parquet by the suffix) of ``n`` problems with their ``tests``."""
    rows = make_problems(n, seed, variant, split=split)
    if str(path).endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
