"""`distill filter --verifier code` end to end: verdicts, rejected rows with their reasons, the funnel."""

import json

import pytest
from click.testing import CliRunner

from reasonkit.errors import UserError
from reasonkit.filters.command import filter as filter_command
from reasonkit.filters.config import FilterConfig
from reasonkit.filters.run import run_filter
from reasonkit.store import read_stage

from ...helpers.synthetic import trace, write_traces

TESTS = json.dumps({"inputs": ["1 2\n", "5 5\n", "0 9\n"], "outputs": ["3\n", "10\n", "9\n"]})
RIGHT = "Read both numbers and add them.\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def code_trace(pid, sample, response, tests=TESTS, **kw):
    return trace(
        pid,
        sample,
        problem="Add two integers read from stdin.",
        reasoning="Add them.",
        response=response,
        answer=None,
        tests=tests,
        **kw,
    )


def rows():
    return [
        code_trace("p1", 0, RIGHT),
        code_trace("p1", 1, "```python\nprint(3)\n```"),  # right on one test of three
        code_trace("p1", 2, "```python\nwhile True:\n    pass\n```"),
        code_trace("p1", 3, "I would write a loop."),  # no code
        code_trace("p1", 4, "```python\na, b = map(int, input().split())\nprint(a +"),  # cut mid-block
        code_trace("p2", 0, RIGHT.replace("a + b", "a * b"), tests=None),  # the prompt has no tests
        code_trace("p3", 0, "```python\ndef f(:\n```"),
    ]


def test_code_verdicts_flow_through_the_filter(tmp_path):
    write_traces(tmp_path / "traces", rows(), shard_rows=4)
    config = FilterConfig(
        traces=str(tmp_path / "traces"),
        out=str(tmp_path / "out"),
        verifier="code",
        verify_timeout=1.0,
        workers=2,
        lang=None,
        dedup="none",
        batch_rows=4,
    )
    report = run_filter(config)
    kept = read_stage(tmp_path / "out", kind="verdicts")
    rejected = read_stage(tmp_path / "out" / "rejected", kind="verdicts")
    assert kept.select(["id", "sample", "correct", "tests_passed", "tests_total"]).to_pylist() == [
        {"id": "p1", "sample": 0, "correct": True, "tests_passed": 3, "tests_total": 3}
    ]
    assert kept.column("pred").to_pylist() == ["a, b = map(int, input().split())\nprint(a + b)\n"]
    assert kept.column("isolation")[0].as_py()  # the isolation in force is recorded (e.g. netns,pidns,...)
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())  # and the run's, cgroup or no-cgroup
    assert (
        manifest["sandbox_isolation"] == report["sandbox_isolation"] == kept.column("isolation")[0].as_py().split(",")
    )
    why = {
        (r["id"], r["sample"]): (r["drop_reason"], r["verify_reason"], r["tests_passed"])
        for r in rejected.select(["id", "sample", "drop_reason", "verify_reason", "tests_passed"]).to_pylist()
    }
    assert why == {
        ("p1", 1): ("wrong", "wrong_answer", 1),
        ("p1", 2): ("wrong", "timeout", 0),
        ("p1", 3): ("no_code", "no_code", None),
        ("p1", 4): ("no_code", "unclosed_fence", None),
        ("p2", 0): ("no_tests", "no_tests", None),
        ("p3", 0): ("wrong", "compile_error", 0),
    }
    dropped = {s["reason"]: s["dropped"] for s in report["funnel"] if s["filter"] == "verify"}
    assert dropped == {"no_tests": 1, "no_code": 2, "wrong": 3, "unverifiable": 0}
    assert report["code_failures"] == {"wrong_answer": 1, "timeout": 1, "compile_error": 1}
    assert report["unverifiable"] == {} and report["verified"] == {"correct": 1, "wrong": 3, "unverifiable": 0}
    sft = read_stage(tmp_path / "out" / "sft", kind="sft")
    assert "print(a + b)" in sft.column("messages")[0].as_py()[-1]["content"]


def test_bad_tests_are_one_error_before_anything_is_written(tmp_path):
    write_traces(tmp_path / "traces", [code_trace("p1", 0, RIGHT), code_trace("p9", 0, RIGHT, tests='{"inputs": [1]')])
    config = FilterConfig(traces=str(tmp_path / "traces"), out=str(tmp_path / "out"), verifier="code", lang=None)
    with pytest.raises(UserError, match=r"row 'p9': column 'tests': not JSON"):
        run_filter(config)
    assert not (tmp_path / "out").exists()
    write_traces(tmp_path / "plain", [trace("p1", 0)])
    with pytest.raises(UserError, match="column 'tests'.*tests_column=NAME"):
        run_filter(FilterConfig(traces=str(tmp_path / "plain"), out=str(tmp_path / "out2"), verifier="code"))


def test_cli_verifier_code(tmp_path):
    write_traces(tmp_path / "traces", [code_trace("p1", 0, RIGHT), code_trace("p1", 1, "```python\nprint(0)\n```")])
    result = CliRunner().invoke(
        filter_command,
        [
            str(tmp_path / "traces"),
            "--out",
            str(tmp_path / "out"),
            "--verifier",
            "code",
            "--verify-timeout",
            "2",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "wrote 1 rows" in result.output


def test_a_sandbox_that_cannot_start_makes_rows_unverifiable_not_wrong(tmp_path, monkeypatch):
    from reasonkit import sandbox

    def broken(*args, **kwargs):
        raise sandbox.SandboxError("sandbox did not start: unshare: permission denied")

    monkeypatch.setattr(sandbox, "run", broken)
    write_traces(tmp_path / "traces", [code_trace("p1", 0, RIGHT), code_trace("p1", 1, "```python\nprint(0)\n```")])
    for policy, kept in (("drop", 0), ("keep", 2)):
        report = run_filter(
            FilterConfig(
                traces=str(tmp_path / "traces"),
                out=str(tmp_path / policy),
                verifier="code",
                unverifiable=policy,
                lang=None,
                dedup="none",
            )
        )
        assert report["rows_out"] == kept and report["unverifiable"] == {"sandbox_error": 2}
    rejected = read_stage(tmp_path / "drop" / "rejected", kind="verdicts")
    assert rejected.column("drop_reason").to_pylist() == ["unverifiable"] * 2
    assert rejected.column("correct").to_pylist() == [None, None]


def test_a_value_the_checker_cannot_read_is_a_wrong_row_and_the_stage_finishes(tmp_path):
    # A call test whose function returns a list nested 5,000 deep used to raise RecursionError out of
    # the filter on that row, and on every rerun (issue 38 item 4): now it is one rejected row.
    call = json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[1]]})
    deep = "```python\ndef f(x):\n    v = []\n    for _ in range(5000):\n        v = [v]\n    return v\n```"
    write_traces(
        tmp_path / "traces",
        [
            code_trace("p1", 0, deep, tests=call),
            code_trace("p1", 1, "```python\ndef f(x):\n    return x\n```", tests=call),
        ],
    )
    report = run_filter(
        FilterConfig(
            traces=str(tmp_path / "traces"),
            out=str(tmp_path / "out"),
            verifier="code",
            verify_timeout=1.0,
            lang=None,
            dedup="none",
        )
    )
    assert report["rows_out"] == 1 and report["code_failures"] == {"bad_output": 1}
    rejected = read_stage(tmp_path / "out" / "rejected", kind="verdicts")
    assert rejected.select(["sample", "drop_reason", "verify_reason"]).to_pylist() == [
        {"sample": 0, "drop_reason": "wrong", "verify_reason": "bad_output"}
    ]
