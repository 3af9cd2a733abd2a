"""The harness that runs every test of one program inside ONE sandboxed process (stdlib only).

filters/code/verify.py ships this file's source as ``harness.py`` next to ``solution.py`` (the model's
program) and ``tests.json`` (the tests' *inputs* only) and runs ``python harness.py``. The expected
outputs never enter the sandbox: the harness reports what the program printed (or returned), capped,
and the caller compares (filters/code/tests.py). The program runs in the harness's process and could
rewrite it, but without the expected outputs it has nothing to forge a pass with.

Per test: stdin (fd 0 and ``sys.stdin``) is the test's input, stdout a fresh capped buffer, an
interval timer (``setitimer``) bounds the test; the program is compiled once and executed afresh as
``__main__`` (stdin tests) or loaded once and its function called (call tests). One JSON line per
test goes to the harness's own copy of the original stdout, written as each test ends, so a program
that kills its process still leaves the results before it; fd 1 itself points at /dev/null.

>>> s = CappedStdout(5); s.write("abc"); s.getvalue()
3
'abc'
>>> s.write("def")
Traceback (most recent call last):
...
reasonkit.filters.code.harness.OutputLimit
"""

import builtins
import copy
import io
import json
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
    timeout, cap = float(spec["timeout"]), int(spec["output_cap"])
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in ("exit", "quit"):  # site's builtins (the sandbox runs python -S): programs end with exit()
        if not hasattr(builtins, name):
            setattr(builtins, name, sys.exit)

    def report(**result):
        out.write(MARK + json.dumps(result) + "\n")

    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        report(compile_error=f"{type(e).__name__}: {e}"[:300])
        return
    function = None
    if spec.get("fn_name"):
        status = _run(code, _namespace("solution"), "", timeout, cap, harness_pid)
        if status["reason"] is not None:
            report(compile_error=f"loading the program: {status['reason']}: {status.get('error', '')}"[:300])
            return
        function = _find(status["namespace"], spec["fn_name"])
        if function is None:
            report(compile_error=f"no function {spec['fn_name']!r} (top level or a method of class Solution)")
            return
    for i, test in enumerate(spec["inputs"]):
        if function is not None:
            status = _call(function, test, timeout, cap, harness_pid)
            output = status.get("shown")
        else:
            status = _run(code, _namespace("__main__"), test, timeout, cap, harness_pid)
            output = status["stdout"]
        line = {"test": i, "reason": status["reason"]}
        if status["reason"] is None:
            line["output"] = output
        elif status.get("error"):
            line["error"] = status["error"][:300]
        report(**line)
        if status["reason"] in ("timeout", "memory", "processes"):
            break  # the verdict is settled; the rest would only spend the budget (counted as not passed)


def _namespace(name):
    """A fresh module namespace with typing's names in it: LeetCode-style starter code (LiveCodeBench's
    ``class Solution`` with ``List[int]`` hints) comes without its imports, as TACO's checker assumes too."""
    namespace = {"__name__": name}
    exec("from typing import *", namespace)
    return namespace


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
        try:  # JSON writes a tuple as a list, as the test sets store a returned tuple
            status["shown"] = json.dumps(status["value"], sort_keys=True)
        except (TypeError, ValueError):  # a set, an object: not a value any test expects
            status["shown"] = json.dumps({"unserialisable": repr(status["value"])[:200]})
        if len(status["shown"]) > cap:
            status.update(reason="output_limit", shown=None)
    return status


if __name__ == "__main__":
    main()
