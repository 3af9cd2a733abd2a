"""The synthetic code task (the code quickstart's data): its reference programs pass the code verifier
through `distill filter --verifier code`, a program that only prints the example fails, splits hold."""

import json

from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.recipes.tasks import code as code_task
from reasonkit.recipes.tasks import math as task
from reasonkit.store import read_stage

from ...helpers.synthetic import trace, write_traces


def test_problems_are_distinct_seeded_and_keep_the_math_split():
    train = code_task.make_problems(40, seed=1, variant="mul")
    assert code_task.make_problems(40, seed=1, variant="mul") == train and len({p["id"] for p in train}) == 40
    held_out = set(task.pairs("test"))
    for p in code_task.make_problems(20, seed=1, variant="aime", split="test"):
        inputs = [tuple(map(int, i.split())) for i in json.loads(p["tests"])["inputs"]]
        assert all(pair in held_out for pair in inputs)


def test_reference_programs_pass_and_a_memorised_example_fails(tmp_path):
    rows = []
    for variant in ("mul", "aime"):
        for p in code_task.make_problems(3, seed=2, variant=variant):
            rows.append(
                trace(
                    p["id"],
                    0,
                    problem=p["problem"],
                    reasoning=None,
                    response=code_task.solution(p),
                    answer=None,
                    tests=p["tests"],
                )
            )
            example = json.loads(p["tests"])["outputs"][0].strip()
            rows.append(
                trace(
                    p["id"],
                    1,
                    problem=p["problem"],
                    reasoning=None,
                    answer=None,
                    tests=p["tests"],
                    response=f"```python\nprint({example})\n```",
                )
            )
    write_traces(tmp_path / "traces", rows)
    report = run_filter(
        FilterConfig(
            traces=str(tmp_path / "traces"),
            out=str(tmp_path / "out"),
            verifier="code",
            lang=None,
            dedup="none",
            verify_timeout=2.0,
        )
    )
    kept = read_stage(tmp_path / "out", kind="verdicts")
    assert report["rows_out"] == 6 and set(kept.column("sample").to_pylist()) == {0}
    rejected = read_stage(tmp_path / "out" / "rejected", kind="verdicts")
    assert set(rejected.column("verify_reason").to_pylist()) == {"wrong_answer"}
    assert set(rejected.column("tests_passed").to_pylist()) <= {1, 2}  # the example (and a repeat of it) only
