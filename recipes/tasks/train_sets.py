"""sft and prefs stage directories built straight from the synthetic task (no teacher, no filter).

For tests, the training benchmark and smoke runs: every row is the task's worked solution, so a
student trained on it must get better, and a rejected completion differs from its chosen one only
in the final answer (the kind of pair the verify filter produces).

>>> import tempfile
>>> d = write_sft(tempfile.mkdtemp(), n=4)
>>> from reasonkit.store import read_stage
>>> read_stage(d, kind="sft").column("messages")[0].as_py()[1]["content"].startswith("<think>")
True
"""

from __future__ import annotations

import os
import random

import pyarrow as pa

from reasonkit.recipes.tasks import math as task
from reasonkit.store import StageWriter


def sft_table(n: int, seed: int = 0, variant: str = "mul", *, extra_checks: tuple[int, int] | None = None) -> pa.Table:
    """``n`` sft rows; ``extra_checks=(lo, hi)`` appends lo..hi (uniform) verification lines to each
    reasoning, giving traces of widely varying length from the same task."""
    rng = random.Random(seed)
    problems = task.make_problems(n, seed, variant)
    messages = []
    for p in problems:
        text = task.solution(p)
        if extra_checks:
            a, b, _ = task.parse(p["problem"])
            checks = "".join(f"check {i + 1}: {b} * {a} = {a * b}\n" for i in range(rng.randint(*extra_checks)))
            text = text.replace("</think>", checks + "</think>", 1)
        messages.append(
            [{"role": "user", "content": task.user_content(p["problem"])}, {"role": "assistant", "content": text}]
        )
    return pa.table(
        {"id": [p["id"] for p in problems], "messages": messages, "source": [p["source"] for p in problems]}
    )


def prefs_table(n: int, seed: int = 0, variant: str = "mul") -> pa.Table:
    """``n`` prefs rows: the worked solution over the same solution with a wrong final answer."""
    problems = task.make_problems(n, seed, variant)
    chosen = [task.solution(p) for p in problems]
    rejected = [_wrong(text, p["answer"]) for text, p in zip(chosen, problems, strict=True)]
    return pa.table(
        {
            "id": [p["id"] for p in problems],
            "prompt": [[{"role": "user", "content": task.user_content(p["problem"])}] for p in problems],
            "chosen": [[{"role": "assistant", "content": c}] for c in chosen],
            "rejected": [[{"role": "assistant", "content": r}] for r in rejected],
            "chosen_score": [1.0] * n,
            "rejected_score": [0.0] * n,
            "strategy": ["synthetic"] * n,
        }
    )


def _wrong(text: str, answer: str) -> str:
    bad = str(int(answer) + 1 + int(answer) % 7)
    return text.replace("\\boxed{" + answer + "}", "\\boxed{" + bad + "}")


def write_stage(out_dir: str | os.PathLike, kind: str, table: pa.Table) -> str:
    """Write ``table`` as a complete stage directory of ``kind`` ("sft" or "prefs")."""
    writer = StageWriter(out_dir, stage=kind, kind=kind, config={"synthetic": True}, keys=("id",), overwrite=True)
    writer.commit(table)
    writer.finish()
    return str(out_dir)


def write_sft(out_dir: str | os.PathLike, n: int = 64, seed: int = 0, **kwargs) -> str:
    return write_stage(out_dir, "sft", sft_table(n, seed, **kwargs))


def write_prefs(out_dir: str | os.PathLike, n: int = 32, seed: int = 0, **kwargs) -> str:
    return write_stage(out_dir, "prefs", prefs_table(n, seed, **kwargs))
