"""The sandbox's init: makes the program's PID namespace, starts the program in it, times it, reports.

Not imported: ``sandbox/runner.py`` starts it as ``python -I -S sandbox/init.py BUNDLE STATUS CONTROL
[REPORT]`` (stdlib only, so it starts in ~20 ms), under ``unshare`` (fresh mount, network, IPC and UTS
namespaces, and a user namespace in ``userns`` mode) or bubblewrap. The arguments are descriptors,
never paths: BUNDLE holds the spec (argv, environment, limits, mode, the view) and the program's
files; the status (exit, signal, CPU seconds, whether the wall clock ended it, or why the sandbox
could not start) goes back on STATUS (marshal, like BUNDLE); CONTROL is the caller's: its end closed
asks for a stop, one byte ``m`` says the user namespace is mapped (``userns`` as root), one byte ``c``
that this process was moved into the run's cgroup (cgroup.py); REPORT, when given, becomes the
program's descriptor 3 (the code verifier's harness reports its tests there).

The init stays **outside** the program's PID namespace: it makes that namespace (``unshare(CLONE_NEWPID)``) and forks
the program as its PID 1, so nothing the program runs can name it, signal it, limit it or read it, whatever uid they
share. Born in the run's cgroup, the program's child waits, while it builds its view, for the init to leave that cgroup
(no OOM kill at the program's cap can end the init). The program's child, before it execs: builds the view (view.py: a
minimal read-only root of its own, its own ``/proc``, private size-capped ``/tmp``) and pivots into it, sets its
rlimits, takes every privilege (confine.py) and execs; a failure there goes back on a pipe closed by the exec, the only
way the sandbox says it failed. The wall clock is a ``pidfd`` and a timed ``select`` here, no signal handler; when the
program (PID 1) ends, the kernel ends every process it left. Without namespaces (``--sandbox none``) the init is their
child subreaper and kills them itself.
"""

import _signal as signal  # the full module imports enum (~3 ms of the init's start)
import ctypes
import fcntl
import marshal
import os
import resource
import select
import sys

# With -I the script's own directory is not on sys.path: its stdlib-only siblings are added by hand.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cgroup  # noqa: E402
import confine  # noqa: E402

import view  # noqa: E402

PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 36, 4
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
REPORT_FD = 3  # the program's report descriptor, when the caller asked for one
IGNORED = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD) and s < 32]
HOSTNAME = b"sandbox"
RLIMITS = {  # spec["limits"] key -> (resource, scale to the rlimit's unit)
    "cpu_seconds": (resource.RLIMIT_CPU, 1),
    "memory_mb": (resource.RLIMIT_AS, 1 << 20),
    "file_size_mb": (resource.RLIMIT_FSIZE, 1 << 20),
    "open_files": (resource.RLIMIT_NOFILE, 1),
    "processes": (resource.RLIMIT_NPROC, 1),
}

