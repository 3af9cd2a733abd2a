"""The program's whole filesystem: a fresh root of its own (stdlib only: imported by the init).

Built in the init's fresh mount namespace, then made the root with ``pivot_root`` and the old root
detached, so nothing of the host stays reachable (not through ``..``, not through a symlink or
hardlink the program makes, not by unmounting something: the program holds no capability to):

- a small tmpfs as ``/``, read-only once built;
- read-only binds of what the interpreter needs, at their real paths (the caller's list:
  the interpreter's prefix and base prefix, site-packages, the system library directories,
  ``/etc/ld.so.cache``), and the symlinks among them (``/lib -> usr/lib``);
- ``/dev`` with null, zero, random and urandom only; a fresh ``/proc`` of the program's own PID
  namespace (mounted by its PID 1: the init, outside, is not in it), ``/proc/cmdline`` masked (the kernel's command
  line is the host's); ``/tmp`` a private size-capped tmpfs and ``/dev/shm`` a link to it (one cap for both),
  ``/tmp/sandbox`` the working directory;
- the files of the interpreter's tree that name host paths the program does not need (an editable
  install's ``direct_url.json`` and finder: the project's checkout) masked with an empty file.

No home directory, no ``/root``, no project, run or dataset directory is there unless it holds the
interpreter, and then only that directory.
"""

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    8,
    32,
    4096,
    16384,
    1 << 18,
)
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
# statvfs's f_flag bits -> the mount flags that must be repeated on a bind's read-only remount (a
# user namespace may not clear a flag its parent's mount set: the kernel locks them).
_LOCKED = {
    1: MS_RDONLY,
    2: MS_NOSUID,
    4: MS_NODEV,
    8: MS_NOEXEC,
    1024: MS_NOATIME,
    2048: MS_NODIRATIME,
    4096: MS_RELATIME,
}
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
DEVICES = ("null", "zero", "random", "urandom")

libc = ctypes.CDLL(None, use_errno=True)


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _ok(libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {source or ''} on {target}")


def bind(source: str, target: str, *, writable: bool = False, exec_ok: bool = True) -> None:
    """Bind ``source`` at ``target`` (not recursively: a mount below ``source`` is not brought along,
    so only what was chosen is visible), then remount it read-only unless ``writable``."""
    mount(source, target, None, MS_BIND)
    locked = 0
    for bit, flag in _LOCKED.items():
        if os.statvfs(source).f_flag & bit:
            locked |= flag
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | locked | (0 if writable else MS_RDONLY) | (0 if exec_ok else MS_NOEXEC)
    mount(None, target, None, flags)


def _make_point(root: str, path: str, is_dir: bool) -> str:
    """An empty directory or file at ``root + path``, parents 0755 (so a 0700 home above the
    interpreter on the host is no obstacle here: only the bound directory itself keeps its mode)."""
    target = root + path
    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.exists(target):
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    return target


def mask(target: str) -> None:
    """An empty, read-only file over ``target`` (a file of a bound tree, or of /proc)."""
    bind("/dev/null", target, exec_ok=False)


def mount_proc(target: str) -> None:
    """This PID namespace's /proc at ``target``, the kernel's command line masked."""
    mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mask(target + "/cmdline")


def build(spec: dict, newroot: str, files: list) -> str:
    """Build the view in ``newroot`` (an empty directory), pivot into it; returns the working directory.
    Run by the program's process, PID 1 of its namespace, before it execs."""
    view = spec["view"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here propagates back to the host
    mount("tmpfs", newroot, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    tmp_size = f"size={spec['limits']['tmpfs_mb']}m,mode=1777"
    # /tmp first: an interpreter under /tmp (a clone or venv there) is bound onto the private /tmp.
    mount("tmpfs", _make_point(newroot, "/tmp", True), "tmpfs", MS_NOSUID | MS_NODEV, tmp_size)
    for path in view["binds"]:
        bind(path, _make_point(newroot, path, os.path.isdir(path)))
    for path, target in view["symlinks"]:
        os.makedirs(os.path.dirname(newroot + path), mode=0o755, exist_ok=True)
        os.symlink(target, newroot + path)
    for path in view["masks"]:
        mask(newroot + path)
    for name in DEVICES:
        bind(f"/dev/{name}", _make_point(newroot, f"/dev/{name}", False), writable=True, exec_ok=False)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{newroot}/dev/{name}")
    os.symlink("/tmp", f"{newroot}/dev/shm")  # one tmpfs, one cap for both (POSIX shm and semaphores live there)
    mount_proc(_make_point(newroot, "/proc", True))
    workdir = spec["workdir"]
    write_files(newroot + workdir, files, spec["uid"])
    mount(None, newroot, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    pivot(newroot)
    return workdir


def enter_bwrap_view(spec: dict, files: list) -> str:
    """Under bubblewrap (which built the view): this PID namespace's /proc over bubblewrap's, the init's
    own code unbound (only the init needed it), the files written; returns the working directory."""
    mount_proc("/proc")
    for path in spec["view"]["masks"]:
        mask(path)
    if spec["view"].get("init_bind"):
        _ok(libc.umount2(spec["view"]["init_bind"].encode(), MNT_DETACH), "unbind the init's directory")
    write_files(spec["workdir"], files, spec["uid"])
    return spec["workdir"]


def write_files(workdir: str, files: list, uid: int | None) -> None:
    """The program's files (relative path, bytes; bytes None: a directory) in a new ``workdir``, owned by ``uid``."""
    os.mkdir(workdir, 0o700)
    for rel, data in files:
        path = os.path.join(workdir, rel)
        os.makedirs(path if data is None else os.path.dirname(path), 0o700, exist_ok=True)
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
    if uid is not None:
        for dirpath, _, filenames in os.walk(workdir):
            for name in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
                os.chown(name, uid, uid)


def pivot(newroot: str) -> None:
    """Make ``newroot`` the root and detach the old one (runc's ``pivot_root(".", ".")``: the old root
    is stacked under the new one, then unmounted lazily, so no directory is needed to hold it)."""
    os.chdir(newroot)
    number = PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"pivot_root: no syscall number known for {os.uname().machine}")
    _ok(libc.syscall(number, b".", b"."), "pivot_root")
    _ok(libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir("/")
