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
    return (
        "import os\nfor fd in range(1, 16):\n    try:\n"
        f"        os.write(fd, {line!r}.encode())\n    except OSError:\n        pass\n"
    )


# 1. The time a test took is measured outside the program: whatever it does to its own signals or
# timers, a test over its limit is a timeout.
def per_test_time(mode=None) -> list[str]:
    bad = []
    preludes = {
        "ignores SIGALRM": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n",
        "blocks SIGALRM": "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n",
        "cancels the interval timer": "import signal\nsignal.setitimer(signal.ITIMER_REAL, 0)\n",
    }
    for name, prelude in preludes.items():
        _expect(bad, name, verdict(prelude + SLOW + RIGHT, mode=mode), False, "timeout")
    swallow = (
        "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.25:\n    try:\n"
        "        time.sleep(0.05)\n    except BaseException:\n        pass\n"
    )
    _expect(bad, "swallows the timeout", verdict(swallow + RIGHT, mode=mode), False, "timeout")
    return bad


# 2. Only the sandbox itself can say that the sandbox failed: a program that prints the failure text
# and exits 127 is a wrong program.
FAKE_FAILURE = (
    "import os\nos.write(2, b'sandbox: cannot start python: [Errno 13] Permission denied\\n')\nos._exit(127)\n"
)


def sandbox_failure_claimed(mode=None) -> list[str]:
    from reasonkit import sandbox

    bad = []
    _expect(bad, "check_code", verdict(FAKE_FAILURE, mode=mode), False, "runtime_error")
    try:
        r = sandbox.run(FAKE_FAILURE, mode=mode)
        if r.returncode != 127:
            bad.append(f"sandbox.run: exit {r.returncode}")
    except sandbox.SandboxError as e:
        bad.append(f"sandbox.run raised SandboxError: {e}")
    return bad


# 3. Result lines the program forges (a pass, a chosen failure reason) count for nothing: written on
# every descriptor it holds, they garble at most its own test's record (a failure of its own making).
def forged_results(mode=None) -> list[str]:
    bad = []
    for name, record in {
        "reason timeout": {"reason": "timeout"},
        "reason memory": {"reason": "memory"},
        "a pass": {"reason": None, "output": None},
    }.items():
        lines = "".join(
            MARK
            + json.dumps({"test": k, **record, **({"output": ["3\n", "7\n"][k]} if "output" in record else {})})
            + "\n"
            for k in range(2)
        )
        for forged in (lines, lines.replace(MARK, "")):
            v = verdict(_writes_to_every_fd(forged) + "print(0)\n", mode=mode)
            if v.correct is not False or v.reason not in ("wrong_answer", "runtime_error"):
                bad.append(f"{name}: correct={v.correct} reason={v.reason} ({v.detail})")
    return bad


# 1-3 where the harness is within reach (--sandbox none: no PID namespace, the same uid): a wrong
# program that kills or stops the harness, its tests' parent, is still wrong, never unverifiable.
HARNESS_ATTACKS = {
    "kills the harness": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint(0)\n",
    "stops the harness": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nprint(0)\n",
}


def harness_attacked(mode=None) -> list[str]:
    bad = []
    for name, program in HARNESS_ATTACKS.items():
        v = verdict(program, mode=mode)
        if v.correct is not False:
            bad.append(f"{name}: correct={v.correct} reason={v.reason} ({v.detail})")
    return bad


# 4. Whatever a program writes or returns is a verdict, never an exception.
DEEP_RETURN = "def f(x):\n    v = []\n    for _ in range(5000):\n        v = [v]\n    return v\n"
CALL_TEST = json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [[1]]})


