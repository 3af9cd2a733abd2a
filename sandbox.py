"""Run an untrusted program (a model's Python code) in a throwaway, limited, offline process.

Shared by the ``python`` tool (gen/tools/python.py) and the code verifier; it knows no stage. One
call of :func:`run` is one program run:

- its own process group and, where the machine allows it, fresh PID, mount and network namespaces
  (``unshare``): no network at all (not even the host's loopback, where a vLLM server may listen),
  only its own processes visible, and every process of the run (a detached, double-forked daemon
  included) killed when the program ends;
- ``setrlimit`` limits on CPU seconds, address space, file size, open files and process count; as
  root the program runs under an unprivileged uid of its own (root ignores the process limit, and
  could write anywhere), with ``no_new_privs``;
- an empty working directory on a size-capped tmpfs (``/tmp``, ``/var/tmp``, ``/dev/shm`` are
  private tmpfs too: nothing it writes reaches the host), gone when the run ends;
- a clean environment (``PATH``, ``LANG``, ``HOME``: no token or key of the caller's);
- a wall-clock timeout that kills everything; stdout and stderr read up to a cap (the run is
  stopped when a stream passes it), never buffered whole.

Without namespaces (no ``unshare``, no user namespaces) the same limits apply, leftovers are found
through a child subreaper, and ``Result.isolation`` says what was missing: no network isolation
then, and a write to ``/tmp`` lands on the host's ``/tmp``.

Many tests of one program: pass the test data as ``files`` and a harness as the program (or
``argv``), so one sandboxed process runs them all.

>>> r = run("import sys; print(sum(map(int, sys.stdin.read().split())))", stdin="2 3 4")
>>> r.stdout, r.ok, r.limit
('9\\n', True, None)
>>> r = run("while True: pass", timeout=0.5)
>>> r.ok, r.timed_out, r.limit
(False, True, 'wall')
>>> run("import os; print(sorted(os.environ))").stdout
"['HOME', 'LANG', 'MALLOC_ARENA_MAX', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'PATH', 'PYTHONPATH']\\n"
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_init.py")
# Namespaces per mode. "root": unshare as root, the program under a uid of its own; "userns": an
# unprivileged user namespace (the caller's uid, mapped to root inside); "none": no namespace.
UNSHARE = {
    "root": ["--mount", "--net", "--pid", "--fork", "--kill-child"],
    "userns": ["--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child"],
}
# The working directory inside the mount namespace (on the private /tmp tmpfs).
PRIVATE_WORKDIR = "/tmp/sandbox"
# Each run's uid is its own, so one run's processes never count against another's RLIMIT_NPROC.
_UID_BASE = 200_000
_uids = itertools.count()


@dataclass(frozen=True)
class Limits:
    """What one run may use. CPU is per process (a limit of the process count bounds the total)."""

    cpu_seconds: float = 10
    memory_mb: int = 2048  # address space: a 10 GB allocation fails with MemoryError
    file_size_mb: int = 16  # the largest file it may write
    tmpfs_mb: int = 64  # all it may write, working directory and /tmp together
    open_files: int = 256
    processes: int = 32
    output_bytes: int = 4 << 20  # per stream; past it the run is stopped, the output truncated


@dataclass
class Result:
    """What happened. ``limit`` is the limit that ended the run: ``wall``, ``cpu``, ``memory``,
    ``file_size``, ``output`` or ``processes`` (``memory``/``file_size``/``processes`` are read
    from the program's failure: a Python program sees them as exceptions)."""

    stdout: str
    stderr: str
    returncode: int | None  # exit status; None when killed by a signal
    signal: str | None = None  # e.g. "SIGKILL"
    timed_out: bool = False
    limit: str | None = None
    truncated: bool = False  # stdout or stderr cut at Limits.output_bytes
    elapsed: float = 0.0
    cpu_seconds: float = 0.0
    processes_left: int = 0  # processes still running when the program ended, all killed
    isolation: tuple[str, ...] = field(default=())  # e.g. ("netns", "pidns", "mountns", "uid-drop")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.limit is None


class SandboxError(RuntimeError):
    """The sandbox itself failed to start (not the program)."""


@functools.cache
def available_mode() -> str:
    """The strongest isolation this machine allows: "root", "userns" or "none" (probed once)."""
    unshare = shutil.which("unshare")
    candidates = (["root"] if os.geteuid() == 0 else []) + ["userns"]
    for mode in candidates if unshare else []:
        probe = subprocess.run(
            [unshare, *UNSHARE[mode], "true"], capture_output=True, timeout=10, check=False
        )
        if probe.returncode == 0:
            return mode
    return "none"


def isolation_of(mode: str) -> tuple[str, ...]:
    names = {"root": ("netns", "pidns", "mountns", "uid-drop"), "userns": ("netns", "pidns", "mountns", "userns")}
    return names.get(mode, ("uid-drop",) if os.geteuid() == 0 else ())


def clean_env(home: str) -> dict[str, str]:
    """The program's whole environment: nothing of the caller's. One thread per math library and two
    malloc arenas, so threads do not eat the address-space limit."""
    path = os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
    env = {"PATH": path, "LANG": "C.UTF-8", "HOME": home, "MALLOC_ARENA_MAX": "2", "PYTHONPATH": _site_packages()}
    env.update(dict.fromkeys(["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"], "1"))
    return env


@functools.cache
def _site_packages() -> str:
    """This environment's site-packages, for a program run with ``-S``: the packages stay importable
    without ``site``'s startup (its .pth hooks, e.g. an editable install's finder, cost ~20 ms a run)."""
    import site

    return os.pathsep.join(p for p in site.getsitepackages() if os.path.isdir(p))


def _interpreter_dirs() -> list[str]:
    """Directories the program's interpreter reads (kept reachable after the uid drop)."""
    dirs = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)))}
    return sorted(d for d in dirs if not any(d != o and d.startswith(o + os.sep) for o in dirs))


