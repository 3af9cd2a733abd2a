"""The code verifier on literal programs: right, wrong, wrong on one test of five, broken, crashing and
hostile ones (an infinite loop, a fork bomb, 10 GB allocated or written, a socket out, the parent's
HF_TOKEN, a detached child, 100 MB printed). Each ends within its limits with the right verdict and
reason, leaves no process behind, and the planted token appears in no output."""

import json
import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from reasonkit import sandbox
from reasonkit.filters.code.verify import CodeChecker, check_code, extract_code, parse_tests

from ...helpers.sandbox import processes_with  # host pids whose command line holds a marker

MODE = sandbox.available_mode()
ISOLATION = sandbox.isolation_of(MODE)
needs_nproc = pytest.mark.skipif(
    "uid-drop" not in ISOLATION and "userns" not in ISOLATION, reason="process limit not enforceable here"
)

# APPS/TACO input_output, five stdin tests: the sum of a line of integers.
FIVE = json.dumps(
    {"inputs": ["1 2\n", "3 4\n", "10 -2\n", "0 0\n", "7 7 7\n"], "outputs": ["3\n", "7\n", "8\n", "0\n", "21\n"]}
)
RIGHT = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
PLANTED = "hf_" + secrets.token_hex(12)


def verdict(program: str, tests: str = FIVE, timeout: float = 2.0):
    return check_code(program, parse_tests(tests), timeout=timeout)


def test_extraction_takes_the_last_python_block_and_names_what_is_missing():
    two = "First try:\n```python\nprint(1)\n```\nBetter:\n```py\nprint(2)\n```\nOutput:\n```text\n2\n```\n"
    assert extract_code(two) == ("print(2)\n", None)
    assert extract_code("Untagged:\n```\nx = 1\n```") == ("x = 1\n", None)
    assert extract_code("```\nx = 1\n```\nthen\n```\nx = 2\n```") == ("x = 2\n", None)
    # a python block before an untagged one (the sample output, say) is the program
    assert extract_code("```python\nprint(3)\n```\nOutput:\n```\n3\n```") == ("print(3)\n", None)
    assert extract_code("no code at all") == (None, "no_code")
    assert extract_code("```python\nprint(1)\n```\nthen, cut:\n```python\nprint(") == (None, "unclosed_fence")
    assert extract_code("```python\n```") == (None, "no_code")  # an empty block is no program
    assert extract_code("````python\nprint('```')\n````") == ("print('```')\n", None)  # longer fences nest


CASES = {
    # name: (program, correct, reason, tests passed)
    "right": (RIGHT, True, None, 5),
    "wrong": ("print(42)", False, "wrong_answer", 0),
    "wrong_on_one_of_five": (
        "import sys\nv = list(map(int, sys.stdin.read().split()))\nprint(sum(v) + (len(v) == 3))",
        False,
        "wrong_answer",
        4,
    ),
    "syntax_error": ("print(1 +)", False, "compile_error", 0),
    "runtime_error": ("print(1 // 0)", False, "runtime_error", 0),
    "exits_nonzero": ("import sys\nsys.exit(3)", False, "runtime_error", 0),
    "exits_zero_after_answering": (RIGHT + "raise SystemExit(0)", True, None, 5),
    "infinite_loop": ("while True: pass", False, "timeout", 0),
    "allocates_10_gb": ("x = bytearray(10 * 1024**3)", False, "memory", 0),
    "writes_10_gb": (
        "f = open('big', 'wb')\nfor _ in range(10 * 1024):\n    f.write(b'0' * (1 << 20))",
        False,
        "file_size",
        0,
    ),
    "prints_100_mb": ("print('x' * 100_000_000)", False, "output_limit", 0),
    "socket_out": ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)", False, "runtime_error", 0),
    "reads_fd_0_and_writes_fd_1": (
        "import os\ndata = open(0).read()\nos.write(1, b'forged')\nprint(sum(map(int, data.split())))",
        True,
        None,
        5,
    ),
}


