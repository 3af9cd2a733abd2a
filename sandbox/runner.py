"""One run of an untrusted program: the spool, the init under ``unshare``, its output read up to a
cap, the status. :mod:`reasonkit.sandbox` (this folder's ``__init__``) says what a run enforces."""

from __future__ import annotations

import itertools
import json
import marshal
import os
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reasonkit.sandbox.cgroup import RunCgroup
from reasonkit.sandbox.host import (  # noqa: F401 (SandboxError, clean_env, view_of: the runner's public names)
    SandboxError,
    clean_env,
    outermost,
    python,
    view_of,
)
from reasonkit.sandbox.modes import (  # noqa: F401 (the mode choosers: the runner's public names too)
    ENV_MODE,
    HOW_TO_FIX,
    MODES,
    UNSHARE,
    available_mode,
    bwrap_works,
    isolation_of,
    requested_mode,
    resolve_mode,
)

INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init.py")
# The init (init.py) makes the program's PID namespace (and, in root and userns modes, its cgroup
# namespace) itself, and stays outside it; in userns mode started by root it makes every namespace and
# this process maps the user namespace (the program's uid there, 1, to an unprivileged host uid).
PROGRAM_UID_IN_USERNS = 1
# The working directory inside the view (on the private /tmp tmpfs).
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
    processes_left: int = 0  # without a PID namespace: processes still running when the program ended, all killed
    isolation: tuple[str, ...] = field(default=())  # e.g. ("netns", "pidns", "mountns", "uid-drop")
    report: bytes = b""  # what the program wrote on its report channel (run(report=True))

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.limit is None


def preflight(mode: str | None = None) -> str:
    """Run one trivial program the way a stage will run the model's; returns the mode used.

    Raises SandboxError naming the reason and the fix, before any input is read. ``none`` warns on
    stderr (the program will run with the caller's rights).
    """
    mode = resolve_mode(mode)
    try:
        result = run("print('ok')", mode=mode, timeout=30)
    except SandboxError as e:
        raise SandboxError(f"the sandbox cannot start in mode {mode!r}: {e}; {HOW_TO_FIX}") from None
    if result.stdout != "ok\n":
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        raise SandboxError(f"the sandbox cannot run a trivial program in mode {mode!r}: {why}; {HOW_TO_FIX}")
    if mode == "none":
        print(
            "warning: --sandbox none: model programs run WITHOUT isolation, with all of your rights "
            "(files, network, tokens); recorded as isolation 'no-namespaces'",
            file=sys.stderr,
        )
    return mode