def run(
    program: str | None = None,
    *,
    stdin: str | bytes = b"",
    argv: Sequence[str] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    timeout: float = 10.0,
    limits: Limits = Limits(),
    mode: str | None = None,
) -> Result:
    """Run ``program`` (Python source, saved as ``main.py``) or ``argv`` in the sandbox.

    Args:
        program: Python source; run as ``python main.py`` in the working directory.
        stdin: the program's standard input.
        argv: the command instead of (or to run with) ``program``; ``"python"`` as ``argv[0]`` is this
            interpreter. Relative paths are relative to the working directory.
        files: more files for the working directory (``{"tests.json": ...}``), e.g. a test harness.
        timeout: wall-clock seconds for the whole run.
        limits: the resource limits.
        mode: "root", "userns" or "none" to force an isolation level (tests); default: the strongest
            available (``available_mode``). "userns" is the non-root caller's mode: forced as root it
            drops no privileges.
    """
    mode = mode or available_mode()
    if mode not in ("root", "userns", "none"):
        raise ValueError(f"sandbox mode {mode!r}: expected root, userns or none")
    files = dict(files or {})
    if program is not None:
        files["main.py"] = program
    argv = list(argv or (["python", "main.py"] if program is not None else []))
    if not argv:
        raise ValueError("run() needs a program or an argv")
    if argv[0] == "python":
        argv[:1] = [sys.executable, "-B", "-S"]  # no bytecode files, no site (see _site_packages)
    elif not os.path.isabs(argv[0]) and "/" not in argv[0]:
        argv[0] = shutil.which(argv[0]) or argv[0]
    namespaces = mode in UNSHARE
    spool = tempfile.mkdtemp(prefix="reasonkit-sandbox-")  # 0700: only the init (as root) reads it
    try:
        _write_spool(spool, files, argv, timeout, limits, mode)
        command = [sys.executable, "-I", "-S", INIT, spool]
        if namespaces:
            command = [shutil.which("unshare") or "unshare", *UNSHARE[mode], *command]
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.monotonic()
        out, err, truncated, killed = _communicate(command, stdin_bytes, timeout, limits.output_bytes, not namespaces)
        elapsed = time.monotonic() - started
        try:
            with open(os.path.join(spool, "status.json")) as f:
                status = json.load(f)
        except (OSError, ValueError):  # killed before it could write one
            status = {"signal": signal.SIGKILL} if killed else {}
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    if "setup_error" in status or not status:
        raise SandboxError(f"sandbox did not start: {status.get('setup_error') or err.decode(errors='replace')[-500:]}")
    if status.get("exit") == 127 and err.startswith(b"sandbox: cannot start"):
        # e.g. the interpreter under /root, out of the dropped uid's reach, and no mount namespace
        raise SandboxError(err.decode(errors="replace").strip())
    result = Result(
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        returncode=status.get("exit"),
        signal=signal.Signals(status["signal"]).name if "signal" in status else None,
        timed_out=status.get("timed_out", False) or killed == "wall",
        truncated=truncated,
        elapsed=elapsed,
        cpu_seconds=status.get("cpu_seconds", 0.0),
        processes_left=status.get("strays", 0),
        isolation=isolation_of(mode),
    )
    result.limit = _limit_hit(result, limits)
    return result


