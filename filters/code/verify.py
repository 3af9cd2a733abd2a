r"""The code verifier: the response's final Python block, run against the prompt's tests in the sandbox.

One sandbox per answer runs all its tests (filters/code/harness.py: one forked process per test, timed
by the harness's own clock, fresh stdin and a capped stdout), so a row costs one sandbox start (~60 ms
CPU), not one per test. The harness's result lines come back on the sandbox's report channel, which
no process of the program holds: nothing the program prints or writes is read as a result. The verdict:

- ``correct``: True only when every test passes; None when it cannot be told (the sandbox itself
  failed, as its init says on its own channel: ``sandbox_error``), never for a wrong program.
- ``tests_passed`` / ``tests_total``: tests stopped early (after a timeout, a memory or process
  limit the verdict is settled) count as not passed.
- ``reason``: None, or the first failure: ``compile_error``, ``wrong_answer``, ``runtime_error``,
  ``timeout``, ``memory``, ``output_limit``, ``file_size``, ``processes``, ``bad_output`` (a value
  the bounded decoder cannot read: a returned list nested thousands deep, say).
- ``isolation``: what the sandbox enforced (``netns``, ``pidns``, ``mountns``, ``uid-drop`` ...).
- ``key``: a digest of the outputs on every test (cons@k votes on it, not on the program text).

>>> extract_code("Here:\n```python\nprint(1)\n```\nOutput:\n```\n1\n```\nDone.")  # the tagged block wins
('print(1)\n', None)
>>> extract_code("```\nprint(2)\n```")
('print(2)\n', None)
>>> extract_code("```cpp\nint main(){}\n```"), extract_code("```python\nprint(1)\n")
((None, 'no_code'), (None, 'unclosed_fence'))
>>> v = check_code("print(sum(map(int, input().split())))", parse_tests('{"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]}'))
>>> v.correct, v.tests_passed, v.tests_total, v.reason
(True, 2, 2, None)
"""  # noqa: E501

from __future__ import annotations

import json
import marshal
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.filters.base import RowFilter, update_rows
from reasonkit.filters.code.tests import BadTests, Tests, Unreadable, digest, parse_tests  # noqa: F401 (re-exported)
from reasonkit.sandbox.decode import loads

# A fence line: three or more backticks, an optional language tag (```python, ```py3, ```).
_FENCE = re.compile(r"^\s*(`{3,})\s*([\w+#.-]*)[^\n`]*$")
PYTHON_TAGS = ("", "python", "py", "python3", "py3")
#: The first failure that decides a wrong verdict, as the harness and the sandbox name it.
REASONS = (
    "compile_error",
    "wrong_answer",
    "runtime_error",
    "timeout",
    "memory",
    "output_limit",
    "file_size",
    "processes",
    "bad_output",
)
HARNESS = Path(__file__).with_name("harness.py")
MIN_OUTPUT_CAP = 64 << 10  # characters a test may print (or twice its expected output, if more)
STARTUP_SECONDS = 5.0  # the sandbox's own start, on a loaded box, before the first test's timer runs


def extract_code(response: str) -> tuple[str | None, str | None]:
    """``(code, reason)``: the last fenced block tagged python (else the last untagged one), or why there is none:
    ``no_code`` (no such block), ``unclosed_fence`` (the response ends inside a block: cut while
    writing it; an earlier complete block is not the answer, as a torn last box is no answer)."""
    blocks, current, tag, ticks = [], None, "", ""
    for line in response.splitlines(keepends=True):
        m = _FENCE.match(line)
        if current is None:
            if m:
                current, tag, ticks = [], m.group(2).lower(), m.group(1)
        elif m and not m.group(2) and len(m.group(1)) >= len(ticks):
            blocks.append((tag, "".join(current)))
            current = None
        else:
            current.append(line)
    if current is not None and tag in PYTHON_TAGS:
        return None, "unclosed_fence"
    # A block tagged python wins over an untagged one after it (often the sample output, shown last);
    # untagged blocks count when none is tagged.
    for wanted in (PYTHON_TAGS[1:], ("",)):
        for tag, code in reversed(blocks):
            if tag in wanted and code.strip():
                return code, None
    return None, "no_code"