# long: the public entry: spool, files, fds, cgroup and the result, each step reading the ones before
def run(
    program: str | None = None,
    *,
    stdin: str | bytes = b"",
    argv: Sequence[str] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    timeout: float = 10.0,
    limits: Limits = Limits(),
    mode: str | None = None,
    report: bool = False,
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
        mode: "root", "userns" or "none" to force an isolation level (tests); default: the user's
            ``--sandbox`` (REASONKIT_SANDBOX), else the strongest available (``resolve_mode``: never
            "none" unless named). "userns" is the non-root caller's mode (forced as root too, for tests).
        report: give the program a report channel, descriptor 3 (a pipe): what it writes there is
            ``Result.report``. A program that keeps it from its own children (the code verifier's
            harness closes it in each test's process) has a channel they cannot write.
    """
    mode = resolve_mode(mode)
    files = dict(files or {})
    if program is not None:
        files["main.py"] = program
    argv = list(argv or (["python", "main.py"] if program is not None else []))
    if not argv:
        raise ValueError("run() needs a program or an argv")
    if argv[0] == "python":
        argv[:1] = [python(), "-B", "-S"]  # no bytecode files, no site (see _site_packages)
    elif not os.path.isabs(argv[0]) and "/" not in argv[0]:
        argv[0] = shutil.which(argv[0]) or argv[0]
    for name in files:
        path = os.path.normpath(os.path.join(PRIVATE_WORKDIR, name))
        if not path.startswith(PRIVATE_WORKDIR + os.sep):
            raise ValueError(f"sandbox file {name!r} is outside the working directory")
    spool = tempfile.mkdtemp(prefix="reasonkit-sandbox-") if mode != "bwrap" else None  # 0700
    fds = _Fds()
    group = RunCgroup.make(limits.memory_mb, limits.processes)
    try:
        spec = _spec(spool, argv, timeout, limits, mode)
        spec["cgroup"] = group.spec() if group else None
        fds["bundle"] = _bundle(spec, files)
        fds["status"], fds["init_status"] = os.pipe2(os.O_CLOEXEC)
        fds["init_control"], fds["control"] = os.pipe2(os.O_CLOEXEC)
        if report:
            fds["report"], fds["init_report"] = os.pipe2(os.O_CLOEXEC)
        if group and mode == "bwrap":  # bubblewrap says the init's pid (its child's) on this pipe
            fds["info"], fds["bwrap_info"] = os.pipe2(os.O_CLOEXEC)
        passed = [fds[k] for k in _Fds.PASSED if k in fds]
        command = _command(mode, spec, limits, [python(), "-I", "-S", INIT, *map(str, passed)], fds.get("bwrap_info"))
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.monotonic()
        streams, truncated, killed = _communicate(
            command,
            stdin_bytes,
            timeout,
            limits.output_bytes,
            fds,
            _map_users(spec["host_uid"]) if spec["userns_by_caller"] else None,
            _join(group, fds.get("info")) if group else None,
        )
        elapsed = time.monotonic() - started
    finally:
        fds.close_all()
        if group:
            group.close()
        if spool:
            shutil.rmtree(spool, ignore_errors=True)
    out, err, status_bytes, report_bytes = streams
    status = _status(status_bytes, killed, err)
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
        isolation=isolation_of(mode, cgroup=group is not None),
        report=report_bytes,
    )
    result.limit = _limit_hit(result, limits, status)
    return result


class _Fds(dict):
    """The descriptors of one run, by name, each closed exactly once (threads run many at once: a number
    closed twice may be another run's by then). ``init_*`` are the init's ends, passed to it in this
    order; ``status``, ``control`` and ``report`` are ours."""

    PASSED = ("bundle", "init_status", "init_control", "init_report")

    def close(self, name: str) -> None:
        fd = self.pop(name, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        for name in list(self):
            self.close(name)


def _status(data: bytes, killed: str | None, stderr: bytes) -> dict:
    """The init's status: the only channel that can say the sandbox failed (SandboxError); never the
    program's exit status or what it printed."""
    try:  # marshal: written by the init (same interpreter), on a descriptor no process of the program holds
        status = marshal.loads(data) if data else {}
    except (EOFError, ValueError, TypeError):
        status = {}
    if not isinstance(status, dict):
        status = {}
    if "setup_error" in status:
        raise SandboxError(f"sandbox: {status['setup_error']}")
    if not status:
        if killed is None:  # unshare or bubblewrap could not start it, or the init was killed from outside
            raise SandboxError(f"sandbox did not start: {stderr.decode(errors='replace')[-500:].strip()}")
        status = {"signal": signal.SIGKILL}  # stopped by the caller before the init could report
    return status


def _command(mode: str, spec: dict, limits: Limits, init: list[str], info_fd: int | None) -> list[str]:
    if mode == "bwrap":
        from reasonkit.sandbox.bwrap import command as bwrap_command

        return bwrap_command(spec["view"], limits.tmpfs_mb, init, info_fd)
    if mode == "userns" and spec["userns_by_caller"]:
        return init  # the init makes the namespaces, the caller maps them (_map_users)
    if mode in UNSHARE:
        return [shutil.which("unshare") or "unshare", *UNSHARE[mode], *init]
    return init


def _join(group: RunCgroup, info_fd: int | None):
    """What moves the init into the run's cgroup, once started: its pid is the started command's (the
    init, exec'd by ``unshare``), or under bubblewrap its child's, as bubblewrap says on ``info_fd``."""

    def join(proc: subprocess.Popen, deadline: float) -> None:
        group.join(proc.pid if info_fd is None else _bwrap_child_pid(info_fd, deadline))

    join.fds = group.fds()  # the cgroup's files the init reads, passed to it
    return join


def _read_until(fd: int, end: bytes, deadline: float, who: str, size: int = 4096) -> bytes:
    """Read ``fd`` until ``end`` comes (``size`` bytes at a time: 1 where the rest is not ours), or OSError
    naming ``who`` when it does not come in time or the writer ends first."""
    data = b""
    while end not in data:
        if not select.select([fd], [], [], max(deadline - time.monotonic(), 0))[0]:
            raise OSError(f"{who}: nothing in time")
        chunk = os.read(fd, size)
        if not chunk:
            raise OSError(f"{who}: ended first")
        data += chunk
    return data


def _bwrap_child_pid(fd: int, deadline: float) -> int:
    data = _read_until(fd, b"}", deadline, "bubblewrap's child pid (--info-fd)")
    return int(json.loads(data[: data.index(b"}") + 1])["child-pid"])


def _map_users(host_uid: int):
    """``userns`` started by root: the init's user namespace maps its root to root (the init) and uid 1 to
    ``host_uid`` (the program), written by this process (only root outside may write a second line)."""

    def write_maps(pid: int) -> None:
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(f"0 0 1\n{PROGRAM_UID_IN_USERNS} {host_uid} 1\n")

    return write_maps


def _spec(spool: str | None, argv: list[str], timeout: float, limits: Limits, mode: str) -> dict:
    """What the init does: the program, its limits, its uid, the namespaces and the view."""
    namespaces = mode != "none"
    # As root the program gets a uid of its own, never host uid 0: directly in modes root, bwrap and
    # none, and through the user namespace's map in userns (its uid 1 there is this host uid).
    host_uid = _UID_BASE + (os.getpid() % 10_000) * 64 + next(_uids) % 64 if os.geteuid() == 0 else None
    by_caller = mode == "userns" and host_uid is not None
    uid = PROGRAM_UID_IN_USERNS if by_caller else (None if mode == "userns" else host_uid)
    workdir = PRIVATE_WORKDIR if namespaces else os.path.join(spool, "work")
    if uid is not None and not namespaces:  # the program works in the spool itself
        os.chmod(spool, 0o711)
    spec = {
        "argv": argv,
        "workdir": workdir,
        "env": clean_env(workdir),
        "limits": {
            **{k: getattr(limits, k) for k in ("memory_mb", "file_size_mb", "open_files", "processes", "tmpfs_mb")},
            "cpu_seconds": max(1, int(limits.cpu_seconds + 0.999)),  # whole seconds, at least one
        },
        "wall_seconds": timeout,
        "uid": uid,
        "host_uid": host_uid,
        "mode": mode,
        "userns_by_caller": by_caller,
        "pidns": namespaces,
        "mountns": mode in ("root", "userns"),  # the program's process builds the view; under bwrap, bubblewrap has
        "newroot": os.path.join(spool, "root") if mode in ("root", "userns") else None,  # where it is built
        "view": view_of(argv[0]) if namespaces else None,
    }
    if spec["newroot"]:
        os.mkdir(spec["newroot"], 0o700)
    if mode == "bwrap":  # the init starts from its own directory in the view; the program's process unbinds it
        init_dir = os.path.dirname(INIT)
        binds = outermost([*spec["view"]["binds"], init_dir])
        spec["view"]["init_bind"] = init_dir if init_dir in binds else None
        spec["view"]["binds"] = binds
    return spec


def _bundle(spec: dict, files: dict) -> int:
    """The init's input, one descriptor: the spec and the program's files (an anonymous file in memory)."""
    fd = os.memfd_create("reasonkit-sandbox-bundle", os.MFD_CLOEXEC)
    data = {"spec": spec, "files": [(name, c.encode() if isinstance(c, str) else c) for name, c in files.items()]}
    with os.fdopen(os.dup(fd), "wb") as f:  # marshal, not json: the init starts without json's imports (~4 ms)
        marshal.dump(data, f)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _limit_hit(r: Result, limits: Limits, status: dict) -> str | None:
    """The limit that ended the run. ``output`` and ``wall`` are the caller's and the init's own
    observations, ``cpu`` the kernel's (the signal, or the run's CPU time the init measured and stopped);
    ``memory`` and ``processes`` the run's cgroup's (an OOM kill, a refused fork) where it has one;
    else they and ``file_size`` are read from what the program printed when it failed (a Python program
    sees them as exceptions), so a program can claim them: the code verifier does not use them (it has
    its harness's own account of each test)."""
    if r.truncated:
        return "output"
    if r.timed_out:
        return "wall"
    if (
        status.get("cpu_exceeded")
        or r.signal == "SIGXCPU"
        or (r.signal == "SIGKILL" and r.cpu_seconds >= limits.cpu_seconds)
    ):
        return "cpu"
    if status.get("oom_kills"):  # the run's cgroup: the kernel killed one of its processes at the memory cap
        return "memory"
    if status.get("forks_refused") and r.returncode != 0:  # the run's cgroup refused a fork at its process cap
        return "processes"
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


# long: one select loop over the program's pipes, the init's status and the deadline: its state is one
def _communicate(
    command: list[str],
    stdin: bytes,
    timeout: float,
    cap: int,
    fds: _Fds,
    map_users=None,
    join=None,
) -> tuple[tuple[bytes, bytes, bytes, bytes], bool, str | None]:
    """Run ``command``; feed stdin, read stdout/stderr up to ``cap`` bytes each, and the init's status and
    the program's report. Past the cap, or past the timeout (a backstop: the init enforces it first),
    the run is stopped: the control pipe closed asks the init to stop the program (without a PID
    namespace only it can find escaped processes); past a grace, every process of the command's
    group is killed. ``map_users(pid)``: the init's user namespace to map, once it says it made one;
    ``join(proc, deadline)``: moves the init into the run's cgroup, while its interpreter starts.
    Returns ((stdout, stderr, status, report), truncated, why killed: "output", "wall" or None)."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        pass_fds=[*(fds[k] for k in (*_Fds.PASSED, "bwrap_info") if k in fds), *(join.fds if join else ())],
    )
    for name in (*_Fds.PASSED, "bwrap_info"):
        fds.close(name)  # the init's now; their ends of file are its ends
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    status_fd, report_fd = fds["status"], fds.get("report")
    caps = {out_fd: cap, err_fd: cap, status_fd: 1 << 16}
    if report_fd is not None:
        caps[report_fd] = cap
    buffers = {fd: bytearray() for fd in caps}
    truncated, killed = False, None
    deadline = time.monotonic() + timeout + 2.0  # the init's own clock runs out first

    def stop(why: str, hard: bool = False) -> None:
        nonlocal killed
        killed = killed or why
        fds.close("control")  # the init kills the program (and, without namespaces, what it left)
        if hard:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # unshare's or bubblewrap's group; the program dies with its init
            except ProcessLookupError:
                pass

    sel = selectors.DefaultSelector()
    try:
        if join is not None:
            join(proc, deadline)
        if map_users is not None:
            _await_map_request(status_fd, deadline)
            map_users(proc.pid)
            os.write(fds["control"], b"m")
        if join is not None:
            os.write(fds["control"], b"c")  # the init may fork the program now
        for fd in buffers:
            sel.register(fd, selectors.EVENT_READ)
        pending = memoryview(stdin)
        if pending:
            os.set_blocking(in_fd, False)
            sel.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        grace = None
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline and grace is None:
                stop("wall")
                grace = now + 2.0
            if grace is not None and now >= grace:
                stop("wall", hard=True)
                break
            for key, _ in sel.select((grace or deadline) - now):
                fd = key.fd
                if fd == in_fd:
                    try:
                        pending = pending[os.write(fd, pending[:65536]) :]
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
                room = caps[fd] - len(buf)
                buf += chunk[: max(room, 0)]
                if len(chunk) > room and fd in (out_fd, err_fd, report_fd):
                    truncated = True
                    stop("output")
        try:
            proc.wait(timeout=max(deadline + 2.0 - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            stop("wall", hard=True)
            proc.wait()
    except OSError as e:  # the init never asked for its map (it could not start), or could not be mapped
        stop("setup", hard=True)
        proc.wait()
        raise SandboxError(f"sandbox did not start: {e}") from None
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if not stream.closed:
                stream.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    streams = tuple(bytes(buffers.get(fd, b"")) for fd in (out_fd, err_fd, status_fd, report_fd))
    return streams, truncated, killed


def _await_map_request(status_fd: int, deadline: float) -> None:
    """The init's first status line, ``map``: its user namespace exists and waits for its map."""
    data = _read_until(status_fd, b"\n", deadline, "the init's request for its user namespace's map", size=1)
    if data != b"map\n":
        raise OSError(f"unexpected first status line from the init: {data[:50]!r}")
