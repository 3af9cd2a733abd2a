"""The harness that runs every test of one program in ONE sandbox, one process per test (stdlib only).

filters/code/verify.py ships this file's source as ``harness.py`` next to ``solution.py`` (the model's
program) and ``tests.marshal`` (the tests' *inputs* only) and runs ``python harness.py`` with the sandbox's
report channel (descriptor 3). The expected outputs never enter the sandbox: the harness reports what
the program printed (or returned), capped, and the caller compares (filters/code/tests.py).

The harness never runs the program's code itself. It reads the tests and the source, compiles it,
makes itself undumpable (no process of its uid may read its memory or its descriptors), ignores every
signal (as the PID 1 of the sandbox's PID namespace it then receives none from its children), and
forks one process per test. That process closes the report channel first, then points fd 0 and
``sys.stdin`` at the test's input (a pipe the harness feeds), ``sys.stdout`` at a capped buffer
(fd 1 at /dev/null), runs the program (executed afresh as ``__main__``, or loaded and its function
called), and writes what it printed on a pipe of its own: that is all a test's process can say, and
its output is the program's answer whatever it writes there. The harness times the test with its
own clock, from the fork to the process's end: a test over its limit is ``timeout`` whatever the
program does to its signals or timers. After each test every process the program left is killed,
and one line per test goes out on the report channel, which no test's process holds.

What a failed test's process may claim about its failure (``memory``, ``file_size``, ``processes``,
``runtime_error``, ``output_limit``, ``compile_error``: the exception that ended it) is its own
account, read as a failure kind and nothing else; ``timeout``, the output's size, and that the test
failed at all are the harness's.

>>> s = CappedStdout(5); s.write("abc"); s.getvalue()
3
'abc'
>>> try:
...     s.write("def")
... except OutputLimit:
...     print("OutputLimit")
OutputLimit
"""

# Only modules that cost nothing to import here: the harness starts once per answer, and json (its re,
# enum), typing, copy and ctypes took more CPU than the rest of a three-test run (bench/code.py). json,
# copy and typing are imported before the first test only when a test needs them (a call test; a
# program that names a typing name); prctl is called through _ctypes, the input read with marshal.
import _ctypes
import _json
import _signal as signal
import builtins
import io
import marshal
import os
import select
import sys
import time

REPORT_FD = 3  # the sandbox's report channel (sandbox.run(report=True))
# What a test's process may say about how it failed; anything else it writes first is no record.
CLAIMS = ("runtime_error", "memory", "file_size", "processes", "output_limit", "compile_error")
SETTLED = ("timeout", "memory", "processes", "compile_error")  # the rest of the tests would only spend the budget
HEADER = 32  # the first line of a record: "ok" or a claimed failure kind
_PRCTL = _ctypes.dlsym(_ctypes.dlopen(None, os.RTLD_NOW), "prctl")
PR_SET_DUMPABLE = 4
TYPING = [False]  # whether each test's namespace gets "from typing import *" (main sets it)


def _prctl(option, value):
    return _ctypes.call_function(_PRCTL, (option, value, 0, 0, 0))


class TestTimeout(BaseException):
    """Kept for programs that name it; the harness's own clock decides a timeout."""


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
    """A failed test's claimed kind, from the exception that ended it (in the test's own process)."""
    if isinstance(exc, OutputLimit):
        return "output_limit"
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError):
        if exc.errno == 27 or "File too large" in str(exc) or "No space left" in str(exc):  # EFBIG
            return "file_size"
        if exc.errno == 11:  # EAGAIN: fork/thread under the process limit
            return "processes"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    return "runtime_error"


def _namespace(name):
    """A fresh module namespace with typing's names in it: LeetCode-style starter code (LiveCodeBench's
    ``class Solution`` with ``List[int]`` hints) comes without its imports, as TACO's checker assumes too."""
    namespace = {"__name__": name}
    if TYPING[0]:  # the caller found a typing name in the source (verify.py); otherwise the import changes nothing
        exec("from typing import *", namespace)
    return namespace


def _find(namespace, name):
    if callable(namespace.get(name)):
        return namespace[name]
    cls = namespace.get("Solution")
    if isinstance(cls, type) and callable(getattr(cls, name, None)):
        return lambda *args: getattr(cls(), name)(*args)
    return None


