"""Programs that try to buy a verdict they did not earn, or to reach what the namespaces leave shared
(issue 38), through the public entry points: ``check_code`` (what ``distill filter --verifier code``
runs), the GRPO code reward and ``sandbox.run``. Each check returns the ways the sandbox failed to
hold (empty: it held), like sandbox_escape.py; tests/sandbox/test_hostile.py runs every check in
every namespace mode this machine takes, and as a real non-root user (uid 65534) through this file as
a script:

    python tests/sandbox/hostile.py MODE CHECK...   # prints {"uid": ..., "failures": {CHECK: [...]}}
"""

import json
import os
import sys

# Two stdin tests: the sum of a line of integers.
TWO = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
RIGHT = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
TIMEOUT = 0.5  # per test; every slow program below takes 2.5x that on each test
SLOW = "import time\ntime.sleep(1.25)\n"
MARK = "@@reasonkit-test "  # the result-line prefix the harness once wrote on the program's own stdout


def verdict(program: str, tests: str = TWO, mode: str | None = None):
    from reasonkit.filters.code.verify import check_code, parse_tests

    return check_code(program, parse_tests(tests), timeout=TIMEOUT, mode=mode)


def _expect(bad: list, name: str, v, correct, reason) -> None:
    if (v.correct, v.reason) != (correct, reason):
        bad.append(f"{name}: correct={v.correct} reason={v.reason} ({v.detail})")


def _writes_to_every_fd(line: str) -> str:
    """A prelude that writes ``line`` on every descriptor it may hold (the harness's results stream among them)."""
    return ("import os\nfor fd in range(1, 16):\n    try:\n"
            f"        os.write(fd, {line!r}.encode())\n    except OSError:\n        pass\n")


# 4. Whatever a program writes or returns is a verdict, never an exception.
DEEP_RETURN = "def f(x):\n    v = []\n    for _ in range(5000):\n        v = [v]\n    return v\n"
CALL_TEST = json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[1]]})


def unbounded_values(mode=None) -> list[str]:
    bad = []
    cases = {
        "a result line that is not an object": (_writes_to_every_fd(MARK + "5\n" + MARK + '"x"\n') + "print(0)\n", TWO),
        "a 100k-deep result line": (_writes_to_every_fd(MARK + "[" * 100_000 + "\n") + "print(0)\n", TWO),
        "a return value nested 5000 deep": (DEEP_RETURN, CALL_TEST),
    }
    for name, (program, tests) in cases.items():
        try:
            v = verdict(program, tests, mode=mode)
        except Exception as e:  # noqa: BLE001 - the failure under test
            bad.append(f"{name}: raised {type(e).__name__}")
            continue
        if v.correct is not False or v.reason is None:
            bad.append(f"{name}: correct={v.correct} reason={v.reason}")
    return bad


# 9. io_uring's operations pass seccomp unseen: its three calls are refused whole.
IO_URING = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
out = []
for nr, args in ((425, (8, params)), (426, (-1, 0, 0, 0, None, 0)), (427, (-1, 0, None, 0))):
    out.append("ok" if libc.syscall(nr, *args) >= 0 else ctypes.get_errno())
print(out)
"""


def io_uring(mode=None) -> list[str]:
    from reasonkit import sandbox

    r = sandbox.run(IO_URING, mode=mode)
    return [] if r.stdout == "[1, 1, 1]\n" else [f"io_uring_setup/enter/register: {r.stdout or r.stderr[-300:]} (1 = EPERM)"]


CHECKS = {f.__name__: f for f in (unbounded_values, io_uring)}


if __name__ == "__main__":
    mode, names = sys.argv[1], sys.argv[2:]
    print(json.dumps({"uid": os.getuid(), "failures": {n: CHECKS[n](None if mode == "auto" else mode) for n in names}}))
