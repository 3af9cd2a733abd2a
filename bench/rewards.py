"""Benchmark: what the GRPO rewards cost per step, against the step they must stay under 2% of.

    python bench/rewards.py                      # 64 completions a step (8 prompts x G 8), 6 steps
    python bench/rewards.py --prompts 16 --steps 10 --rewards accuracy,format

Each step is a fresh batch of the synthetic task's worked solutions (recipes/tasks/math.py, the ``aime``
variant), half of them with a slip in one line and a wrong final answer, as conversational
completions, half with ``<think>`` left to the prompt; every reward of reward/functions.py is called
as TRL calls it. The first step pays once for lingua's detector and TRL's import; the rest is the
per-step cost. Measured here (2 shared cores): ~7.5 ms a step for all six rewards on 64
completions (format 3.3, arithmetic 2.0, language 1.0, accuracy 0.5, cosine 0.5, length 0.2 ms),
0.4% of the 1.9 s GRPO step of the issue; the first step 0.8-1.3 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

STEP_SECONDS = 1.9  # a plain TRL GRPOTrainer step on the quickstart's student (issue 16)


def batch(seed: int, prompts: int, group: int) -> tuple[list, list, list, list]:
    from reasonkit.recipes.tasks import math as task

    rng = random.Random(seed)
    out: tuple[list, list, list, list] = ([], [], [], [])
    for p in task.make_problems(prompts, seed=seed, variant="aime"):
        for g in range(group):
            text = task.solution(p)
            if rng.random() < 0.5:  # a slip in one line, and a wrong answer
                lines = text.split("\n")
                k = rng.randrange(1, len(lines) - 2)
                lines[k] += "1"
                text = "\n".join(lines).replace("boxed{", "boxed{9", 1)
            if g % 2:
                text = text.removeprefix("<think>\n")  # a template that opened the block
            out[0].append([{"role": "user", "content": task.user_content(p["problem"])}])
            out[1].append([{"role": "assistant", "content": text}])
            out[2].append([1] * rng.randrange(40, 128))
            out[3].append(p["answer"])
    return out


def main() -> None:
    from reasonkit.reward.functions import NAMES, close, make_rewards

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8, help="completions per prompt (G)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rewards", default=",".join(NAMES))
    args = parser.parse_args()
    funcs, _ = make_rewards({n: 1.0 for n in args.rewards.split(",")}, max_completion_length=128)
    times: dict[str, list[float]] = {f.__name__: [] for f in funcs}
    try:
        for step in range(args.steps):
            prompts, completions, ids, answers = batch(step, args.prompts, args.group)
            for f in funcs:
                start = time.perf_counter()
                f(prompts, completions, ids, answer=answers)
                times[f.__name__].append(time.perf_counter() - start)
    finally:
        close()
    n = args.prompts * args.group
    first = sum(t[0] for t in times.values())
    print(f"{n} completions a step; first step {first * 1000:.0f} ms (one-time loads)")
    per_step = 0.0
    for name, t in times.items():
        ms = statistics.median(t[1:] or t) * 1000
        per_step += ms
        print(f"  {name:<11} {ms:7.2f} ms")
    print(f"all: {per_step:.2f} ms a step = {per_step / 10 / STEP_SECONDS:.2f}% of a {STEP_SECONDS} s GRPO step")


if __name__ == "__main__":
    main()
