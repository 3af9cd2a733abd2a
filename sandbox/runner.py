"""One run of an untrusted program: the spool, the init under ``unshare``, its output read up to a
cap, the status. :mod:`reasonkit.sandbox` (this folder's ``__init__``) says what a run enforces."""

from __future__ import annotations

import base64
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

INIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init.py")
MODES = ("root", "userns", "bwrap", "none")
# Namespaces per mode. "root": unshare as root, the program under a uid of its own; "userns": an
# unprivileged user namespace (the caller's uid, mapped to root inside, every capability dropped);
# "bwrap": bubblewrap makes the namespaces and the same view (bwrap.py), where plain unprivileged user
# namespaces are blocked but bubblewrap may make them; "none": no namespace at all (--sandbox none only).
UNSHARE = {
    "root": ["--mount", "--net", "--pid", "--fork", "--kill-child"],
    "userns": ["--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child"],
}
# The one setting a user gives (--sandbox, or a recipe's `sandbox:` key): every process of a run
# (threads, Ray workers, accelerate's ranks) reads it at call time from this variable.
ENV_MODE = "REASONKIT_SANDBOX"
# The working directory inside the view (on the private /tmp tmpfs).
PRIVATE_WORKDIR = "/tmp/sandbox"
# What the program may read besides the interpreter: the system's shared libraries, at their real
# paths, and the symlinks that lead to them (/lib -> usr/lib on a merged-/usr system).
SYSTEM_PATHS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache")
# Each run's uid is its own, so one run's processes never count against another's RLIMIT_NPROC.
_UID_BASE = 200_000
_uids = itertools.count()
HOW_TO_FIX = ("enable unprivileged user namespaces (sysctl user.max_user_namespaces=15000; on Ubuntu 24.04 "
              "kernel.apparmor_restrict_unprivileged_userns=0) or install bubblewrap (apt-get install bubblewrap), "
              "or pass --sandbox none to run model programs with all of your rights (not isolated)")


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
    """The strongest isolation this machine allows, probed once: "root" (as root) or "userns" through
    ``unshare``, else "bwrap" where bubblewrap can make the namespaces, else "none".

    Our own init (``unshare`` + pivot_root) comes first: no dependency, and it starts as fast as
    bubblewrap here (bench/code.py --start-runs); bubblewrap is the way in where a distribution
    allows namespaces to it alone."""
    from reasonkit.sandbox.bwrap import bwrap_path

    unshare = shutil.which("unshare")
    candidates = (["root"] if os.geteuid() == 0 else []) + ["userns"]
    for mode in candidates if unshare else []:
        probe = subprocess.run(
            [unshare, *UNSHARE[mode], "true"], capture_output=True, timeout=10, check=False
        )
        if probe.returncode == 0:
            return mode
    if bwrap_path() and bwrap_works():
        return "bwrap"
    return "none"