@dataclass(frozen=True)
class CodeVerdict:
    correct: bool | None
    tests_passed: int
    tests_total: int
    reason: str | None
    isolation: tuple[str, ...] = ()
    key: str | None = None
    detail: str | None = field(default=None, compare=False)  # the first failure's message, for debugging


@cache
def harness_source() -> str:
    return HARNESS.read_text()


@cache
def _typing_names() -> re.Pattern:
    import typing

    return re.compile(r"\b(?:" + "|".join(sorted(typing.__all__, key=len, reverse=True)) + r")\b")


def names_typing(code: str) -> bool:
    """Whether ``code`` mentions a name ``from typing import *`` gives (LeetCode-style ``List[int]`` without
    its import): only then does the harness import typing (~12 ms of CPU an answer) into each test.

    >>> names_typing("def f(a: List[int]) -> int: ..."), names_typing("print(sum(map(int, input().split())))")
    (True, False)
    """
    return _typing_names().search(code) is not None


def check_code(code: str, tests: Tests, *, timeout: float = 5.0, limits=None, mode: str | None = None) -> CodeVerdict:
    """Run ``code`` against ``tests`` in one sandboxed process; ``timeout`` is per test."""
    from reasonkit import sandbox

    if not tests.cases:
        return CodeVerdict(None, 0, 0, "no_tests")
    longest = max(len(o) if isinstance(o, str) else len(json.dumps(o)) for _, o in tests.cases)
    cap = max(MIN_OUTPUT_CAP, 2 * longest + 1024)  # past it a test's output is certainly wrong: output_limit
    wall = STARTUP_SECONDS + timeout * len(tests.cases)
    limits = limits or sandbox.Limits(cpu_seconds=wall, output_bytes=max(4 << 20, 2 * cap * len(tests.cases)))
    try:
        result = sandbox.run(
            argv=["python", "harness.py"],
            timeout=wall,
            limits=limits,
            mode=mode,
            report=True,
            files={
                "harness.py": harness_source(),
                "solution.py": code,
                "tests.marshal": marshal.dumps({**tests.spec(timeout, cap), "typing": names_typing(code)}),
            },
        )
    except sandbox.SandboxError as e:
        return CodeVerdict(None, 0, len(tests.cases), "sandbox_error", detail=str(e)[:300])
    return verdict_of(result, tests)


def verdict_of(result, tests: Tests) -> CodeVerdict:
    """The verdict from the harness's result lines (on the report channel; the outputs compared here,
    outside the sandbox) and how the sandboxed run ended, as the sandbox saw it (never as the program
    printed it)."""
    total = len(tests.cases)
    lines = [
        line for line in map(_result_line, result.report.decode("utf-8", "replace").splitlines()) if line is not None
    ]
    isolation = tuple(result.isolation)
    if lines and "compile_error" in lines[0]:
        return CodeVerdict(False, 0, total, "compile_error", isolation, None, lines[0]["compile_error"])
    by_test = {}
    for line in lines:
        if isinstance(line.get("test"), int) and 0 <= line["test"] < total:
            by_test.setdefault(line["test"], line)
    passed, keys, reason, detail = 0, [], None, None
    for i in range(total):
        line = by_test.get(i)
        output = line.get("output") if line else None
        if line is not None and line.get("reason") is None and isinstance(output, str):
            try:
                ok = tests.passes(i, output)
                failure = None if ok else "wrong_answer"
            except Unreadable:
                ok, failure = False, "bad_output"
            passed += ok
            keys.append(tests.output_key(output))
        else:
            failure = line.get("reason") if line else None
            keys.append(failure or "missing")
            if line is not None and failure is None:
                failure = "runtime_error"  # a malformed line
        if failure is not None and reason is None:
            reason, detail = failure, (line or {}).get("error")
    if reason is None and len(by_test) < total:  # the run ended before every test reported
        reason = "timeout" if result.timed_out else "output_limit" if result.truncated else "runtime_error"
        detail = f"the harness stopped after {len(by_test)} of {total} tests"
    return CodeVerdict(
        passed == total and reason is None, passed, total, reason, isolation, digest(json.dumps(keys)), detail
    )


