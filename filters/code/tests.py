"""A prompt's tests, read from its test column (JSON) in the shapes the public code sets store them.

Two kinds of test: **stdin** (the program reads the input, its printed output is compared after
normalising whitespace) and **call** (a function, top level or a method of ``class Solution``, is
called with the arguments and its return value compared). Shapes read:

- APPS / TACO ``input_output``: ``{"inputs": [...], "outputs": [...]}``, call-based when it has an
  ``fn_name`` (inputs are argument lists, outputs the return value wrapped in a list). An output
  stored as a list of lines is those lines.
- CodeContests ``public_tests`` / ``private_tests`` / ``generated_tests``: ``{"input": [...],
  "output": [...]}``, or an object holding several of those under those names (all are used).
- LiveCodeBench ``public_test_cases`` / ``private_test_cases``: a list of ``{"input", "output",
  "testtype"}``; ``"stdin"`` tests as above, ``"functional"`` ones take their function name from the
  problem's metadata: ``{"func_name": ..., "tests": [...]}`` (``fn_name`` also read). A functional
  input is one JSON value per line (the arguments), its output one JSON value.
- ``{"tests": [{"input", "output"}, ...], "fn_name"?: ...}`` (what :func:`tests_json` writes).

Any of them may carry ``"tolerance": 1e-6`` (numbers then compare within it, absolute or relative).

>>> parse_tests('{"inputs": ["1 2\\\\n"], "outputs": ["3\\\\n"]}')
Tests(cases=(('1 2\\n', '3\\n'),), fn_name=None, tolerance=None)
>>> parse_tests('[{"input": "[1, 2]\\\\n3", "output": "6", "testtype": "functional"}]', fn_name="f").cases
((([1, 2], 3), 6),)
>>> parse_tests('{"inputs": [[2, 3]], "outputs": [[5]], "fn_name": "add"}')
Tests(cases=(((2, 3), [5]),), fn_name='add', tolerance=None)

The comparisons (made outside the sandbox, on what the harness reports):

>>> same_output("1 2\\n3  \\n\\n", "1 2\\n3")
True
>>> same_output("0.3333333", "0.333333333", tolerance=1e-6), same_output("0.33", "0.333", tolerance=1e-6)
(True, False)
>>> same_value([1, 2], [[1, 2]]), same_value(0.1 + 0.2, 0.3, tolerance=1e-9), same_value(True, 1)
(True, True, False)
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from reasonkit.sandbox.decode import Unreadable, loads  # noqa: F401 (Unreadable: what passes() raises)

#: The prompts column that holds a problem's tests (``--set tests_column=input_output`` reads APPS as stored).
TESTS_COLUMN = "tests"
CODE_CONTESTS_SPLITS = ("public_tests", "private_tests", "generated_tests")
LIVECODEBENCH_SPLITS = ("public_test_cases", "private_test_cases")


class BadTests(ValueError):
    """The test column's value is no test set this module reads (the message says why)."""


@dataclass(frozen=True)
class Tests:
    """``cases``: (input, expected output) pairs; a call test's input is the argument tuple."""

    cases: tuple
    fn_name: str | None = None
    tolerance: float | None = None

    def spec(self, timeout: float, output_cap: int) -> dict:
        """The harness's ``tests.marshal`` (filters/code/harness.py): the inputs only, never the outputs."""
        return {
            "inputs": [i if self.fn_name is None else list(i) for i, _ in self.cases],
            "fn_name": self.fn_name,
            "timeout": timeout,
            "output_cap": output_cap,
        }

    def passes(self, index: int, output: str) -> bool:
        """Whether ``output`` (what the harness reported for test ``index``) is the expected one. A
        call test's output is read by the bounded decoder: one it cannot read (too long, nested
        deeper than any expected value, not JSON) raises :class:`Unreadable` (the ``bad_output``
        verdict), never a RecursionError."""
        expected = self.cases[index][1]
        if self.fn_name is None:
            return same_output(output, expected, self.tolerance)
        return same_value(loads(output, max_chars=max(len(output), 1)), expected, self.tolerance)

    def output_key(self, output: str) -> str:
        """A digest of ``output`` as it is compared (whitespace-normalised), for the cons@k vote."""
        text = "\n".join(lines_of(output)) if self.fn_name is None else output
        return digest(text)


def lines_of(text: str) -> list[str]:
    """Whitespace-normalised lines: tokens joined by one space, leading and trailing blank lines dropped."""
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def _close(a: str, b: str, tolerance: float) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=tolerance)
    except ValueError:
        return False


def same_output(got: str, want: str, tolerance: float | None = None) -> bool:
    """A stdin test's output against the expected one: whitespace-normalised, tokens equal (numbers
    within ``tolerance``, absolute or relative, when the test set asks for it)."""
    a, b = lines_of(got), lines_of(want)
    if a == b:
        return True
    if tolerance is None or len(a) != len(b):
        return False
    for la, lb in zip(a, b):
        ta, tb = la.split(), lb.split()
        if len(ta) != len(tb) or not all(x == y or _close(x, y, tolerance) for x, y in zip(ta, tb)):
            return False
    return True


