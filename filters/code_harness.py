"""The harness that runs every test of one program inside ONE sandboxed process (stdlib only).

Not imported by the sandboxed run: filters/code.py ships this file's source as ``harness.py`` next to
``solution.py`` (the model's program) and ``tests.json`` (filters/code_tests.py's normalised tests)
and runs ``python harness.py``. It is also imported in this process, so the comparison the harness
makes (:func:`same_output`, :func:`same_value`) is tested and reused as ordinary code.

Per test: stdin (fd 0 and ``sys.stdin``) is the test's input, stdout a fresh capped buffer, an
interval timer (``setitimer``) bounds the test; the program is compiled once and executed afresh as
``__main__`` (stdin tests) or loaded once and its function called (call tests). One JSON line per
test goes to the harness's own copy of the original stdout, written as each test ends, so a program
that kills its process still leaves the results before it; fd 1 itself points at /dev/null, so a
program writing to fd 1 directly cannot forge a result line. Results carry a digest of the
normalised output (cons@k votes on it), never the output itself.

>>> same_output("1 2\\n3  \\n\\n", "1 2\\n3")
True
>>> same_output("0.3333333", "0.333333333", tolerance=1e-6), same_output("0.33", "0.333", tolerance=1e-6)
(True, False)
>>> same_value((1, 2), [[1, 2]]), same_value(0.1 + 0.2, 0.3, tolerance=1e-9), same_value(True, 1)
(True, True, False)
"""

import copy
import hashlib
import io
import json
import math
import os
import signal
import sys

MARK = "@@reasonkit-test "  # prefix of a result line (anything else on the results stream is ignored)


class TestTimeout(BaseException):
    """Raised by the interval timer; a BaseException, so ``except Exception`` in the program lets it pass."""


class OutputLimit(BaseException):
    """The test's output passed its cap."""


class CappedStdout(io.TextIOBase):
    def __init__(self, cap):
        self.parts, self.size, self.cap = [], 0, cap

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.size += len(s)
        if self.size > self.cap:
            raise OutputLimit()
        self.parts.append(s)
        return len(s)

    @property
    def buffer(self):  # sys.stdout.buffer.write(b"...")
        return _BytesView(self)

    def getvalue(self):
        return "".join(self.parts)


class _BytesView:
    def __init__(self, text):
        self.text = text

    def write(self, b):
        self.text.write(bytes(b).decode("utf-8", "replace"))
        return len(b)

    def flush(self):
        pass


def lines_of(text):
    """Whitespace-normalised lines: tokens joined by one space, trailing blank lines dropped."""
    return [" ".join(line.split()) for line in text.strip().splitlines()]


def _close(a, b, tolerance):
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=tolerance, abs_tol=tolerance)


def same_output(got, want, tolerance=None):
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


def _plain(value):
    """A returned value as JSON would carry it (tuples are lists)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _equal(a, b, tolerance):
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (tolerance is not None and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k], tolerance) for k in a)
    return a == b


def same_value(got, want, tolerance=None):
    """A call test's return value against the expected one. APPS/TACO store the expected return
    wrapped in a list (``[42]``), as their checker accepts both: so does this."""
    got = _plain(got)
    if _equal(got, want, tolerance):
        return True
    return isinstance(want, list) and len(want) == 1 and _equal(got, want[0], tolerance)


def digest(text):
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]


def _reason(exc):
    """A failed test's reason from the exception that ended it."""
    if isinstance(exc, TestTimeout):
        return "timeout"
    if isinstance(exc, OutputLimit):
        return "output_limit"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, RecursionError):
        return "runtime_error"
    if isinstance(exc, OSError):
        if exc.errno == 27 or "File too large" in str(exc) or "No space left" in str(exc):  # EFBIG
            return "file_size"
        if exc.errno == 11:  # EAGAIN: fork/thread under the process limit
            return "processes"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    return "runtime_error"


