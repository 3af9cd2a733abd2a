r"""Traces built from literal strings, for tests and the benchmark (no model, no network).

>>> t = traces_table([trace("p1", response=r"So \boxed{4}.")])
>>> t.column("completion").to_pylist()
['<think>2 + 2 = 4.</think>So \\boxed{4}.']
>>> rows = synthetic_rows(4, "latex", samples=2, seed=0)
>>> len(rows), sorted({r["source"] for r in rows})
(8, ['synthetic/latex'])
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa

from reasonkit.schema import validate
from reasonkit.store import StageWriter


def trace(
    id: str,
    sample: int = 0,
    *,
    problem: str = "What is 2 + 2?",
    reasoning: str | None = "2 + 2 = 4.",
    response: str = r"The answer is \boxed{4}.",
    answer: str | None = "4",
    finish_reason: str = "stop",
    source: str | None = "test",
    completion: str | None = None,
    tokens: int | None = None,
    **extra,
) -> dict:
    """One traces row; ``completion`` defaults to ``<think>{reasoning}</think>{response}``."""
    if completion is None:
        completion = response if reasoning is None else f"<think>{reasoning}</think>{response}"
    return {
        "id": id,
        "sample": sample,
        "messages": [{"role": "user", "content": problem}],
        "completion": completion,
        "reasoning": reasoning,
        "response": response,
        "finish_reason": finish_reason,
        "prompt_tokens": len(problem.split()),
        "completion_tokens": len(completion.split()) if tokens is None else tokens,
        "teacher": "literal",
        "gen_config": "0" * 16,
        "answer": answer,
        "source": source,
        **extra,
    }


def traces_table(rows: list[dict]) -> pa.Table:
    from reasonkit.schema import MESSAGES

    cols = {k: [r.get(k) for r in rows] for k in rows[0]}
    arrays = {k: pa.array(v, MESSAGES) if k == "messages" else pa.array(v) for k, v in cols.items()}
    return validate(pa.table(arrays), "traces", "literal traces")


def write_traces(
    path: str | os.PathLike, rows: list[dict] | pa.Table, *, shard_rows: int = 1000, complete: bool = True
) -> Path:
    """A traces stage directory as `distill generate` would leave it."""
    table = rows if isinstance(rows, pa.Table) else traces_table(rows)
    w = StageWriter(path, stage="generate", kind="traces", config={"literal": True}, keys=("id", "sample"))
    for start in range(0, table.num_rows, shard_rows):
        w.commit(table.slice(start, shard_rows))
    if complete:
        w.finish()
    return Path(path)


_FILLER = (
    "Let me work through this carefully. First I restate the problem, then I compute each part "
    "and check the result against a quick estimate before writing the final answer."
)


def latex_case(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(gold, equivalent predictions, wrong predictions) from fractions, radicals or intervals."""
    kind = rng.randrange(3)
    if kind == 0:
        p, q = rng.randrange(1, 40), rng.randrange(41, 97)
        k = rng.randrange(2, 5)
        right = [rf"\frac{{{p}}}{{{q}}}", rf"\frac{{{p * k}}}{{{q * k}}}", rf"\dfrac{{{p}}}{{{q}}}", f"{p}/{q}"]
        return rf"\frac{{{p}}}{{{q}}}", right, [rf"\frac{{{p + 1}}}{{{q}}}", rf"\frac{{{q}}}{{{p}}}"]
    if kind == 1:
        a, b = rng.randrange(2, 9), rng.choice([2, 3, 5, 6, 7, 10, 11])
        right = [rf"{a}\sqrt{{{b}}}", rf"\sqrt{{{a * a * b}}}", rf"{a} \sqrt {{{b}}}"]
        return rf"{a}\sqrt{{{b}}}", right, [rf"{a + 1}\sqrt{{{b}}}", rf"{a}\sqrt{{{b + 1}}}"]
    lo, hi = sorted(rng.sample(range(-20, 20), 2))
    left, rightb = rng.choice("(["), rng.choice(")]")
    gold = f"{left}{lo}, {hi}{rightb}"
    flipped = ("[" if left == "(" else "(") + f"{lo}, {hi}" + rightb
    right = [gold, f"{left}{lo},{hi}{rightb}", rf"\left{left}{lo}, {hi}\right{rightb}"]
    return gold, right, [flipped, f"{left}{lo}, {hi + 1}{rightb}"]


def synthetic_rows(
    n_prompts: int,
    kind: str = "int",
    *,
    samples: int = 4,
    seed: int = 0,
    wrong: float = 0.3,
    reasoning_words: int = 60,
) -> list[dict]:
    """``n_prompts * samples`` R1-shaped traces with integer or LaTeX answers, ``wrong`` of them wrong."""
    rng = random.Random(f"{seed}/{kind}")
    rows = []
    for p in range(n_prompts):
        a, b = rng.randrange(10, 1000), rng.randrange(10, 1000)
        if kind == "int":
            gold = str(a * b)
            right = [gold, f"{a * b:,}", f"0{a * b}", f"{a * b}.0"]
            problem = f"What is {a} * {b}?"
        else:
            gold, right, bad = latex_case(rng)
            problem = f"Problem {p}: simplify the expression built from {a} and {b}."
        for s in range(samples):
            if kind == "int":
                pred = str(a * b + rng.randrange(1, 50)) if rng.random() < wrong else rng.choice(right)
            else:
                pred = rng.choice(bad) if rng.random() < wrong else rng.choice(right)
            words = " ".join(rng.choice(_FILLER.split()) for _ in range(reasoning_words))
            reasoning = f"\n{problem} {words} {s}\n"
            response = f"\n\nPutting it together, {_FILLER[:80]} The final answer is $\\boxed{{{pred}}}$."
            rows.append(
                trace(
                    f"{kind}-{p}",
                    s,
                    problem=problem,
                    reasoning=reasoning,
                    response=response,
                    answer=gold,
                    source=f"synthetic/{kind}",
                )
            )
    return rows
