"""The sandbox's first process: builds the program's view, runs the program, cleans up, reports.

Not imported: ``sandbox/runner.py`` starts it as ``python -I -S sandbox/init.py SPOOL`` (stdlib only,
so it starts in ~20 ms), usually as PID 1 of fresh PID, mount and network namespaces made by
``unshare`` (and a user namespace in ``userns`` mode). SPOOL is a directory only the caller may
enter, holding ``spec.json`` (argv, environment, limits, mode, the view) and ``work/`` (the
program's files); the status (exit, signal, CPU seconds, stray processes) goes back to
``SPOOL/status.json`` through a descriptor opened before the view replaces the root.

Steps: read the program's files; build the view (view.py: a minimal read-only root of its own,
private size-capped ``/tmp``, own ``/proc``) and pivot into it; fork the program with its rlimits,
then take every privilege (confine.py: empty capability sets, bounding set included, an unprivileged
uid as root, ``no_new_privs``, a seccomp filter); wait for it under a wall-clock alarm; then kill
every process left (as PID 1, ``kill(-1)``; without a PID namespace, every descendant, found because
this process is their child subreaper).
"""

import ctypes
import json
import os
import resource
import signal
import sys

# With -I the script's own directory is not on sys.path: its two stdlib-only siblings are added by hand.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import confine  # noqa: E402
import view  # noqa: E402

PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 36, 4
RLIMITS = {  # spec["limits"] key -> (resource, scale to the rlimit's unit)
    "cpu_seconds": (resource.RLIMIT_CPU, 1),
    "memory_mb": (resource.RLIMIT_AS, 1 << 20),
    "file_size_mb": (resource.RLIMIT_FSIZE, 1 << 20),
    "open_files": (resource.RLIMIT_NOFILE, 1),
    "processes": (resource.RLIMIT_NPROC, 1),
}

libc = ctypes.CDLL(None, use_errno=True)


def read_tree(root: str) -> list[tuple[str, bytes | None]]:
    """(relative path, bytes) of every file, (relative dir, None) of every directory, parents first.
    Symlinks are not followed (the spool holds none; if one appeared, it would not be read through)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out.append((rel, None))
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                out.append((os.path.normpath(os.path.join(rel, name)), f.read()))
    return out


def own_processes() -> int:
    """How many processes this uid runs (RLIMIT_NPROC counts them all, not only the run's)."""
    count = 0
    for name in os.listdir("/proc"):
        try:
            count += name.isdigit() and os.stat(f"/proc/{name}").st_uid == os.getuid()
        except OSError:
            pass
    return count


def exec_program(spec: dict, workdir: str) -> None:
    """In the forked child: limits, uid drop, exec. Never returns."""
    try:
        os.chdir(workdir)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for key, (res, scale) in RLIMITS.items():
            soft = int(spec["limits"][key] * scale)
            if key == "processes" and spec["mode"] == "none" and spec["uid"] is None:
                soft += own_processes()  # the count is the caller's uid's, all its processes
            # CPU: SIGXCPU at the soft limit, SIGKILL a second later if it is caught.
            resource.setrlimit(res, (soft, soft + 1 if key == "cpu_seconds" else soft))
        # the bounding set first (root's right, in its namespace at least), the uid change after it
        confine.confine(spec["uid"], bounding=spec["mode"] != "none" or os.geteuid() == 0)
        os.execve(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as e:
        who = f" as uid {spec['uid']} (is it under a directory only root may enter?)" if spec["uid"] else ""
        os.write(2, f"sandbox: cannot start {spec['argv'][0]}{who}: {e}\n".encode())
    finally:
        os._exit(127)


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


def reap() -> None:
    """Collect the exit status of every dead child, without waiting."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def kill_all(spec: dict) -> int:
    """Kill every process of the run but this one; returns how many were left running."""
    me = os.getpid()
    if spec["pidns"]:  # PID 1 of the namespace: kill(-1) reaches exactly the run's processes
        left = sum(1 for pid, _ in processes() if pid != me)
        if left:
            os.kill(-1, signal.SIGKILL)
        return left
    # No PID namespace: kill the children of this process until none is left; the orphans of a
    # killed one (a detached, double-forked daemon included) are re-parented here, because this
    # process is their child subreaper, and so are found on the next round.
    killed: set[int] = set()
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
        reap()
    while True:  # wait for the killed ones (SIGKILL is not instant), so no zombie is left to init
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    return len(killed)


def run_program(spec: dict, workdir: str, status: dict) -> dict:
    """Fork and wait for the program under the wall clock; then kill whatever it left running."""
    if not spec["pidns"]:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = None

    def stop(signum, frame):  # wall clock (SIGALRM) or the caller's request (SIGUSR1)
        status["timed_out" if signum == signal.SIGALRM else "stopped"] = True
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGALRM, stop)  # before the fork: a request can never find no handler
    signal.signal(signal.SIGUSR1, stop)
    child = os.fork()
    if child == 0:
        exec_program(spec, workdir)
    if status["stopped"]:  # asked to stop before the child existed
        os.kill(child, signal.SIGKILL)
    signal.setitimer(signal.ITIMER_REAL, spec["wall_seconds"])
    while True:  # as PID 1 (or subreaper), orphans are reaped here too
        pid, wstatus, usage = os.wait4(-1, 0)
        if pid == child:
            break
    signal.setitimer(signal.ITIMER_REAL, 0)
    out = {"cpu_seconds": usage.ru_utime + usage.ru_stime, "max_rss_mb": usage.ru_maxrss / 1024}
    if os.WIFSIGNALED(wstatus):
        out["signal"] = os.WTERMSIG(wstatus)
    else:
        out["exit"] = os.WEXITSTATUS(wstatus)
    out["strays"] = kill_all(spec)
    return out


def main(args: list[str]) -> None:
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of the same uid may ptrace or read /proc/1/fd
    if args[0] == "--fds":  # under bwrap: the view is built; spec and files in, status out, by descriptor
        return main_in_view(int(args[1]), int(args[2]))
    spool = args[0]
    with open(os.path.join(spool, "spec.json")) as f:
        spec = json.load(f)
    spool_fd = os.open(spool, os.O_RDONLY | os.O_DIRECTORY)  # O_CLOEXEC: never the program's
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    status: dict = {"timed_out": False, "stopped": False}
    try:
        if spec["mountns"]:
            files = read_tree(os.path.join(spool, "work"))
            newroot = os.path.join(spool, "root")
            os.mkdir(newroot, 0o700)
            workdir = view.build(spec, newroot, files)
        else:
            workdir = spec["workdir"]
    except OSError as e:
        status["setup_error"] = str(e)
        workdir = None
    if workdir is not None:
        status.update(run_program(spec, workdir, status))
    fd = os.open("status.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=spool_fd)
    os.write(fd, json.dumps(status).encode())
    os.close(fd)


def main_in_view(bundle_fd: int, status_fd: int) -> None:
    import base64

    for fd in (bundle_fd, status_fd):
        os.set_inheritable(fd, False)  # closed at the program's exec
    with os.fdopen(bundle_fd, "rb") as f:
        bundle = json.load(f)
    spec = bundle["spec"]
    files = [(rel, None if data is None else base64.b64decode(data)) for rel, data in bundle["files"]]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    status: dict = {"timed_out": False, "stopped": False}
    try:
        view.write_files(spec["workdir"], files, spec["uid"])
        status.update(run_program(spec, spec["workdir"], status))
    except OSError as e:
        status["setup_error"] = str(e)
    os.write(status_fd, json.dumps(status).encode())
    os.close(status_fd)


if __name__ == "__main__":
    main(sys.argv[1:])