def test_literal_programs_end_with_the_right_verdict_and_reason():
    # All at once on two threads (as the filter runs them): the whole table costs a few seconds.
    names = list(CASES)
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        verdicts = dict(zip(names, pool.map(lambda n: verdict(CASES[n][0], timeout=1.0), names)))
    for name in names:
        _, correct, reason, passed = CASES[name]
        v = verdicts[name]
        assert (v.correct, v.reason, v.tests_passed, v.tests_total) == (correct, reason, passed, 5), (name, v)
        assert v.isolation == ISOLATION
    assert time.monotonic() - started < 40
    # The outputs vote, not the text: two different right programs share a key, a wrong one does not.
    assert verdicts["right"].key == verdicts["reads_fd_0_and_writes_fd_1"].key != verdicts["wrong"].key


@needs_nproc
def test_fork_bomb_is_stopped_by_the_process_limit():
    v = verdict("import os\nwhile True:\n    os.fork()", timeout=2.0)
    assert (v.correct, v.reason) == (False, "processes")


def test_planted_token_reaches_no_output(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", PLANTED)
    leak = (
        "import os, sys\nenv = open('/proc/self/environ').read() + repr(dict(os.environ))\n"
        f"raise SystemExit('token ' + ('{PLANTED[:3]}' in env and 'present' or 'absent') + ': ' + env)"
    )
    v = verdict(leak)
    assert (v.correct, v.reason) == (False, "runtime_error")
    assert "token absent" in v.detail and PLANTED not in repr(v)


def test_a_detached_child_is_not_left_behind():
    marker = f"reasonkit-code-{secrets.token_hex(6)}"
    program = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n" + RIGHT
    )
    v = verdict(program, json.dumps({"inputs": ["1 2"], "outputs": ["3"]}))
    assert (v.correct, v.reason) == (True, None)
    time.sleep(0.2)
    assert processes_with(marker) == []


def test_call_based_tests_apps_and_livecodebench_shapes():
    apps = json.dumps({"fn_name": "add", "inputs": [[1, 2], [[1], [2]]], "outputs": [[3], [[1, 2]]]})
    assert verdict("def add(a, b):\n    return a + b", apps).correct is True
    assert verdict("def add(a, b):\n    return a - b", apps).reason == "wrong_answer"
    assert verdict("def plus(a, b):\n    return a + b", apps).reason == "compile_error"  # no such function
    lcb = json.dumps(
        {
            "func_name": "maxPair",
            "tests": json.dumps(
                [
                    {"input": "[1, 5, 3]\n2", "output": "8", "testtype": "functional"},
                    {"input": "[4]\n1", "output": "4", "testtype": "functional"},
                ]
            ),
        }
    )
    solution = (
        "class Solution:\n    def maxPair(self, nums: List[int], k: int) -> int:  # LeetCode: no import\n"
        "        return sum(sorted(nums)[-k:])\n"
    )
    v = verdict(solution, lcb)
    assert (v.correct, v.tests_passed, v.tests_total) == (True, 2, 2)
    # a program whose module-level code reads stdin under __main__ still loads for a call test
    assert verdict("def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    input()", apps).correct


def test_stdin_shapes_and_numeric_tolerance():
    code_contests = json.dumps(
        {
            "public_tests": {"input": ["2\n"], "output": ["4\n"]},
            "private_tests": {"input": ["3\n"], "output": ["9\n"]},
            "generated_tests": None,
        }
    )
    assert verdict("n = int(input())\nprint(n * n)", code_contests).tests_total == 2
    lcb = json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])
    assert verdict(RIGHT, lcb).correct
    third = "print(1 / 3)"
    exact = json.dumps({"inputs": [""], "outputs": ["0.333333333"]})
    loose = json.dumps({"inputs": [""], "outputs": ["0.333333333"], "tolerance": 1e-6})
    assert verdict(third, exact).reason == "wrong_answer" and verdict(third, loose).correct
    lines = json.dumps({"inputs": ["x"], "outputs": [["a  b", "c"]]})  # APPS: an output stored as lines
    assert verdict("print('a b  ')\nprint('c')\nprint()", lines).correct


def test_many_rows_share_work_and_keep_order():
    tests = parse_tests(FIVE)
    items = [(RIGHT, tests), ("print(0)", tests), (RIGHT, tests)]
    checker = CodeChecker(timeout=2.0, workers=2)
    got = checker.check(items)
    assert [v.correct for v in got] == [True, False, True] and got[0] == got[2]


