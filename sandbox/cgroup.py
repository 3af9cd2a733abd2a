"""A cgroup of its own for each run, where the machine gives one: the run's memory (every process of it,
its ``/tmp`` and ``/dev/shm`` pages and its memfds together: the kernel charges shared memory to the
cgroup that wrote it), its process count and its CPU time capped as a whole, not per process (an
rlimit is per process: three processes held 3 x 200 MB under a 256 MB limit, and CPU seconds added up
past the CPU limit).

The caller (runner.py) makes the cgroup under its own, writes the limits, and moves the init into it while the init's
interpreter starts (the init forks the program only after that, so every process of the program is born inside). The
caller moves it, not the program's process: moving a task takes a lock whose first taker after a pause waits out an RCU
grace period, ~13 ms here, which the init's own start hides. Once it has forked the program the init moves itself back
to the caller's cgroup (off the program's start path): the program's memory cap can never end it in an OOM kill, nor
its processes count against the program's (``pids.max`` allows one more, the init's fork). What the init reads goes to
it as descriptors (under bubblewrap its view holds no ``/sys``): the CPU time used (it stops the run at the limit) and
the counts of OOM kills and refused forks (a ``memory`` or ``processes`` limit the sandbox saw, not one the program
claims).

cgroup v2 where the caller's cgroup can give a child the ``memory`` and ``pids`` controllers, else v1's
``memory``, ``pids`` and ``cpuacct`` hierarchies (this CI machine's), else none: a non-root user
without a delegated cgroup. Then ``Result.isolation`` says ``no-cgroup`` (and not ``cgroup``), and the
run falls back to what the kernel lets a process bound alone: ``/dev/shm`` is ``/tmp``'s tmpfs (one
cap for both), ``memfd_create`` is refused (nothing else would count a memfd's pages), and the CPU and
memory limits stay per process.
"""

from __future__ import annotations

import _thread
import errno
import itertools
import os
import time

V1 = ("memory", "pids", "cpuacct")
_names = itertools.count()


def _mounts() -> dict[str, str]:
    """{"v2": mount point, "memory": v1 mount point, ...} from this process's mountinfo."""
    found: dict[str, str] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, (fstype, _, options) = left.split(), right.split()[:3]
            if fields[3] != "/":  # a cgroup mounted from below its root: its paths are not ours to join
                continue
            if fstype == "cgroup2":
                found.setdefault("v2", fields[4])
            elif fstype == "cgroup":
                for name in options.split(","):
                    if name in V1:
                        found.setdefault(name, fields[4])
    return found


def _own() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and "v2"'s."""
    own = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else ["v2"]:
                own[name] = path
    return own


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


_probed: dict = {}  # not functools.cache: the init imports this module, and functools costs its start ~2 ms
_probing = (
    _thread.allocate_lock()
)  # threads' first runs probe once, not side by side (one's probe is another's EEXIST)


def _parents() -> tuple[str, dict[str, str]] | None:
    """("v2", {"v2": dir}) or ("v1", {controller: dir}): where this process may make a run's cgroup, probed
    once by making (and removing) one; None where it may not."""
    with _probing:
        if "found" not in _probed:
            _probed["found"] = _probe()
    return _probed["found"]


def _probe() -> tuple[str, dict[str, str]] | None:
    try:
        mounts, own = _mounts(), _own()
    except OSError:
        return None
    candidates = []
    if "v2" in mounts and "v2" in own:
        candidates.append(("v2", {"v2": os.path.join(mounts["v2"], own["v2"].lstrip("/"))}))
    if all(c in mounts and c in own for c in V1):
        candidates.append(("v1", {c: os.path.join(mounts[c], own[c].lstrip("/")) for c in V1}))
    for version, parents in candidates:
        try:
            made = _make(version, parents, f"reasonkit-probe-{os.getpid()}")
        except OSError:
            continue
        _remove(made)
        return version, parents
    return None


def _make(version: str, parents: dict[str, str], name: str) -> dict[str, str]:
    """The run's directory in each hierarchy; OSError (nothing left behind) where one cannot be made."""
    made: dict[str, str] = {}
    try:
        for key, parent in parents.items():
            path = os.path.join(parent, name)
            os.mkdir(path)
            made[key] = path
        if version == "v2" and not {"memory", "pids"} <= set(
            _read(os.path.join(made["v2"], "cgroup.controllers")).split()
        ):
            raise OSError(errno.ENOTSUP, "the memory and pids controllers are not delegated here")
    except OSError:
        _remove(made)
        raise
    return made