def _write_spool(spool: str, files: dict, argv: list[str], timeout: float, limits: Limits, mode: str) -> None:
    """The init's input: ``work/`` (the program's files) and ``spec.json`` (what to run, how)."""
    work = os.path.join(spool, "work")
    os.mkdir(work)
    for name, content in files.items():
        path = os.path.normpath(os.path.join(work, name))
        if not path.startswith(work + os.sep):
            raise ValueError(f"sandbox file {name!r} is outside the working directory")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode() if isinstance(content, str) else content)
    namespaces = mode in UNSHARE
    # As root (not in a user namespace, where the caller's uid is already unprivileged) the program
    # gets a uid of its own.
    uid = None
    if os.geteuid() == 0 and mode != "userns":
        uid = _UID_BASE + (os.getpid() % 10_000) * 64 + next(_uids) % 64
    if uid is not None and not namespaces:  # the program works in the spool itself
        os.chmod(spool, 0o711)
        for dirpath, _, filenames in os.walk(work):
            for p in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
                os.chown(p, uid, uid)
    spec = {
        "argv": argv,
        "workdir": PRIVATE_WORKDIR if namespaces else work,
        "env": clean_env(PRIVATE_WORKDIR if namespaces else work),
        "limits": {
            **{k: getattr(limits, k) for k in ("memory_mb", "file_size_mb", "open_files", "processes", "tmpfs_mb")},
            "cpu_seconds": max(1, int(limits.cpu_seconds + 0.999)),  # whole seconds, at least one
        },
        "wall_seconds": timeout,
        "uid": uid,
        "mode": mode,
        "pidns": namespaces,
        "mountns": namespaces,
        "keep_readable": _interpreter_dirs(),
    }
    with open(os.path.join(spool, "spec.json"), "w") as f:
        json.dump(spec, f)


def _limit_hit(r: Result, limits: Limits) -> str | None:
    if r.truncated:
        return "output"
    if r.timed_out:
        return "wall"
    if r.signal == "SIGXCPU" or (r.signal == "SIGKILL" and r.cpu_seconds >= limits.cpu_seconds):
        return "cpu"
    if r.returncode == 0:
        return None
    tail = r.stderr[-2000:]
    if r.signal == "SIGXFSZ" or "File too large" in tail or "No space left on device" in tail:
        return "file_size"
    if any(s in tail for s in ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")):
        return "memory"
    if "Resource temporarily unavailable" in tail or "can't start new thread" in tail:
        return "processes"
    return None


def _communicate(
    command: list[str], stdin: bytes, timeout: float, cap: int, gentle: bool
) -> tuple[bytes, bytes, bool, str | None]:
    """Run ``command``; feed stdin, read stdout/stderr up to ``cap`` bytes each. Past the cap, or
    past the timeout (a backstop: the init enforces it first), the run is stopped: ``gentle`` asks
    the init to do it (SIGUSR1; without a PID namespace only it can find escaped processes). Returns
    (stdout, stderr, truncated, why killed: "output", "wall" or None)."""
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    buffers = {out_fd: bytearray(), err_fd: bytearray()}
    truncated, killed = False, None
    sel = selectors.DefaultSelector()
    for fd in buffers:
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = time.monotonic() + timeout + 2.0  # the init's own alarm fires first

    def stop(why: str, hard: bool = False) -> None:
        nonlocal killed
        if killed is None or hard:
            killed = killed or why
            try:
                if gentle and not hard:  # the init kills the program and its escaped descendants
                    os.kill(proc.pid, signal.SIGUSR1)
                else:  # with namespaces, unshare's --kill-child and the PID namespace take the rest
                    os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stop("wall", hard=True)
                break
            for key, _ in sel.select(remaining):
                fd = key.fd
                if fd == in_fd:
                    try:
                        pending = pending[os.write(fd, pending[:65536]):]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(fd)
                    continue
                buf = buffers[fd]
                room = cap - len(buf)
                buf += chunk[: max(room, 0)]
                if len(chunk) > room:
                    truncated = True
                    stop("output")
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            stop("wall", hard=True)
            proc.wait()
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if not stream.closed:
                stream.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return bytes(buffers[out_fd]), bytes(buffers[err_fd]), truncated, killed