def test_bad_tests_are_reported():
    from reasonkit.filters.code.verify import BadTests

    for bad, why in [
        ("{", "not JSON"),
        ('{"inputs": ["1"], "outputs": []}', "1 inputs but 0 outputs"),
        ('[{"input": "1", "output": "2", "testtype": "functional"}]', "function name"),
        ('{"x": 1}', "expected APPS/TACO"),
    ]:
        with pytest.raises(BadTests, match=why):
            parse_tests(bad)
    assert os.environ.get("HF_TOKEN") != PLANTED  # monkeypatch restored it


def test_code_reward_agrees_with_the_checker_and_has_trl_signature():
    from reasonkit.reward.functions import make_rewards

    (reward,), weights = make_rewards({"code": 1.0}, max_completion_length=64, verify_timeout=2.0)
    completions = [
        f"<think>sum them</think>```python\n{RIGHT}```",
        "<think>x</think>```python\nprint(0)\n```",
        "<think>x</think>no program",
        f"<think>```python\n{RIGHT}```</think>none after the think block",
        f"<think>x</think>```python\n{RIGHT}```",
    ]
    tests = [FIVE] * 4 + [None]  # the last row has no tests: no reward
    ids = [[1] * 10] * 5
    assert reward(["q"] * 5, completions, ids, tests=tests) == [1.0, 0.0, 0.0, 0.0, None] and weights == [1.0]
    truncated = reward(["q"], completions[:1], [[1] * 64], tests=[FIVE])  # used all 64 tokens: cut, no answer
    assert truncated == [0.0]
    with pytest.raises(Exception, match="needs a 'tests' column"):
        reward(["q"], completions[:1], [[1]], answer=["3"])


def test_grpo_prompts_carry_the_tests_for_the_code_reward(tmp_path):
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.data import read_prompt_rows, to_dataset
    from reasonkit.errors import UserError

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"problem": "Add the two numbers.", "tests": json.loads(FIVE)}) + "\n")
    cfg = TrainConfig(method="grpo", student="m", data=str(path), out="o", rewards={"code": 1.0})
    rows = read_prompt_rows(cfg)
    assert parse_tests(rows.column("tests")[0].as_py()) == parse_tests(FIVE)  # an object column back to JSON
    assert "tests" in to_dataset(rows, "grpo").column_names
    path.write_text(json.dumps({"problem": "Add the two numbers.", "answer": "3"}) + "\n")
    with pytest.raises(UserError, match="the code reward needs each prompt's tests"):
        read_prompt_rows(cfg)


def test_exit_builtins_and_no_expected_output_inside_the_sandbox():
    # exit() is site's builtin, and the sandbox runs python -S: the harness provides it
    assert verdict(RIGHT + "exit()").correct and verdict(RIGHT + "quit(0)").correct
    # the expected outputs never enter the sandbox: a program looking for them finds inputs only
    snoop = (
        "if b'21' in open('tests.marshal', 'rb').read():\n    raise SystemExit('the expected outputs are visible')\n"
        + RIGHT
    )
    assert verdict(snoop).correct  # 21 is test 5's expected output, in no input
    # a result line claiming a pass, forged on the results stream, counts for nothing: the parent compares
    # the outputs itself (to forge one, a program would need the expected output, which it never sees)
    forge = (
        "import os, json\nfor fd in range(3, 12):\n    for k in range(5):\n        try:\n"
        "            os.write(fd, ('@@reasonkit-test ' + json.dumps({'test': k, 'ok': True, 'reason': None}) + "
        "'\\n').encode())\n"
        "        except OSError:\n            pass\nprint(0)"
    )
    v = verdict(forge)
    assert v.correct is False and v.tests_passed == 0


@pytest.mark.skipif(MODE == "none", reason="no namespaces on this machine")
def test_the_unprivileged_mode_gives_the_same_verdicts():
    # "userns" is what a non-root user gets: the verdicts match, and the verdict says which isolation held
    tests = parse_tests(FIVE)
    for program, correct, reason in ((RIGHT, True, None), ("while True: pass", False, "timeout")):
        v = check_code(program, tests, timeout=0.5, mode="userns")
        assert (v.correct, v.reason) == (correct, reason) and "userns" in v.isolation
