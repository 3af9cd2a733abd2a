"""The synthetic task: seeded, correct, a clean train/test split, a valid prompts table."""

import os
import re

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow.parquet as pq
import pytest

from reasonkit.errors import UserError
from reasonkit.recipes.tasks import math as task
from reasonkit.schema import validate


@pytest.mark.parametrize("variant", task.VARIANTS)
def test_same_seed_same_problems_other_seed_other_problems(variant):
    assert task.make_problems(50, seed=7, variant=variant) == task.make_problems(50, seed=7, variant=variant)
    assert task.make_problems(50, seed=7, variant=variant) != task.make_problems(50, seed=8, variant=variant)


@pytest.mark.parametrize("variant", task.VARIANTS)
def test_ids_are_unique_and_stable(variant):
    rows = task.make_problems(2000, seed=0, variant=variant)
    assert len({r["id"] for r in rows}) == 2000
    # The same problem drawn under another seed keeps its id.
    by_problem = {r["problem"]: r["id"] for r in task.make_problems(2000, seed=1, variant=variant)}
    shared = [r for r in rows if r["problem"] in by_problem]
    assert shared and all(by_problem[r["problem"]] == r["id"] for r in shared)


def _factors(problem: str) -> tuple[int, int]:
    a, b = re.findall(r"\d+", problem)[:2]  # independent of task.parse
    return int(a), int(b)


@pytest.mark.parametrize("split", task.SPLITS)
def test_answers_are_right(split):
    for row in task.make_problems(300, seed=3, variant="mul", split=split):
        a, b = _factors(row["problem"])
        assert 10 <= a <= 99 and 10 <= b <= 99
        assert row["answer"] == str(a * b)
    for row in task.make_problems(300, seed=3, variant="aime", split=split):
        a, b = _factors(row["problem"])
        assert "remainder" in row["problem"] and "1000" in row["problem"]
        assert row["answer"] == str(a * b % 1000) and 0 <= int(row["answer"]) <= 999


@pytest.mark.parametrize("variant", task.VARIANTS)
def test_every_step_of_the_worked_solution_is_true(variant):
    for row in task.make_problems(300, seed=5, variant=variant):
        text = task.solution(row)
        assert text.startswith("<think>\n") and "\n</think>\n" in text
        assert text.endswith(f"The answer is \\boxed{{{row['answer']}}}.")
        thought = text.split("<think>\n")[1].split("\n</think>")[0].splitlines()
        a, b = _factors(row["problem"])
        digits, carry = [], 0
        for place, line in zip(("units", "tens", "hundreds"), thought[:3], strict=True):
            chain, _, result = line.partition(": ")
            values = {eval(side, {"__builtins__": {}}) for side in chain.split(" = ")}  # noqa: S307
            assert len(values) == 1, line  # every "=" in the chain is true
            if place != "units":
                assert chain.split(" = ")[0].endswith(f" + {carry}"), line  # the previous carry is added
            value = values.pop()
            assert result == f"{place} {value % 10}, carry {value // 10}", line
            digits.append(value % 10)
            carry = value // 10
        assert thought[3] == f"thousands {carry}"
        assert int(f"{carry}{digits[2]}{digits[1]}{digits[0]}") == a * b  # the columns spell the product
        assert thought[4] == f"{a} * {b} = {a * b}"  # the chain is about this problem's factors
        if variant == "aime":
            assert thought[5:] == [f"{a * b} mod 1000 = {a * b % 1000}"]
        else:
            assert len(thought) == 5


def test_held_out_never_shares_a_factor_pair_with_training():
    train = {frozenset(_factors(r["problem"])) for v in task.VARIANTS for r in task.make_problems(7000, 0, v)}
    test = {
        frozenset(_factors(r["problem"])) for v in task.VARIANTS for r in task.make_problems(900, 0, v, split="test")
    }
    assert train.isdisjoint(test)
    assert len(task.pairs("train")) + len(task.pairs("test")) == 90 * 90
    assert 700 <= len(task.pairs("test")) <= 1000  # about a tenth held out


def test_asking_for_more_problems_than_exist_is_a_user_error():
    with pytest.raises(UserError, match="test split"):
        task.make_problems(len(task.pairs("test")) + 1, seed=0, split="test")
    with pytest.raises(UserError, match="unknown variant"):
        task.make_problems(1, seed=0, variant="div")


def test_write_prompts_is_a_valid_prompts_table(tmp_path):
    path = task.write_prompts(tmp_path / "p.parquet", 20, seed=2, variant="aime")
    table = pq.read_table(path)
    assert validate(table, "prompts", path).column_names == ["id", "messages", "answer", "source", "problem"]
    row = table.slice(0, 1).to_pylist()[0]
    assert row["messages"] == [{"role": "user", "content": f"{row['problem']}\n\n{task.INSTRUCTION}"}]
    assert row["source"] == "reasonkit/aime"
    assert [r["id"] for r in table.to_pylist()] == [p["id"] for p in task.make_problems(20, 2, "aime")]


def test_corpus_is_chat_rendered_and_mixes_both_variants():
    texts = task.corpus(n=11, seed=0)
    assert len(texts) == 11
    for text in texts:
        assert re.fullmatch(
            r"<\|user\|>[^<]+\n\nPlease reason step by step, and put your final answer within "
            r"\\boxed\{\}\.<\|end\|><\|assistant\|><think>\n.+\n</think>\nThe answer is "
            r"\\boxed\{\d+\}\.<\|end\|>",
            text,
            flags=re.S,
        ), text
    assert sum("remainder" in t for t in texts) in (5, 6)