def unbounded_values(mode=None) -> list[str]:
    bad = []
    cases = {
        "a result line that is not an object": (
            _writes_to_every_fd(MARK + "5\n" + MARK + '"x"\n') + "print(0)\n",
            TWO,
        ),
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


# 5. Each run has its own IPC namespace: System V shared memory and message queues (and POSIX message
# queues) made by one run are gone with it, unseen by the next run and the host.
IPC = """import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
rt = ctypes.CDLL("librt.so.1", use_errno=True)
key, make = int(sys.argv[1]), sys.argv[2] == "make"
flags = 0o1000 | 0o666 if make else 0o666  # IPC_CREAT
shm = libc.shmget(key, 1 << 20, flags)
if shm >= 0 and make:
    ctypes.memmove(libc.shmat(shm, None, 0), b"answer-cache", 12)
msg = libc.msgget(key, flags)
mq = rt.mq_open(f"/rk-{key}".encode(), (0o100 | 2) if make else 2, 0o666, None)  # O_CREAT | O_RDWR
print(shm >= 0, msg >= 0, mq >= 0)
"""


def _host_ipc_keys() -> set[int]:
    keys = set()
    for table in ("shm", "msg"):
        with open(f"/proc/sysvipc/{table}") as f:
            keys |= {int(line.split()[0]) for line in list(f)[1:] if line.split()}
    return keys


def ipc_namespace(mode=None) -> list[str]:
    import secrets

    from reasonkit import sandbox

    key = 0x3800_0000 + secrets.randbelow(1 << 24)
    made = sandbox.run(argv=["python", "main.py", str(key), "make"], files={"main.py": IPC}, mode=mode)
    found = sandbox.run(argv=["python", "main.py", str(key), "find"], files={"main.py": IPC}, mode=mode)
    bad = (
        []
        if made.stdout == "True True True\n"
        else [f"could not make the objects: {made.stdout} {made.stderr[-300:]}"]
    )
    if found.stdout != "False False False\n":
        bad.append(f"a later run found them (shm, msg, mq): {found.stdout.strip()}")
    if key in _host_ipc_keys():
        bad.append(f"the host holds System V key {key:#x} after the run")
        os.system(f"ipcrm -M {key} -Q {key} 2>/dev/null")
    return bad


# 6. Its own UTS and cgroup namespaces: the host's name and cgroup path unseen, the name unwritable.
UTS = """import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
name = socket.gethostname()
print(name)
print(libc.sethostname(name.encode(), len(name)) == 0)  # the name it holds: nothing changes if this succeeds
try:
    open("/proc/sys/kernel/hostname", "r+").write(name)
    print(True)
except OSError:
    print(False)
print(open("/proc/self/cgroup").read().strip().replace(chr(10), " "))
"""


def uts_and_cgroup_namespaces(mode=None) -> list[str]:
    import socket

    from reasonkit import sandbox

    r = sandbox.run(UTS, mode=mode)
    name, set_name, wrote_name, cgroups = (r.stdout.splitlines() + ["", "", "", ""])[:4]
    bad = []
    if name != "sandbox" or name == socket.gethostname():
        bad.append(f"host name seen: {name!r} {r.stderr[-300:]}")
    if set_name != "False" or wrote_name != "False":
        bad.append(f"host name written (sethostname {set_name}, /proc/sys {wrote_name})")
    if any(not line.endswith(":/") for line in cgroups.split()):
        bad.append(f"cgroup path seen: {cgroups}")
    return bad


# 7. The program never runs as host uid 0, whichever mode is forced: the host's sysctls stay out of its
# reach, and the process limit binds it.
SYSCTLS = """import os
out = []
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/printk_ratelimit"):
    try:
        value = open(path).read()
        with open(path, "r+") as f:
            if path.endswith("ratelimit"):
                f.write(value)  # the value it holds: nothing changes on the host if this succeeds
        out.append("writable")
    except OSError as e:
        out.append(e.errno)
print(out)
"""


def never_host_root(mode=None) -> list[str]:
    from reasonkit import sandbox

    bad = []
    r = sandbox.run(SYSCTLS, mode=mode)
    if "writable" in r.stdout or not r.ok:
        bad.append(f"host sysctls: {r.stdout.strip()} {r.stderr[-300:]}")
    bomb = sandbox.run(
        "import os\nwhile True:\n    os.fork()", timeout=8, mode=mode, limits=sandbox.Limits(processes=32)
    )
    if bomb.limit != "processes":
        bad.append(f"a fork bomb under processes=32 ended with limit {bomb.limit}")
    return bad


# 8. The init is out of the program's reach: signals to every process it can name change nothing.
SIGNALS = """import os, signal, time
for pid in [0, 1, os.getppid(), -os.getpgid(0)] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    for sig in (signal.SIGALRM, signal.SIGUSR1, signal.SIGTERM):
        try:
            if pid != os.getpid():
                os.kill(pid, sig)
        except OSError:
            pass
time.sleep(0.3)
print("ok")
"""


def init_unreachable(mode=None) -> list[str]:
    from reasonkit import sandbox

    r = sandbox.run(SIGNALS, mode=mode, timeout=5)
    return (
        []
        if (r.ok, r.stdout, r.timed_out) == (True, "ok\n", False)
        else [f"the run ended early: stdout {r.stdout!r}, timed_out {r.timed_out}, limit {r.limit}"]
    )


# 10. Limits per run, not per process: processes together, memfds and both tmpfs count against one cap.
# Where the machine gives no cgroup (a non-root user without a delegated one) the run says so
# ("no-cgroup"), memfd_create is refused and /dev/shm is /tmp's tmpfs.
MEMORY = """import os, select, time
r, w = os.pipe()
for _ in range(3):
    if os.fork() == 0:
        block = bytearray(b"x") * (200 << 20)  # every page written
        os.write(w, b"1")
        time.sleep(30)
        os._exit(0)
os.close(w)
held, deadline = 0, time.monotonic() + 4
while held < 3 and select.select([r], [], [], max(deadline - time.monotonic(), 0))[0]:
    held += len(os.read(r, 1))
print(held)
"""
CPU = """import os, time
pids = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        t = time.process_time()
        while time.process_time() - t < 0.9:
            pass
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
print("done")
"""
MEMFD = """import os
held = []
try:
    for _ in range(3):
        fd = os.memfd_create("cache")
        for _ in range(100):
            os.write(fd, b"x" * (1 << 20))
        held.append(fd)
    print(len(held) * 100)
except OSError as e:
    print(len(held) * 100, e.errno)
"""
SCRATCH = """import os
total = 0
for path in ("/tmp/a", "/dev/shm/b"):
    try:
        with open(path, "wb") as f:
            for _ in range(64):
                f.write(b"x" * (1 << 20))
                f.flush()
                total += 1
    except OSError:
        pass
print(total)
"""


def per_run_limits(mode=None) -> list[str]:
    from reasonkit import sandbox

    bad = []
    Limits = sandbox.Limits
    scratch = sandbox.run(SCRATCH, mode=mode, limits=Limits(tmpfs_mb=32, file_size_mb=64))
    if not scratch.stdout.strip().isdigit() or int(scratch.stdout) > 32:
        bad.append(f"/tmp and /dev/shm held {scratch.stdout.strip()} MB under tmpfs_mb=32 {scratch.stderr[-200:]}")
    memfd = sandbox.run(MEMFD, mode=mode, limits=Limits(memory_mb=256, file_size_mb=512))
    if "no-cgroup" in memfd.isolation:
        if memfd.stdout.split() != ["0", "1"]:  # EPERM at the first memfd_create
            bad.append(f"no cgroup, yet memfds held: {memfd.stdout.strip()} {memfd.stderr[-200:]}")
        return bad  # the rest is what only a cgroup can count
    if "cgroup" not in memfd.isolation:
        bad.append(f"the run's isolation says nothing of a cgroup: {memfd.isolation}")
    if memfd.stdout.split()[:1] == ["300"]:
        bad.append(f"3 memfds held 300 MB under memory_mb=256 (limit {memfd.limit})")
    memory = sandbox.run(MEMORY, mode=mode, timeout=15, limits=Limits(memory_mb=256))
    if memory.stdout.strip() == "3" or memory.limit != "memory":
        bad.append(f"3 processes x 200 MB under memory_mb=256: {memory.stdout.strip()} held, limit {memory.limit}")
    cpu = sandbox.run(CPU, mode=mode, timeout=20, limits=Limits(cpu_seconds=1))
    if cpu.limit != "cpu" or cpu.cpu_seconds > 1.6 or cpu.stdout:
        bad.append(
            f"3 processes x 0.9 CPU-s under cpu_seconds=1: {cpu.stdout.strip()!r}, limit {cpu.limit}, "
            f"{cpu.cpu_seconds:.2f} CPU-s"
        )
    return bad


# 11. The program's view holds no host path it does not need: not the init's command line (the spool,
# the checkout), not the kernel's, not the editable install's record of the checkout; the host paths
# left are those of the interpreter and its site-packages, which it runs from.
LEAKS = """import glob, json, os
seen = {"cmdline": open("/proc/cmdline").read(), "mountinfo": open("/proc/self/mountinfo").read(),
        "environ": dict(os.environ), "processes": {}}
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        seen["processes"][pid] = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        pass
for site in os.environ["PYTHONPATH"].split(":"):
    for path in glob.glob(site + "/*.dist-info/direct_url.json") + glob.glob(site + "/__editable__*"):
        seen[path] = open(path).read()
print(json.dumps(seen))
"""


def host_paths(mode=None) -> list[str]:
    from pathlib import Path

    from reasonkit import sandbox
    from reasonkit.sandbox.host import site_packages

    r = sandbox.run(LEAKS, mode=mode)
    if not r.ok:
        return [f"did not run: {r.stderr[-300:]}"]
    seen = json.loads(r.stdout)
    blob = json.dumps(seen)
    for site in site_packages():
        blob = blob.replace(site, "<site-packages>")
    checkout = str(Path(sandbox.__file__).resolve().parents[1])
    bad = [
        f"{what} in the view"
        for what, text in (("the spool", "reasonkit-sandbox-"), ("the checkout", checkout))
        if text in blob
    ]
    if seen["cmdline"]:
        bad.append(f"the kernel's command line: {seen['cmdline'][:80]}")
    if list(seen["processes"]) != ["1"]:
        bad.append(f"processes other than the program's own: {seen['processes']}")
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
    return (
        []
        if r.stdout == "[1, 1, 1]\n"
        else [f"io_uring_setup/enter/register: {r.stdout or r.stderr[-300:]} (1 = EPERM)"]
    )


CHECKS = {
    f.__name__: f
    for f in (
        per_test_time,
        sandbox_failure_claimed,
        forged_results,
        harness_attacked,
        unbounded_values,
        ipc_namespace,
        uts_and_cgroup_namespaces,
        never_host_root,
        init_unreachable,
        io_uring,
        per_run_limits,
        host_paths,
    )
}
# What holds without namespaces too (--sandbox none): the verdict and the seccomp filter.
VERDICT_CHECKS = (
    "per_test_time",
    "sandbox_failure_claimed",
    "forged_results",
    "harness_attacked",
    "unbounded_values",
    "io_uring",
)


if __name__ == "__main__":
    mode, names = sys.argv[1], sys.argv[2:]
    print(
        json.dumps({"uid": os.getuid(), "failures": {n: CHECKS[n](None if mode == "auto" else mode) for n in names}})
    )