def _remove(made: dict[str, str]) -> None:
    """Remove the run's directories once its processes are gone (they end with the program's PID 1, an
    instant after the init reports: a busy directory is retried for up to a second)."""
    for path in made.values():
        for _ in range(200):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    break
                time.sleep(0.005)


def available() -> bool:
    return _parents() is not None


class RunCgroup:
    """One run's cgroup: ``make`` it, pass ``fds()`` to the init, ``close()`` after the run."""

    def __init__(self, version: str, dirs: dict[str, str], parents: dict[str, str], memory_mb: int, processes: int):
        self.version, self.dirs, self.opened = version, dirs, {}
        if version == "v2":
            _write(os.path.join(dirs["v2"], "memory.max"), str(memory_mb << 20))
            if os.path.exists(os.path.join(dirs["v2"], "memory.swap.max")):
                _write(os.path.join(dirs["v2"], "memory.swap.max"), "0")
            _write(os.path.join(dirs["v2"], "pids.max"), str(processes + 1))  # + the init
            files = {
                "procs": [("v2", "cgroup.procs")],
                "cpu": ("v2", "cpu.stat"),
                "oom": ("v2", "memory.events"),
                "pids": ("v2", "pids.events"),
            }
        else:
            _write(os.path.join(dirs["memory"], "memory.limit_in_bytes"), str(memory_mb << 20))
            swap = os.path.join(dirs["memory"], "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):  # the same cap with swap counted: tmpfs pages cannot move past it
                _write(swap, str(memory_mb << 20))
            _write(os.path.join(dirs["pids"], "pids.max"), str(processes + 1))  # + the init
            files = {
                "procs": [(c, "cgroup.procs") for c in V1],
                "cpu": ("cpuacct", "cpuacct.usage"),
                "oom": ("memory", "memory.oom_control"),
                "pids": ("pids", "pids.events"),
            }
        self.opened["procs"] = [
            os.open(os.path.join(dirs[k], n), os.O_WRONLY | os.O_CLOEXEC) for k, n in files["procs"]
        ]
        self.opened["leave"] = [
            os.open(os.path.join(parents[k], n), os.O_WRONLY | os.O_CLOEXEC) for k, n in files["procs"]
        ]
        for what in ("cpu", "oom", "pids"):
            key, name = files[what]
            path = os.path.join(dirs[key], name)
            if os.path.exists(path):
                self.opened[what] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    @classmethod
    def make(cls, memory_mb: int, processes: int) -> RunCgroup | None:
        """The run's cgroup with its limits, or None where this machine gives none."""
        found = _parents()
        if found is None:
            return None
        version, parents = found
        try:
            dirs = _make(version, parents, f"reasonkit-{os.getpid()}-{next(_names)}")
        except OSError:
            return None
        try:
            return cls(version, dirs, parents, memory_mb, processes)
        except OSError:
            _remove(dirs)
            return None

    def join(self, pid: int) -> None:
        """Move process ``pid`` (the init, before it forks the program) into the run's cgroup."""
        for fd in self.opened["procs"]:
            os.write(fd, str(pid).encode())

    def fds(self) -> list[int]:
        """The descriptors passed to the init: the files it reads, and where it leaves to."""
        return [self.opened[k] for k in ("cpu", "oom", "pids") if self.opened.get(k) is not None] + self.opened[
            "leave"
        ]

    def spec(self) -> dict:
        """What the init needs to know: the version and which passed descriptor is which."""
        return {
            "version": self.version,
            "leave": self.opened["leave"],
            **{k: self.opened.get(k) for k in ("cpu", "oom", "pids")},
        }

    def close(self) -> None:
        for fd in self.opened.pop("procs", []) + self.fds():
            os.close(fd)
        self.opened = {}
        _remove(self.dirs)


# Read by the init (stdlib only, imported there by path): the run's counters through its descriptors.
def cpu_seconds(version: str, fd: int) -> float:
    text = os.pread(fd, 4096, 0).decode()
    if version == "v1":
        return int(text) / 1e9
    fields = dict(line.split() for line in text.splitlines() if line.strip())
    return int(fields.get("usage_usec", 0)) / 1e6


def count(fd: int | None, key: str) -> int:
    """A counter of a ``key value`` file (``oom_kill`` of memory.oom_control/memory.events, ``max`` of pids.events)."""
    if fd is None:
        return 0
    for line in os.pread(fd, 4096, 0).decode().splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0