# A result line's fields and their types; a line with another type in one of them is no result.
_FIELDS = {
    "test": int,
    "reason": (str, type(None)),
    "output": str,
    "error": str,
    "compile_error": str,
    "seconds": (int, float),
}


def _result_line(text: str) -> dict | None:
    """One result line, read by the bounded decoder: an object whose fields have their types, else None."""
    try:
        value = loads(text, max_chars=len(text) + 1)
    except Unreadable:
        return None
    if not isinstance(value, dict) or any(k in value and not isinstance(value[k], t) for k, t in _FIELDS.items()):
        return None
    return value


class CodeChecker:
    """Checks many (code, tests) pairs on ``workers`` threads (each waits on its own sandboxed
    process); the same program against the same tests is run once."""

    def __init__(self, *, timeout: float = 5.0, workers: int = 2, mode: str | None = None):
        self.timeout, self.workers, self.mode = timeout, workers, mode

    def check(self, items: Sequence[tuple[str, Tests]]) -> list[CodeVerdict]:
        keys = [(code, json.dumps([tests.cases, tests.fn_name, tests.tolerance])) for code, tests in items]
        distinct = dict(zip(keys, items))  # Tests may hold lists (unhashable): keyed by their JSON
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            verdicts = dict(
                zip(
                    distinct,
                    pool.map(lambda item: check_code(*item, timeout=self.timeout, mode=self.mode), distinct.values()),
                )
            )
        return [verdicts[k] for k in keys]


def read_tests(values: Sequence, ids: Sequence[str], column: str, where: str = "traces") -> list[Tests | None]:
    """Each row's tests (None: the row has none); a malformed value is one UserError naming the row."""
    out: list[Tests | None] = []
    for value, row_id in zip(values, ids):
        if value is None or (isinstance(value, str) and not value.strip()):
            out.append(None)
            continue
        try:
            tests = parse_tests(value)
        except BadTests as e:
            raise UserError(f"{where}: row {row_id!r}: column {column!r}: {e}") from None
        out.append(tests if tests.cases else None)
    return out


class CodeVerifyFilter(RowFilter):
    """``distill filter --verifier code``: the verify step for programs (the math VerifyFilter's place
    and name in the funnel). Drops ``no_tests`` (the prompt has none), ``no_code`` (no final Python
    block; ``verify_reason`` says ``no_code`` or ``unclosed_fence``), ``wrong`` (``verify_reason``: the
    first failure, e.g. ``timeout``) and ``unverifiable`` (the sandbox failed) unless kept. Adds
    ``tests_passed``, ``tests_total`` and ``isolation`` (comma-joined) to every judged row.
    """

    name = "verify"
    reasons = ("no_tests", "no_code", "wrong", "unverifiable")

    def __init__(
        self,
        *,
        tests_column: str = "tests",
        unverifiable: str = "drop",
        timeout: float = 5.0,
        workers: int = 2,
        mode: str | None = None,
    ):
        self.column, self.unverifiable = tests_column, unverifiable
        self.checker = CodeChecker(timeout=timeout, workers=workers, mode=mode)

    def prepare(self, batch: pa.Table) -> pa.Table:
        codes = [extract_code(r)[0] for r in batch.column("response").to_pylist()]
        batch = update_rows(batch, "pred", range(len(codes)), codes)
        for name, type_ in (
            ("verify_reason", pa.string()),
            ("tests_passed", pa.int32()),
            ("tests_total", pa.int32()),
            ("isolation", pa.string()),
        ):
            if name in batch.column_names:
                batch = batch.drop_columns([name])
            batch = batch.append_column(pa.field(name, type_), pa.nulls(batch.num_rows, type_))
        return batch

    def judge(self, batch: pa.Table, rows: list[int]):
        if self.column not in batch.column_names:
            raise UserError(
                f"--verifier code reads each prompt's tests from column {self.column!r}; the traces have "
                f"columns {batch.column_names} (set tests_column=NAME)"
            )
        tests = read_tests(
            [batch.column(self.column)[i].as_py() for i in rows],
            [batch.column("id")[i].as_py() for i in rows],
            self.column,
        )
        preds, responses = batch.column("pred").to_pylist(), batch.column("response").to_pylist()
        todo = [k for k, i in enumerate(rows) if tests[k] is not None and preds[i] is not None]
        verdicts = dict(zip(todo, self.checker.check([(preds[rows[k]], tests[k]) for k in todo])))
        reasons, columns = (
            [],
            {"correct": [], "verify_reason": [], "tests_passed": [], "tests_total": [], "isolation": []},
        )
        for k, i in enumerate(rows):
            v = verdicts.get(k)
            if tests[k] is None:
                values, reason = (None, "no_tests", None, None, None), "no_tests"
            elif v is None:
                values, reason = (None, extract_code(responses[i])[1], None, len(tests[k].cases), None), "no_code"
            else:
                values = (v.correct, v.reason, v.tests_passed, v.tests_total, ",".join(v.isolation))
                reason = (
                    "wrong"
                    if v.correct is False
                    else ("unverifiable" if v.correct is None and self.unverifiable == "drop" else None)
                )
            for name, value in zip(columns, values):
                columns[name].append(value)
            reasons.append(reason)
        return reasons, columns

    def close(self) -> None:
        pass


