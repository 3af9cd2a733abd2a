"""distill eval --verifier code: pass@k on programs run against tests, cons@k voting on their outputs."""

import json
from types import SimpleNamespace

import pytest

from reasonkit.distill.eval.run import EvalConfig, run_eval
from reasonkit.distill.eval.score import score, verify_samples
from reasonkit.errors import UserError
from reasonkit.store import read_stage

from ...helpers.synthetic import trace, write_traces

TESTS = json.dumps({"inputs": ["1 2", "4 4", "10 5"], "outputs": ["3", "8", "15"]})
RIGHT = [
    "a, b = map(int, input().split())\nprint(a + b)",
    "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))",
    "x = input().split()\nprint(int(x[0]) + int(x[1]))",
]


def program(code):
    return f"Here is the program.\n```python\n{code}\n```"


def traces(tmp_path):
    rows = [
        # p1: the wrong answer comes first and twice, in two spellings; the right one three times, in three
        trace("p1", 0, response=program("print(0)"), answer=None, tests=TESTS),
        trace("p1", 1, response=program(RIGHT[0]), answer=None, tests=TESTS),
        trace("p1", 2, response=program(RIGHT[1]), answer=None, tests=TESTS),
        trace("p1", 3, response=program("print( 0 )  # again"), answer=None, tests=TESTS),
        trace("p1", 4, response=program(RIGHT[2]), answer=None, tests=TESTS),
        # p2: two programs print the same wrong outputs, one is right, one has no program, one is cut
        trace("p2", 0, response=program("print(1)"), answer=None, tests=TESTS),
        trace("p2", 1, response=program("print(3 - 2)"), answer=None, tests=TESTS),
        trace("p2", 2, response=program(RIGHT[0]), answer=None, tests=TESTS),
        trace("p2", 3, response="I am not sure.", answer=None, tests=TESTS),
        trace("p2", 4, response=program(RIGHT[0]), answer=None, tests=TESTS, finish_reason="length"),
    ]
    write_traces(tmp_path / "generations", rows)
    return read_stage(tmp_path / "generations", kind="traces")


def test_pass_at_k_and_cons_at_k_vote_on_outputs_not_text(tmp_path):
    config = SimpleNamespace(verifier="code", verify_timeout=2.0, tests_col="tests", score_truncated=False)
    table = traces(tmp_path)
    samples = verify_samples(table, config, tmp_path / "samples")
    rows = {(r["id"], r["sample"]): r for r in samples.to_pylist()}
    assert [rows[("p1", s)]["correct"] for s in range(5)] == [False, True, True, False, True]
    assert rows[("p1", 0)]["verify_reason"] == "wrong_answer"
    assert rows[("p2", 3)]["verify_reason"] == "no_code" and rows[("p2", 4)]["verify_reason"] == "truncated"
    # one vote per distinct output: p1's three right programs are one answer, its two "print 0" another
    assert [rows[("p1", s)]["vote_group"] for s in range(5)] == [0, 1, 1, 0, 1]
    assert [rows[("p2", s)]["vote_group"] for s in range(5)] == [0, 0, 2, None, None]
    summary, problems = score(samples, table, k=5)
    assert summary["pass@1"] == pytest.approx((3 / 5 + 1 / 5) / 2)
    assert summary["cons@5"] == 0.5  # p1 voted right (3 of 5; a vote on program text would pick sample 0), p2 wrong
    assert summary["pass@5"] == 1.0
    assert summary["counts"] == {
        "correct": 4,
        "wrong": 4,
        "unverifiable": 0,
        "context_overflow": 0,
        "no_answer": 2,
        "truncated": 1,
    }
    assert {p["id"]: p["majority_votes"] for p in problems} == {"p1": 3, "p2": 2}


def test_eval_on_the_teacher_needs_tests_and_runs_the_code_verifier(teacher_dir, tmp_path):
    # The embedded teacher writes arithmetic, not code: every sample is no_code, through the whole pipeline.
    data = tmp_path / "code.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"id": f"c{i}", "problem": f"Print {i} + {i}.", "tests": {"inputs": [""], "outputs": [str(2 * i)]}}
            )
            + "\n"
            for i in range(2)
        )
    )
    config = EvalConfig(
        model=teacher_dir,
        data=str(data),
        out=str(tmp_path / "eval"),
        backend="hf",
        k=1,
        max_tokens=32,
        dtype="float32",
        verifier="code",
        instruction="Write a Python program.",
    )
    summary = run_eval(config)
    assert summary["n_problems"] == 2 and summary["counts"]["no_answer"] == 2
    assert summary["protocol"]["verifier"] == "code"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "c0", "problem": "Print 0."}) + "\n")
    with pytest.raises(UserError, match="column 'tests'"):
        run_eval(
            EvalConfig(model=teacher_dir, data=str(bad), out=str(tmp_path / "bad"), backend="hf", k=1, verifier="code")
        )
    assert not (tmp_path / "bad").exists()
