"""The synthetic AIME-style task: 2-digit multiplication with short, regular worked solutions.

Two variants share one problem space, the ordered pairs ``(a, b)`` with ``10 <= a, b <= 99``:

- ``mul``:  "What is 37 * 48?"                                    answer 1776
- ``aime``: "Find the remainder when 37 * 48 is divided by 1000."  answer 776 (always 0..999,
  like an AIME answer)

The worked solution is schoolbook long multiplication, one column per line, least significant
first: a chain of single-digit facts and two-term sums that a 0.5M-parameter model can learn.

>>> p = make_problems(1, seed=0, variant="aime")[0]
>>> sorted(p)
['answer', 'id', 'problem', 'source']
>>> print(solution({"problem": "Find the remainder when 37 * 48 is divided by 1000."}))
<think>
7 * 8 = 56: units 6, carry 5
3 * 8 + 7 * 4 + 5 = 24 + 28 + 5 = 52 + 5 = 57: tens 7, carry 5
3 * 4 + 5 = 12 + 5 = 17: hundreds 7, carry 1
thousands 1
37 * 48 = 1776
1776 mod 1000 = 776
</think>
The answer is \\boxed{776}.

Held-out evaluation problems never share a factor pair with training problems: the pair space is
split once, deterministically (by a hash of the unordered pair, so ``37 * 48`` and ``48 * 37`` fall
on the same side), and ``split="test"`` draws only from the held-out side, whatever the seed.

>>> train = {p["problem"].split("?")[0] for p in make_problems(500, seed=1, variant="mul")}
>>> test = {p["problem"].split("?")[0] for p in make_problems(500, seed=1, variant="mul", split="test")}
>>> train & test
set()
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from functools import cache

from reasonkit.errors import UserError
from reasonkit.gen.render import R1_INSTRUCTION

#: DeepSeek-R1's recommended instruction (gen/render.py); generation appends it after the problem and a blank line.
INSTRUCTION = R1_INSTRUCTION
VARIANTS = ("mul", "aime")
SPLITS = ("train", "test")
#: About one unordered pair in ten is held out (by hash): 459 of 4,095, i.e. 914 of the 8,100 ordered pairs.
HELD_OUT_PER_TEN = 1
MODULUS = 1000

_TEMPLATES = {
    "mul": "What is {a} * {b}?",
    "aime": "Find the remainder when {a} * {b} is divided by 1000.",
}
_PARSE = re.compile(r"(\d+) \* (\d+)")


def is_held_out(a: int, b: int) -> bool:
    """Whether the pair ``(a, b)`` belongs to the held-out (test) side of the split.

    A hash, not ``(a + b) % 10``, so the held-out pairs carry no arithmetic pattern a model could
    exploit or miss. Symmetric in ``a`` and ``b``.

    >>> is_held_out(37, 48) == is_held_out(48, 37)
    True
    """
    lo, hi = min(a, b), max(a, b)
    digest = hashlib.sha256(f"{lo}*{hi}".encode()).digest()
    return digest[0] % 10 < HELD_OUT_PER_TEN


@cache
def pairs(split: str = "train") -> tuple[tuple[int, int], ...]:
    """All ordered factor pairs of ``split`` in a fixed order.

    >>> len(pairs("train")) + len(pairs("test"))
    8100
    """
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; expected one of {SPLITS}")
    want = split == "test"
    return tuple((a, b) for a in range(10, 100) for b in range(10, 100) if is_held_out(a, b) == want)


def answer(a: int, b: int, variant: str = "mul") -> int:
    """The gold answer of ``a * b`` in ``variant``.

    >>> answer(37, 48), answer(37, 48, "aime"), answer(25, 40, "aime")
    (1776, 776, 0)
    """
    _check_variant(variant)
    return a * b if variant == "mul" else a * b % MODULUS


def make_problems(n: int, seed: int = 0, variant: str = "mul", *, split: str = "train") -> list[dict]:
    """``n`` distinct problems of ``variant`` drawn from ``split`` with a seeded RNG.

    Each row has a stable ``id`` (``"aime-37x48"``: the same problem always has the same id),
    ``problem``, ``answer`` (a string, as in the prompts table) and ``source``.

    >>> make_problems(2, seed=0) == make_problems(2, seed=0)
    True
    >>> make_problems(1, seed=3, variant="aime")[0]["source"]
    'reasonkit/aime'
    """
    _check_variant(variant)
    pool = pairs(split)
    if not 0 <= n <= len(pool):
        raise UserError(f"n={n}: the {split} split of {variant!r} has {len(pool)} distinct problems")
    chosen = random.Random(f"{seed}/{variant}/{split}").sample(pool, n)
    return [_problem(a, b, variant) for a, b in chosen]


def _problem(a: int, b: int, variant: str) -> dict:
    return {
        "id": f"{variant}-{a}x{b}",
        "problem": _TEMPLATES[variant].format(a=a, b=b),
        "answer": str(answer(a, b, variant)),
        "source": f"reasonkit/{variant}",
    }


def parse(problem: str) -> tuple[int, int, str]:
    """``(a, b, variant)`` of a problem text made by this module.

    >>> parse("What is 37 * 48?")
    (37, 48, 'mul')
    """
    m = _PARSE.search(problem)
    if m is None:
        raise ValueError(f"not a reasonkit task problem: {problem!r}")
    variant = "aime" if "remainder" in problem else "mul"
    return int(m.group(1)), int(m.group(2)), variant


def solution(problem: dict | str) -> str:
    """The worked solution (what the teacher is trained to write) for a problem dict or text.

    Long multiplication by columns, least significant first, the same shape every time. Each line
    computes one digit of the product from single-digit facts (``3 * 8``, 100 of them, each seen
    thousands of times) and the carry of the line above, adding two terms at a time so no step
    needs more than one addition. Why this shape, measured here on a 0.5M-parameter student
    (600 steps of 32, greedy exact-match on 200 held-out problems): the earlier trace
    ``37 * 48 = 37 * 40 + 37 * 8 = 1480 + 0296 = 1776`` reached 1%: its steps (``37 * 8 = 296``,
    ``1480 + 0296``) each ask for several digits at once, and it got them wrong; columns with
    three-term sums reached 56%; columns with chained two-term sums (this one) 73%.
    A small model learns a procedure whose every step is small, not one whose steps are few.

    >>> print(solution("What is 37 * 48?"))
    <think>
    7 * 8 = 56: units 6, carry 5
    3 * 8 + 7 * 4 + 5 = 24 + 28 + 5 = 52 + 5 = 57: tens 7, carry 5
    3 * 4 + 5 = 12 + 5 = 17: hundreds 7, carry 1
    thousands 1
    37 * 48 = 1776
    </think>
    The answer is \\boxed{1776}.
    >>> print(solution("Find the remainder when 12 * 13 is divided by 1000."))
    <think>
    2 * 3 = 6: units 6, carry 0
    1 * 3 + 2 * 1 + 0 = 3 + 2 + 0 = 5 + 0 = 5: tens 5, carry 0
    1 * 1 + 0 = 1 + 0 = 1: hundreds 1, carry 0
    thousands 0
    12 * 13 = 156
    156 mod 1000 = 156
    </think>
    The answer is \\boxed{156}.
    """
    text = problem if isinstance(problem, str) else problem["problem"]
    a, b, variant = parse(text)
    (a1, a0), (b1, b0) = divmod(a, 10), divmod(b, 10)
    # Every term is written even when it is zero: a fixed shape is what a tiny model learns.
    units = a0 * b0
    cross, straight = a1 * b0, a0 * b1
    tens = cross + straight + units // 10
    hundreds = a1 * b1 + tens // 10
    steps = [
        f"{a0} * {b0} = {units}: units {units % 10}, carry {units // 10}",
        f"{a1} * {b0} + {a0} * {b1} + {units // 10} = {cross} + {straight} + {units // 10} = "
        f"{cross + straight} + {units // 10} = {tens}: tens {tens % 10}, carry {tens // 10}",
        f"{a1} * {b1} + {tens // 10} = {a1 * b1} + {tens // 10} = {hundreds}: hundreds {hundreds % 10}, carry "
        f"{hundreds // 10}",
        f"thousands {hundreds // 10}",
        f"{a} * {b} = {a * b}",
    ]
    if variant == "aime":
        steps.append(f"{a * b} mod {MODULUS} = {a * b % MODULUS}")
    final = answer(a, b, variant)
    return "<think>\n" + "\n".join(steps) + "\n</think>\nThe answer is \\boxed{" + str(final) + "}."


def user_content(problem: str) -> str:
    """The user turn as generation builds it: the problem, a blank line, the R1 instruction."""
    return f"{problem}\n\n{INSTRUCTION}"


def render(problem: dict | str, *, with_solution: bool = True) -> str:
    """The chat text of one problem in recipes/teachers/tiny.py's template (the string a model sees).

    >>> render("What is 10 * 10?", with_solution=False)[:32]
    '<|user|>What is 10 * 10?\\n\\nPlease'
    >>> render("What is 10 * 10?").endswith("\\\\boxed{100}.<|end|>")
    True
    """
    text = problem if isinstance(problem, str) else problem["problem"]
    prompt = f"<|user|>{user_content(text)}<|end|><|assistant|>"
    return prompt + f"{solution(text)}<|end|>" if with_solution else prompt


def corpus(n: int = 500, seed: int = 0) -> list[str]:
    """``n`` chat-rendered worked examples, both variants alternating, for tokenizer training.

    >>> texts = corpus(4, seed=0)
    >>> len(texts), texts[0].startswith("<|user|>")
    (4, True)
    """
    per_variant = [make_problems((n + 1 - i) // 2, seed, v) for i, v in enumerate(VARIANTS)]
    mixed = [p for pair in zip(*per_variant, strict=False) for p in pair] + per_variant[0][len(per_variant[1]) :]
    return [render(p) for p in mixed[:n]]


def write_prompts(
    path: str | os.PathLike, n: int, seed: int = 0, variant: str = "mul", *, split: str = "train"
) -> str:
    """Write ``n`` problems as a Parquet prompts table (schema.py) and return the path.

    Columns: the contract's ``id``, ``messages`` (one user turn: problem + instruction),
    ``answer``, ``source``, plus ``problem`` kept as a pass-through column.

    >>> import tempfile, os, pyarrow.parquet as pq
    >>> path = write_prompts(os.path.join(tempfile.mkdtemp(), "p.parquet"), 3, seed=0, variant="aime")
    >>> pq.read_table(path).column_names
    ['id', 'messages', 'answer', 'source', 'problem']
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reasonkit.schema import validate

    rows = make_problems(n, seed, variant, split=split)
    table = pa.table(
        {
            "id": [r["id"] for r in rows],
            "messages": [[{"role": "user", "content": user_content(r["problem"])}] for r in rows],
            "answer": [r["answer"] for r in rows],
            "source": [r["source"] for r in rows],
            "problem": [r["problem"] for r in rows],
        }
    )
    table = validate(table, "prompts", str(path))
    pq.write_table(table, path)
    return str(path)


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise UserError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