def check_tests_column(path, shards, kind: str, column: str) -> None:
    """Before anything is written: the traces are plain traces with a tests column whose every
    value parses (one UserError naming the shard, row and column otherwise)."""
    import pyarrow.parquet as pq

    if kind != "traces":
        raise UserError(f"{path}: --verifier code checks the programs of plain traces; this directory holds {kind}")
    for shard in shards:
        names = pq.read_schema(shard).names
        if column not in names:
            raise UserError(
                f"{shard}: --verifier code reads each prompt's tests from column {column!r}; found columns "
                f"{names} (name another with --set tests_column=NAME)"
            )
        table = pq.read_table(shard, columns=["id", column])
        read_tests(table.column(column).to_pylist(), table.column("id").to_pylist(), column, str(shard))


_REWARD_MEMO: dict = {}
REWARD_MEMO_SIZE = 16_384


def code_scores(
    responses: Sequence[str | None], tests_values: Sequence, *, timeout: float = 5.0, workers: int = 2
) -> list[float | None]:
    """The ``code`` GRPO reward: 1.0 when the response's program passes every test, 0.0 when it fails
    one or has no program (``None`` response: truncated), None when the row has no tests or the
    sandbox failed. The checker ``distill filter --verifier code`` runs; verdicts are remembered per
    (program, tests) except timeouts (an accident of load as often as a verdict) and sandbox errors."""
    parsed: dict = {}
    out: list[float | None] = [None] * len(responses)
    todo = []
    for i, (response, value) in enumerate(zip(responses, tests_values)):
        key = value if isinstance(value, str) else json.dumps(value)
        if key not in parsed:
            parsed[key] = read_tests([value], [str(i)], "tests", "the code reward")[0]
        tests = parsed[key]
        code = None if response is None else extract_code(response)[0]
        if tests is None:
            continue
        if code is None:
            out[i] = 0.0
        elif (code, key) in _REWARD_MEMO:
            out[i] = _REWARD_MEMO[(code, key)]
        else:
            todo.append((i, code, key))
    verdicts = CodeChecker(timeout=timeout, workers=workers).check([(code, parsed[key]) for _, code, key in todo])
    if len(_REWARD_MEMO) > REWARD_MEMO_SIZE:
        _REWARD_MEMO.clear()
    for (i, code, key), v in zip(todo, verdicts):
        out[i] = None if v.correct is None else float(v.correct)
        if v.reason not in ("timeout", "sandbox_error"):
            _REWARD_MEMO[(code, key)] = out[i]
    return out