def _execute(code, fn_name, args, cap):
    """Run the program once, in this test's process: (``"ok"``, what it printed or returned as JSON) or
    (a claimed failure kind, the error)."""
    stdout = CappedStdout(cap)
    sys.stdout, sys.stderr = stdout, CappedStdout(cap)  # what it writes to stderr is dropped (capped too)
    try:
        if fn_name is None:
            exec(code, _namespace("__main__"))
            return "ok", stdout.getvalue()
        namespace = _namespace("solution")
        try:
            exec(code, namespace)
        except SystemExit:
            pass
        except BaseException as e:  # noqa: BLE001 - loading failed: the program's failure
            return "compile_error", f"loading the program: {_reason(e)}: {type(e).__name__}: {e}"
        function = _find(namespace, fn_name)
        if function is None:
            return "compile_error", f"no function {fn_name!r} (top level or a method of class Solution)"
        try:
            import copy  # loaded before the first test (main)

            value = function(*copy.deepcopy(args))
        except SystemExit as e:  # a function has no exit status to end with: a failure
            return "runtime_error", f"SystemExit: {e.code}"
        import json  # loaded before the first test (main)

        try:  # JSON writes a tuple as a list, as the test sets store a returned tuple
            shown = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError, RecursionError):  # a set, an object, too deep: not a value any test expects
            shown = json.dumps({"unserialisable": repr(value)[:200]})
        return ("output_limit", "") if len(shown) > cap else ("ok", shown)
    except SystemExit as e:
        if e.code not in (None, 0):
            return "runtime_error", f"SystemExit: {e.code}"
        return "ok", stdout.getvalue()
    except BaseException as e:  # noqa: BLE001 - the program's failure is the test's result
        return _reason(e), f"{type(e).__name__}: {e}"


def _test_process(code, fn_name, test, cap, record_fd, stdin_fd, pid1):
    """The forked process of one test. Never returns."""
    me = os.getpid()
    try:
        os.close(REPORT_FD)  # first of all: no code of the program ever holds the report channel
        _prctl(
            PR_SET_DUMPABLE, 1
        )  # dumpable again (its own /proc/self/environ readable): it holds nothing of the harness's
        if not pid1:
            os.setpgid(0, 0)  # without a PID namespace, its group is what the harness kills
        for sig in range(1, signal.NSIG):
            if sig not in (signal.SIGKILL, signal.SIGSTOP, 32, 33):  # 32, 33: glibc's own
                try:
                    signal.signal(sig, signal.SIG_DFL)
                except (OSError, ValueError):
                    pass
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python starts a program
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        kind, text = _execute(code, fn_name, test if fn_name is None else list(test), cap)
        if os.getpid() == me:  # a process the program forked reports nothing
            _write_all(record_fd, f"{kind}\n".encode() + text.encode("utf-8", "replace"))
    finally:
        os._exit(0)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _watch(child, record_fd, stdin_fd, stdin, deadline, cap):
    """Feed the test's input, read its process's record, until that process ends or the deadline passes.
    Returns (ended, record bytes, whether the record is within the cap)."""
    pidfd = os.pidfd_open(child)
    pending = memoryview(stdin.encode("utf-8", "replace"))
    os.set_blocking(stdin_fd, False)
    if not pending:
        os.close(stdin_fd)
        stdin_fd = None
    record, reading, ended = bytearray(), True, False
    try:
        while not ended:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            readable, writable, _ = select.select(
                [pidfd] + [record_fd] * reading, [stdin_fd] if stdin_fd else [], [], remaining
            )
            if writable:
                try:
                    pending = pending[os.write(stdin_fd, pending[:65536]) :]
                except BrokenPipeError:
                    pending = pending[:0]
                if not pending:
                    os.close(stdin_fd)
                    stdin_fd = None
            if record_fd in readable:
                chunk = os.read(record_fd, 65536)
                reading = bool(chunk)
                record += chunk
                if len(record) > cap + HEADER:
                    return True, record, False
            ended = pidfd in readable
    finally:
        os.close(pidfd)
        if stdin_fd is not None:
            os.close(stdin_fd)
    return ended, record, True