@functools.cache
def bwrap_works() -> bool:
    from reasonkit.sandbox.bwrap import bwrap_path, command

    if not bwrap_path():
        return False
    python = os.path.join(_real_dir(sys.executable), os.path.basename(sys.executable))
    probe = subprocess.run(command(view_of(python), 1, [python, "-I", "-S", "-c", "pass"]),
                           capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


def isolation_of(mode: str) -> tuple[str, ...]:
    """What a run in ``mode`` enforces, as the rows' ``isolation`` column lists it. ``minroot``: the
    program's own minimal read-only root; ``nocaps``: empty capability sets (bounding set included);
    ``seccomp``: the mount/namespace/ptrace calls refused; ``no-namespaces``: run with ``--sandbox none``."""
    common = ("nocaps", "seccomp")
    names = {"root": ("netns", "pidns", "mountns", "minroot", "uid-drop"),
             "userns": ("netns", "pidns", "mountns", "minroot", "userns"),
             "bwrap": ("netns", "pidns", "mountns", "minroot", "bwrap", "uid-drop" if os.geteuid() == 0 else "userns")}
    if mode in names:
        return names[mode] + common
    return ("no-namespaces",) + (("uid-drop",) if os.geteuid() == 0 else ()) + common


def requested_mode() -> str:
    """What the user asked for (``--sandbox``, via REASONKIT_SANDBOX): "auto" unless set."""
    value = os.environ.get(ENV_MODE, "auto") or "auto"
    if value not in ("auto", *MODES):
        raise SandboxError(f"{ENV_MODE}={value!r}: expected auto, {', '.join(MODES)}")
    return value


def resolve_mode(mode: str | None = None) -> str:
    """The mode a run uses: ``mode`` if given, else the user's choice, else the strongest available.
    Never "none" unless asked for by name: a machine without namespaces is an error, not a silent
    downgrade to running the program with all of the caller's rights."""
    mode = mode or requested_mode()
    if mode == "auto":
        mode = available_mode()
        if mode == "none":
            raise SandboxError(f"no isolation is possible here (no user, mount, PID or network namespaces): {HOW_TO_FIX}")
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r}: expected auto, {', '.join(MODES)}")
    return mode


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
        print("warning: --sandbox none: model programs run WITHOUT isolation, with all of your rights "
              "(files, network, tokens); recorded as isolation 'no-namespaces'", file=sys.stderr)
    return mode