def _equal(a, b, tolerance: float | None) -> bool:
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (tolerance is not None and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k], tolerance) for k in a)
    return a == b


def same_value(got, want, tolerance: float | None = None) -> bool:
    """A call test's return value (as JSON carried it: a tuple is a list) against the expected one.
    APPS/TACO store the expected return wrapped in a list (``[42]``); their checker accepts both, so
    does this."""
    if _equal(got, want, tolerance):
        return True
    return isinstance(want, list) and len(want) == 1 and _equal(got, want[0], tolerance)


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]


def _text(value, what: str) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)  # APPS stores some outputs as a list of lines
    if not isinstance(value, str):
        raise BadTests(f"{what} must be text, found {type(value).__name__}")
    return value


def _pairs(inputs, outputs, fn_name, where: str) -> list[tuple]:
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise BadTests(f"{where}: inputs and outputs must be lists")
    if len(inputs) != len(outputs):
        raise BadTests(f"{where}: {len(inputs)} inputs but {len(outputs)} outputs")
    if fn_name is None:
        return [(_text(i, f"{where} input"), _text(o, f"{where} output")) for i, o in zip(inputs, outputs)]
    for i in inputs:
        if not isinstance(i, list):
            raise BadTests(f"{where}: a call test's input must be the list of arguments, found {type(i).__name__}")
    return [(tuple(i), o) for i, o in zip(inputs, outputs)]


def _livecodebench(cases: list, fn_name: str | None) -> list[tuple]:
    out = []
    for case in cases:
        if not isinstance(case, dict) or "input" not in case or "output" not in case:
            raise BadTests("a LiveCodeBench test case must be an object with input and output")
        if fn_name is not None and "testtype" not in case and isinstance(case["input"], list):
            out.append((tuple(case["input"]), case["output"]))  # the plain shape: arguments as a list
        elif case.get("testtype", "stdin") == "functional":
            if fn_name is None:
                raise BadTests('a functional test needs the function name ("func_name" beside the tests)')
            try:
                args = tuple(json.loads(line) for line in case["input"].split("\n") if line.strip())
                out.append((args, json.loads(case["output"])))
            except (ValueError, AttributeError, TypeError) as e:
                raise BadTests(f"a functional test's input and output are JSON values, one per line ({e})") from None
        else:
            out.append((_text(case["input"], "input"), _text(case["output"], "output")))
    return out


def parse_tests(value, fn_name: str | None = None) -> Tests:
    """The tests in ``value`` (a JSON string, or the parsed object); BadTests if it is none of the shapes."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise BadTests(f"not JSON ({e})") from None
    tolerance = None
    if isinstance(value, dict):
        fn_name = value.get("fn_name") or value.get("func_name") or fn_name
        tolerance = value.get("tolerance")
        if tolerance is not None and (
            isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0
        ):
            raise BadTests(f"tolerance must be a number >= 0, found {tolerance!r}")
    if fn_name is not None and not (isinstance(fn_name, str) and fn_name.isidentifier()):
        raise BadTests(f"fn_name must be a Python name, found {fn_name!r}")
    if isinstance(value, list):
        cases = _livecodebench(value, fn_name)
    elif isinstance(value, dict) and "inputs" in value:
        cases = _pairs(value["inputs"], value.get("outputs"), fn_name, "input_output")
    elif isinstance(value, dict) and "input" in value:
        cases = _pairs(value["input"], value.get("output"), fn_name, "tests")
    elif isinstance(value, dict) and any(k in value for k in CODE_CONTESTS_SPLITS):
        cases = [
            c
            for k in CODE_CONTESTS_SPLITS
            if value.get(k)
            for c in _pairs(value[k].get("input"), value[k].get("output"), fn_name, k)
        ]
    elif isinstance(value, dict) and any(k in value for k in LIVECODEBENCH_SPLITS + ("tests",)):
        cases = []
        for k in LIVECODEBENCH_SPLITS + ("tests",):
            part = value.get(k)
            part = json.loads(part) if isinstance(part, str) else part  # LiveCodeBench keeps them as JSON text
            cases += _livecodebench(part or [], fn_name)
    else:
        raise BadTests(
            "expected APPS/TACO {inputs, outputs}, CodeContests {input, output}, a LiveCodeBench list "
            "of {input, output, testtype} or {tests: [...]}"
        )
    return Tests(tuple(cases), fn_name, None if tolerance is None else float(tolerance))


def tests_json(cases: list[tuple], fn_name: str | None = None, tolerance: float | None = None) -> str:
    """A test column's value in the plain shape (e.g. for a synthetic task)."""
    data: dict = {"tests": [{"input": list(i) if fn_name else i, "output": o} for i, o in cases]}
    if fn_name:
        data["fn_name"] = fn_name
    if tolerance is not None:
        data["tolerance"] = tolerance
    return json.dumps(data)