def _end_test(child, pid1):
    """Kill every process of the test (as PID 1 of the namespace: every process but this one), wait for
    them all; returns the test process's wait status."""
    try:
        if pid1:
            os.kill(-1, signal.SIGKILL)
        else:
            os.killpg(child, signal.SIGKILL)
    except ProcessLookupError:
        pass
    status = None
    while True:
        try:
            pid, wstatus = os.waitpid(-1 if pid1 else child, 0)
        except ChildProcessError:
            return status
        if pid == child:
            status = wstatus
            if not pid1:
                return status


def _drain(record_fd, record, cap):
    """The rest of a record, now that every writer is dead; False when it passes the cap."""
    os.set_blocking(record_fd, False)
    while len(record) <= cap + HEADER:
        try:
            chunk = os.read(record_fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        record += chunk
    return len(record) <= cap + HEADER


def _verdict_of_test(ended, record, fits, wstatus, seconds):
    """The test's result line: its time, and what the harness saw; the process's claim only as a failure kind."""
    line = {"seconds": round(seconds, 4)}
    if not fits:
        return {**line, "reason": "output_limit"}
    if not ended:
        return {**line, "reason": "timeout"}
    head, newline, _ = bytes(record[: HEADER + 1]).partition(b"\n")
    kind = head.decode("ascii", "replace") if newline else ""
    body = bytes(record)[len(head) + 1 :].decode("utf-8", "replace")
    if kind == "ok":
        return {**line, "reason": None, "output": body}
    if kind in CLAIMS:
        return {**line, "reason": kind, "error": body[:300]}
    if wstatus is not None and os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        import signal as names  # only here: the full module imports enum

        name = names.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        return {
            **line,
            "reason": "file_size" if sig == signal.SIGXFSZ else "runtime_error",
            "error": f"killed by {name}",
        }
    return {**line, "reason": "runtime_error", "error": "the test's process ended without a result"}


def json_line(record):
    """A result record (str, int, float or None values) as one JSON line, without the json module."""
    fields = []
    for key, value in record.items():
        text = (
            "null"
            if value is None
            else _json.encode_basestring_ascii(value)
            if isinstance(value, str)
            else repr(value)
        )
        fields.append(f"{_json.encode_basestring_ascii(key)}: {text}")
    return "{" + ", ".join(fields) + "}\n"


def run_test(code, fn_name, test, timeout, cap, pid1):
    record_r, record_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    started = time.monotonic()
    child = os.fork()
    if child == 0:
        os.close(record_r)
        os.close(stdin_w)
        _test_process(code, fn_name, test, cap, record_w, stdin_r, pid1)
    os.close(record_w)
    os.close(stdin_r)
    ended, record, within = _watch(child, record_r, stdin_w, test if fn_name is None else "", started + timeout, cap)
    seconds = time.monotonic() - started
    wstatus = _end_test(child, pid1)
    fits = within and _drain(record_r, record, cap)
    os.close(record_r)
    return _verdict_of_test(ended, record, fits, wstatus, seconds)


def main():
    _prctl(PR_SET_DUMPABLE, 0)  # no test's process reads its memory or descriptors
    for sig in range(1, signal.NSIG):
        if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, 32, 33):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # a test's process writing on fd 1 writes nowhere; what counts is sys.stdout
    os.close(null)
    with open("tests.marshal", "rb") as f:
        spec = marshal.load(f)
    with open("solution.py") as f:
        source = f.read()
    timeout, cap, fn_name = float(spec["timeout"]), int(spec["output_cap"]), spec.get("fn_name")
    TYPING[0] = bool(spec.get("typing"))
    if TYPING[0]:
        import typing  # noqa: F401 - once here, not in each test's process
    if fn_name is not None:
        import copy  # noqa: F401
        import json  # noqa: F401
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in ("exit", "quit"):  # site's builtins (the sandbox runs python -S): programs end with exit()
        if not hasattr(builtins, name):
            setattr(builtins, name, sys.exit)

    def report(**result):
        _write_all(REPORT_FD, json_line(result).encode())

    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        report(compile_error=f"{type(e).__name__}: {e}"[:300])
        return
    pid1 = os.getpid() == 1  # the sandbox's PID namespace: kill(-1) reaches exactly the program's processes
    for i, test in enumerate(spec["inputs"]):
        line = run_test(code, fn_name, test, timeout, cap, pid1)
        report(test=i, **line)
        if line["reason"] in SETTLED:
            break  # the verdict is settled; the rest would only spend the budget (counted as not passed)


if __name__ == "__main__":
    main()