def clean_env(home: str) -> dict[str, str]:
    """The program's whole environment: nothing of the caller's. One thread per math library and two
    malloc arenas, so threads do not eat the address-space limit."""
    path = os.pathsep.join(dict.fromkeys([_real_dir(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
    env = {"PATH": path, "LANG": "C.UTF-8", "HOME": home, "MALLOC_ARENA_MAX": "2",
           "PYTHONPATH": os.pathsep.join(_site_packages())}
    env.update(dict.fromkeys(["OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"], "1"))
    return env


def _real_dir(path: str) -> str:
    """``path``'s directory with every symlink resolved (the file itself may stay a symlink: a venv's python)."""
    return os.path.realpath(os.path.dirname(path))


@functools.cache
def _site_packages() -> tuple[str, ...]:
    """This environment's site-packages (real paths: the view binds real paths only), for a program
    run with ``-S``: the packages stay importable without ``site``'s startup (its .pth hooks, e.g. an
    editable install's finder, cost ~20 ms a run)."""
    import site

    return tuple(dict.fromkeys(os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)))


def _outermost(paths) -> list[str]:
    paths = set(paths)
    return sorted(p for p in paths if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in paths))


def view_of(argv0: str) -> dict:
    """The program's filesystem (sandbox/view.py builds it): read-only binds of the interpreter's
    prefix and base prefix, its real directory, site-packages, the system library directories and
    the command's own directory; the symlinks on the way to them. Real paths only, so a symlinked
    venv or clone needs nothing of the host beyond its target."""
    binds = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), os.path.dirname(os.path.realpath(sys.executable)),
             *_site_packages(), os.path.dirname(os.path.realpath(argv0))}
    symlinks = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            symlinks.append((path, os.readlink(path)))
            path = os.path.realpath(path)
        if os.path.exists(path):
            binds.add(path)
    binds = _outermost(binds)
    if "/" in binds:
        raise SandboxError(f"the interpreter's directories include / ({sys.prefix}): the view would hold the whole host")
    return {"binds": binds, "symlinks": [s for s in symlinks if not any(s[0].startswith(b + "/") for b in binds)]}


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
        mode: "root", "userns" or "none" to force an isolation level (tests); default: the user's
            ``--sandbox`` (REASONKIT_SANDBOX), else the strongest available (``resolve_mode``: never
            "none" unless named). "userns" is the non-root caller's mode (forced as root too, for tests).
    """
    mode = resolve_mode(mode)
    files = dict(files or {})
    if program is not None:
        files["main.py"] = program
    argv = list(argv or (["python", "main.py"] if program is not None else []))
    if not argv:
        raise ValueError("run() needs a program or an argv")
    if argv[0] == "python":  # the directory's real path (the view has no symlinked ancestors), the venv's name
        argv[:1] = [os.path.join(_real_dir(sys.executable), os.path.basename(sys.executable)), "-B", "-S"]  # no bytecode files, no site (see _site_packages)
    elif not os.path.isabs(argv[0]) and "/" not in argv[0]:
        argv[0] = shutil.which(argv[0]) or argv[0]
    namespaces = mode != "none"
    spool = tempfile.mkdtemp(prefix="reasonkit-sandbox-")  # 0700: only the init (as root) reads it
    fds: tuple[int, ...] = ()
    try:
        spec = _write_spool(spool, files, argv, timeout, limits, mode)
        command = [sys.executable, "-I", "-S", INIT, spool]
        if mode in UNSHARE:
            command = [shutil.which("unshare") or "unshare", *UNSHARE[mode], *command]
        elif mode == "bwrap":  # the spec and files in through one descriptor, the status out through another
            from reasonkit.sandbox.bwrap import command as bwrap_command

            fds = (os.open(os.path.join(spool, "bundle.json"), os.O_RDONLY),
                   os.open(os.path.join(spool, "status.json"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
            init = [os.path.join(_real_dir(sys.executable), os.path.basename(sys.executable)), "-I", "-S",
                    INIT, "--fds", *map(str, fds)]
            command = bwrap_command(spec["view"], limits.tmpfs_mb, init)
        stdin_bytes = stdin.encode() if isinstance(stdin, str) else stdin
        started = time.monotonic()
        out, err, truncated, killed = _communicate(command, stdin_bytes, timeout, limits.output_bytes, not namespaces, fds)
        elapsed = time.monotonic() - started
        try:
            with open(os.path.join(spool, "status.json")) as f:
                status = json.load(f)
        except (OSError, ValueError):  # killed before it could write one
            status = {"signal": signal.SIGKILL} if killed else {}
    finally:
        for fd in fds:
            os.close(fd)
        shutil.rmtree(spool, ignore_errors=True)
    if "setup_error" in status or not status:
        raise SandboxError(f"sandbox did not start: {status.get('setup_error') or err.decode(errors='replace')[-500:]}")
    if status.get("exit") == 127 and err.startswith(b"sandbox: cannot start"):
        # e.g. the interpreter under /root, out of the dropped uid's reach, with --sandbox none
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


def _write_spool(spool: str, files: dict, argv: list[str], timeout: float, limits: Limits, mode: str) -> dict:
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
    namespaces = mode != "none"
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
        "mountns": mode in UNSHARE,  # the init builds the view; under bwrap, bubblewrap has built it
        "view": view_of(argv[0]) if namespaces else None,
    }
    if mode == "bwrap":  # the init reads its own code from the view, and spec + files from a descriptor
        spec["view"]["binds"] = _outermost([*spec["view"]["binds"], os.path.dirname(INIT)])
        bundle = {"spec": spec, "files": [[rel, None if data is None else base64.b64encode(data).decode()]
                                          for rel, data in _tree(work)]}
        with open(os.path.join(spool, "bundle.json"), "w") as f:
            json.dump(bundle, f)
    with open(os.path.join(spool, "spec.json"), "w") as f:
        json.dump(spec, f)
    return spec


def _tree(root: str) -> list[tuple[str, bytes | None]]:
    """(relative path, bytes) of every file, (relative dir, None) of every directory, parents first."""
    out = []
    for dirpath, _, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out.append((rel, None))
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                out.append((os.path.normpath(os.path.join(rel, name)), f.read()))
    return out


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
    command: list[str], stdin: bytes, timeout: float, cap: int, gentle: bool, pass_fds: tuple[int, ...] = ()
) -> tuple[bytes, bytes, bool, str | None]:
    """Run ``command``; feed stdin, read stdout/stderr up to ``cap`` bytes each. Past the cap, or
    past the timeout (a backstop: the init enforces it first), the run is stopped: ``gentle`` asks
    the init to do it (SIGUSR1; without a PID namespace only it can find escaped processes). Returns
    (stdout, stderr, truncated, why killed: "output", "wall" or None)."""
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, pass_fds=pass_fds,
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