libc = ctypes.CDLL(None, use_errno=True)


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def high(fd: int) -> int:
    """``fd`` moved to 10 or above, close-on-exec: the program's 0-3 stay free for it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def own_processes() -> int:
    """How many processes this uid runs (RLIMIT_NPROC counts them all, not only the run's)."""
    count = 0
    for name in os.listdir("/proc"):
        try:
            count += name.isdigit() and os.stat(f"/proc/{name}").st_uid == os.getuid()
        except OSError:
            pass
    return count


def enter_namespaces(spec: dict, status_fd: int, control_fd: int) -> None:
    """The namespaces ``unshare``/bubblewrap did not make: in ``userns`` started by root, the user namespace
    (and the rest) here, mapped by the caller to root (this init) and one unprivileged host uid (the
    program's: it never runs as host uid 0); then the program's PID namespace, and its host name."""
    if spec["userns_by_caller"]:
        _ok(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        os.write(status_fd, b"map\n")
        if os.read(control_fd, 1) != b"m":
            raise OSError("the caller did not map the user namespace")
    if spec["pidns"]:
        _ok(libc.unshare(CLONE_NEWPID), "unshare")
        if spec["mode"] != "bwrap":  # bubblewrap names it itself (--hostname)
            _ok(libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")


def exec_program(spec: dict, workdir: str, report_fd: int | None, alive_fd: int, go_fd: int | None) -> None:
    """In the program's process, once its view is there: limits, privileges, exec (once the init has left
    the run's cgroup, ``go_fd``). Raises on failure."""
    os.chdir(workdir)
    os.setsid()  # a session and process group of its own: kill(0, ...) reaches no process outside its namespace
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for key, (res, scale) in RLIMITS.items():
        soft = int(spec["limits"][key] * scale)
        if key == "processes" and spec["mode"] == "none" and spec["uid"] is None:
            soft += own_processes()  # the count is the caller's uid's, all its processes
        # CPU: SIGXCPU at the soft limit, SIGKILL a second later if it is caught.
        resource.setrlimit(res, (soft, soft + 1 if key == "cpu_seconds" else soft))
    if go_fd is not None and os.read(go_fd, 1) != b"g":
        raise OSError("the init did not leave the run's cgroup")
    # the bounding set first (root's right, in its namespace at least), the uid change after it
    confine.confine(spec["uid"], bounding=spec["mode"] != "none" or os.geteuid() == 0, memfd=bool(spec["cgroup"]))
    if select.select([alive_fd], [], [], 0)[0]:  # the init died before the parent-death signal was set
        os._exit(127)
    if report_fd is not None:
        os.dup2(report_fd, REPORT_FD)  # inheritable: the program's, past the exec
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def own_cgroup_namespace(spec: dict) -> None:
    """A cgroup namespace rooted at the run's cgroup (the init was moved there before the fork): the
    program sees its cgroup as ``/``, never the host's path."""
    if spec["pidns"]:
        _ok(libc.unshare(CLONE_NEWCGROUP), "unshare the cgroup namespace")


def become_program(
    spec: dict, files: list, report_fd: int | None, setup_fd: int, alive_fd: int, go_fd: int | None
) -> None:
    """The forked child (PID 1 of the program's namespace): view, then exec_program. Never returns;
    a failure before the exec is written on ``setup_fd`` (closed by a successful exec)."""
    try:
        own_cgroup_namespace(spec)
        if spec["mountns"]:  # the view is built here, in the new PID namespace: its /proc is this one's
            workdir = view.build(spec, spec["newroot"], files)
        elif spec["mode"] == "bwrap":  # bubblewrap built it; this namespace's /proc and the files
            workdir = view.enter_bwrap_view(spec, files)
        else:
            workdir = spec["workdir"]
            view.write_files(workdir, files, spec["uid"])
        exec_program(spec, workdir, report_fd, alive_fd, go_fd)
    except BaseException as e:  # noqa: BLE001 - every failure here is the sandbox's, and said so
        who = f" as uid {spec['uid']} (is it under a directory only root may enter?)" if spec["uid"] else ""
        os.write(setup_fd, f"cannot start {spec['argv'][0]}{who}: {e}".encode()[:2000])
    finally:
        os._exit(127)


def start(spec: dict, files: list, report_fd: int | None) -> tuple[int, int, int]:
    """Fork the program; returns (its pid, the setup pipe's read end, the liveness pipe's write end)."""
    setup_r, setup_w = os.pipe2(os.O_CLOEXEC)
    alive_r, alive_w = os.pipe2(os.O_CLOEXEC)  # readable (EOF) in the child once this process is gone
    go_r, go_w = os.pipe2(os.O_CLOEXEC) if spec["cgroup"] else (None, None)
    if not spec["pidns"]:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        os.close(setup_r)
        os.close(alive_w)
        if go_w is not None:
            os.close(go_w)
        become_program(spec, files, report_fd, setup_w, alive_r, go_r)
    os.close(setup_w)
    os.close(alive_r)
    if go_w is not None:
        os.close(go_r)
        leave_cgroup(spec["cgroup"])
        group = spec["cgroup"]  # what the run's cgroup counted so far is the init's start, not the program's
        group["cpu_base"] = cgroup.cpu_seconds(group["version"], group["cpu"]) if group.get("cpu") is not None else 0.0
        os.write(go_w, b"g")
        os.close(go_w)
    return child, setup_r, alive_w


def leave_cgroup(group: dict) -> None:
    """Back to the caller's cgroup, now that the program's process was born in the run's (while it builds
    its view; it waits for this before it execs): no OOM kill at the program's cap can end the init."""
    for fd in group["leave"]:
        os.write(fd, b"0")


def read_setup(setup_fd: int) -> str:
    """What the child wrote before its exec: empty when the program is running."""
    data = b""
    while chunk := os.read(setup_fd, 4096):
        data += chunk
    os.close(setup_fd)
    return data.decode(errors="replace")


def supervise(spec: dict, child: int, control_fd: int) -> dict:
    """Wait for the program under the wall clock (a pidfd and a timed select: no signal handler for
    the program to reach) or the caller's stop; then its exit, CPU time, and any process left."""
    import time

    out = {"timed_out": False, "stopped": False}
    group = spec["cgroup"]
    pidfd = os.pidfd_open(child)
    deadline = time.monotonic() + spec["wall_seconds"]
    cpu_limit, cpus = spec["limits"]["cpu_seconds"], os.cpu_count() or 1
    while True:
        remaining = deadline - time.monotonic()
        wait = remaining
        if (
            group and group.get("cpu") is not None
        ):  # the run's CPU time, all its processes: checked when it could be over
            left = cpu_limit - (cgroup.cpu_seconds(group["version"], group["cpu"]) - group["cpu_base"])
            if left <= 0:
                out["cpu_exceeded"] = True
                os.kill(child, signal.SIGKILL)
                break
            wait = min(wait, max(left / cpus, 0.01))
        ready = select.select([pidfd, control_fd], [], [], max(wait, 0))[0] if remaining > 0 else []
        if pidfd in ready:
            break
        if control_fd in ready and os.read(control_fd, 64):
            continue  # a stray byte: only the end of the caller's pipe asks for a stop
        if not ready and time.monotonic() < deadline:
            continue  # the CPU check's turn
        out["timed_out" if not ready else "stopped"] = True
        os.kill(child, signal.SIGKILL)  # PID 1 of its namespace: the kernel ends the rest with it
        break
    os.close(pidfd)
    _, wstatus, usage = os.wait4(child, 0)
    out["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    if group:
        if group.get("cpu") is not None:
            used = cgroup.cpu_seconds(group["version"], group["cpu"]) - group["cpu_base"]
            out["cpu_seconds"] = max(out["cpu_seconds"], used)
        out["oom_kills"] = cgroup.count(group.get("oom"), "oom_kill")
        out["forks_refused"] = cgroup.count(group.get("pids"), "max")
    if os.WIFSIGNALED(wstatus):
        out["signal"] = os.WTERMSIG(wstatus)
    else:
        out["exit"] = os.WEXITSTATUS(wstatus)
    out["strays"] = 0 if spec["pidns"] else kill_descendants()
    return out


def processes() -> list[tuple[int, int]]:
    """(pid, parent pid) of every live process in /proc (zombies excluded: they are already dead)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            if fields[0] != "Z":
                out.append((int(name), int(fields[1])))
    return out


def kill_descendants() -> int:
    """Without a PID namespace: kill the children of this process until none is left; the orphans of a
    killed one (a detached, double-forked daemon included) are re-parented here, because this
    process is their child subreaper, and so are found on the next round. Returns how many."""
    me, killed = os.getpid(), set()
    for _ in range(1000):
        children = [pid for pid, ppid in processes() if ppid == me]
        if not children:
            break
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        while True:  # collect the dead without waiting
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
    while True:  # wait for the killed ones (SIGKILL is not instant), so no zombie is left to init
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    return len(killed)


def main(args: list[str]) -> None:
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of the same uid may ptrace it or read its descriptors
    bundle_fd, status_fd, control_fd, *report = (high(int(a)) for a in args)
    for sig in IGNORED:  # no signal ends the init (only SIGKILL, which nothing of the program can send it)
        signal.signal(sig, signal.SIG_IGN)
    with os.fdopen(bundle_fd, "rb") as f:
        bundle = marshal.load(f)
    spec = bundle["spec"]
    if spec["cgroup"]:  # its descriptors (the caller's numbers) moved out of the program's way, closed at its exec
        group = spec["cgroup"]
        group.update({k: high(group[k]) for k in ("cpu", "oom", "pids") if group.get(k) is not None})
        group["leave"] = [high(fd) for fd in group["leave"]]
    files = bundle["files"]
    status: dict = {}
    try:
        enter_namespaces(spec, status_fd, control_fd)
        if (
            spec["cgroup"] and os.read(control_fd, 1) != b"c"
        ):  # the caller has moved this process into the run's cgroup
            raise OSError("the caller did not move the init into the run's cgroup")
        child, setup_fd, alive_fd = start(spec, files, report[0] if report else None)
        for fd in report:
            os.close(fd)  # the program holds it now; its end of file is the program's end
        error = read_setup(setup_fd)
        if error:
            os.waitpid(child, 0)
            status["setup_error"] = error
        else:
            status.update(supervise(spec, child, control_fd))
    except OSError as e:
        status["setup_error"] = str(e)
    os.write(status_fd, marshal.dumps(status))


if __name__ == "__main__":
    main(sys.argv[1:])