def main():
    harness_pid = os.getpid()
    out = os.fdopen(os.dup(1), "w", buffering=1)  # the results stream
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    with open("tests.json") as f:
        spec = json.load(f)
    with open("solution.py") as f:
        source = f.read()
    tolerance, timeout, cap = spec.get("tolerance"), float(spec["timeout"]), int(spec["output_cap"])
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def report(**result):
        out.write(MARK + json.dumps(result) + "\n")

    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        report(compile_error=f"{type(e).__name__}: {e}"[:300])
        return
    function = None
    if spec.get("fn_name"):
        status = _run(code, {"__name__": "solution"}, "", timeout, cap, harness_pid)
        if status["reason"] is not None:
            report(compile_error=f"loading the program: {status['reason']}: {status.get('error', '')}"[:300])
            return
        function = _find(status["namespace"], spec["fn_name"])
        if function is None:
            report(compile_error=f"no function {spec['fn_name']!r} (top level or a method of class Solution)")
            return
    for i, test in enumerate(spec["tests"]):
        if function is not None:
            status = _call(function, test["input"], timeout, cap, harness_pid)
            ok = status["reason"] is None and same_value(status["value"], test["output"], tolerance)
            shown = status.get("shown", "")
        else:
            status = _run(code, {"__name__": "__main__"}, test["input"], timeout, cap, harness_pid)
            shown = "\n".join(lines_of(status["stdout"])) if status["reason"] is None else ""
            ok = status["reason"] is None and same_output(status["stdout"], test["output"], tolerance)
        reason = status["reason"] or (None if ok else "wrong_answer")
        line = {"test": i, "ok": ok, "reason": reason, "key": digest(shown) if status["reason"] is None else reason}
        if status.get("error"):
            line["error"] = status["error"][:300]
        report(**line)
        if reason in ("timeout", "memory", "processes"):
            break  # the verdict is settled; the rest would only spend the budget (counted as not passed)


def _alarm(signum, frame):
    raise TestTimeout()


def _stdin(text):
    """Point fd 0 and sys.stdin at ``text`` (a program may read either)."""
    path = ".stdin"
    with open(path, "w") as f:
        f.write(text)
    fd = os.open(path, os.O_RDONLY)
    if fd != 0:  # 0 when the last test closed fd 0 (open(0).read() does)
        os.dup2(fd, 0)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))


def _guarded(body, timeout, cap, harness_pid, stdin):
    """Run ``body()`` with stdin, a capped stdout and the timer; a forked child never returns here."""
    _stdin(stdin)
    stdout = CappedStdout(cap)
    sys.stdout, sys.stderr = stdout, CappedStdout(cap)  # what it writes to stderr is dropped (capped too)
    result = {"reason": None}
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            result["value"] = body()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except SystemExit as e:
        if e.code not in (None, 0):
            result.update(reason="runtime_error", error=f"SystemExit: {e.code}")
    except BaseException as e:  # noqa: BLE001 - the program's failure is the test's result
        result.update(reason=_reason(e), error=f"{type(e).__name__}: {e}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if os.getpid() != harness_pid:  # the program forked and this is the child: it reports nothing
            os._exit(0)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    result["stdout"] = stdout.getvalue()
    return result


def _run(code, namespace, stdin, timeout, cap, harness_pid):
    status = _guarded(lambda: exec(code, namespace), timeout, cap, harness_pid, stdin)
    status["namespace"] = namespace
    return status


def _find(namespace, name):
    if callable(namespace.get(name)):
        return namespace[name]
    cls = namespace.get("Solution")
    if isinstance(cls, type) and callable(getattr(cls, name, None)):
        return lambda *args: getattr(cls(), name)(*args)
    return None


def _call(function, args, timeout, cap, harness_pid):
    args = copy.deepcopy(args)
    status = _guarded(lambda: function(*args), timeout, cap, harness_pid, "")
    if status["reason"] is None:
        try:
            status["shown"] = json.dumps(_plain(status["value"]), sort_keys=True)
        except (TypeError, ValueError):
            status["shown"] = repr(status["value"])
    return status


if __name__ == "__main__":
    main()
