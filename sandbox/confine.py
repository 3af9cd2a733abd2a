"""Taking every privilege from the program's process, just before it execs (stdlib only: the init
imports this by path, with ``python -I -S``).

Three locks, in this order, so that none can be undone by the program:

1. the capability **bounding set** emptied (``PR_CAPBSET_DROP``), so no exec can ever grant a
   capability again, not even to uid 0 inside a user namespace;
2. the **effective, permitted, inheritable and ambient** sets emptied (``capset``), after any uid
   change: in ``userns`` mode the program stays uid 0 of its namespace, and root there held every
   capability of the namespace (``umount2("/tmp")`` then showed the host's ``/tmp``);
3. ``no_new_privs`` and a **seccomp** filter: the calls that reshape a sandbox or reach another process
   fail with EPERM (mount, umount2, pivot_root, chroot, unshare, setns, ptrace, process_vm_*,
   pidfd_getfd, keyctl, bpf, perf_event_open, userfaultfd, module loading, the new mount API, io_uring)
   and so do ``clone`` with a namespace flag and ``prctl(PR_SET_PDEATHSIG)`` (the parent-death signal
   set here ends the program with its init; the program may not clear it). ``clone3`` gets ENOSYS (its
   flags sit in memory a filter cannot read): glibc then falls back to ``clone``, which the filter can
   check. Docker's default profile does the same.

Why a deny list and not an allow list: the program is any Python (or any binary the interpreter's
directories hold) with any library of the environment, and the set of calls those make changes with
each glibc, CPython and kernel; an allow list narrow enough to matter breaks real programs in ways no
test here would see, one wide enough to run them all is a deny list written the other way round. The
boundary is the namespaces, the minimal root, the dropped capabilities and the uid; the filter removes
the calls that could undo those (or that the kernel's namespaces do not cover: io_uring's operations
are not seen by seccomp at all, so its three calls are refused whole), and each new call that reaches
past a namespace is added here by name.

The filter is classic BPF written out here (a dozen instructions a call) rather than libseccomp:
the init must start in ~20 ms with nothing but the standard library.
"""

import ctypes
import errno
import os
import struct

PR_CAPBSET_READ = 23
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
PR_SET_DUMPABLE, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_PDEATHSIG = 4, 22, 2, 1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

# Syscall numbers per architecture (name -> number); the new mount API (open_tree .. mount_setattr),
# clone3 and io_uring share one numbering on every architecture.
_COMMON = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "clone3": 435,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "pidfd_getfd": 438,
}
SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "unshare": 272,
            "setns": 308,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "kexec_load": 246,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "clone": 56,
            "prctl": 157,
            **_COMMON,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "unshare": 97,
            "setns": 268,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "kexec_load": 104,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "clone": 220,
            "prctl": 167,
            **_COMMON,
        },
    ),
}
# Refused only where asked: memfd_create where the run has no cgroup to count a memfd's pages.
OPTIONAL = {"x86_64": {"memfd_create": 319}, "aarch64": {"memfd_create": 279}}
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (clone()'s low byte is the exit
# signal, so CLONE_NEWTIME, 0x80, can only come through clone3 or unshare, both refused whole)
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# BPF opcodes (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ_K, _JSET_K, _RET_K = 0x20, 0x15, 0x45, 0x06
_ALLOW, _ERRNO, _KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits on little-endian)

libc = ctypes.CDLL(None, use_errno=True)


def _ok(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def seccomp_program(machine: str, more: tuple[str, ...] = ()) -> bytes:
    """The filter as packed ``struct sock_filter`` entries (8 bytes each); ``more``: calls of
    ``OPTIONAL`` refused as well."""
    if machine not in SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp table for {machine}")
    arch, numbers = SYSCALLS[machine]
    ins: list[tuple[int, int, int, int]] = []
    op = lambda code, k, jt=0, jf=0: ins.append((code, jt, jf, k))  # noqa: E731
    op(_LD_W_ABS, _ARCH)
    op(_JEQ_K, arch, 1, 0)
    op(_RET_K, _KILL_PROCESS)  # another ABI (x32, i386 on x86_64): its numbers mean other calls
    op(_LD_W_ABS, _NR)
    if machine == "x86_64":  # x32 calls carry bit 30 on the x86_64 arch value
        op(0x35, 0x40000000, 0, 1)  # JGE
        op(_RET_K, _KILL_PROCESS)
    denied = [n for name, n in numbers.items() if name not in ("clone", "clone3", "prctl")]
    denied += [OPTIONAL[machine][name] for name in more]
    for nr in denied:
        op(_JEQ_K, nr, 0, 1)
        op(_RET_K, _ERRNO | errno.EPERM)
    op(_JEQ_K, numbers["prctl"], 0, 3)  # prctl(PR_SET_PDEATHSIG, ...) refused, every other option allowed
    op(_LD_W_ABS, _ARG0)
    op(_JEQ_K, PR_SET_PDEATHSIG, 0, 1)
    op(_RET_K, _ERRNO | errno.EPERM)
    op(_LD_W_ABS, _NR)  # the call's number back for the checks below
    op(_JEQ_K, numbers["clone3"], 0, 1)
    op(_RET_K, _ERRNO | errno.ENOSYS)
    op(_JEQ_K, numbers["clone"], 0, 3)
    op(_LD_W_ABS, _ARG0)
    op(_JSET_K, CLONE_NEW_ANY, 0, 1)
    op(_RET_K, _ERRNO | errno.EPERM)
    op(_RET_K, _ALLOW)
    return b"".join(struct.pack("=HBBI", *i) for i in ins)


def drop_bounding_set() -> None:
    """Empty the bounding set. Dropping needs CAP_SETPCAP (the init is root, in its namespace at least);
    a capability already out of the set (bubblewrap as a non-root user empties it) needs nothing."""
    for cap in range(64):
        held = libc.prctl(PR_CAPBSET_READ, cap, 0, 0, 0)
        if held < 0:  # EINVAL: past the kernel's last capability
            return
        if held:
            _ok(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")


def clear_capabilities() -> None:
    """Effective, permitted and inheritable sets to zero (capset), ambient cleared."""
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two __user_cap_data_struct {effective, permitted, inheritable}
    _ok(libc.capset(header, data), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on old kernels: none to clear


def install_seccomp(memfd: bool = True) -> None:
    program = seccomp_program(os.uname().machine, () if memfd else ("memfd_create",))
    buf = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program) // 8, ctypes.addressof(buf))
    _ok(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def confine(uid: int | None, bounding: bool = True, death_signal: int = 9, memfd: bool = True) -> None:
    """Everything after the rlimits and before exec; ``uid``: switch to it (as root). ``bounding``:
    empty the bounding set (False only for a non-root caller's ``--sandbox none`` run, which holds
    no capability to drop it with, and no capability an exec could raise under no_new_privs).
    ``death_signal``: what the program gets when its init dies, set after the uid change (which
    clears it) and before the filter (which then keeps the program from clearing it). ``memfd``: False
    refuses ``memfd_create`` too (a run without a cgroup of its own: nothing would count its pages)."""
    if bounding:
        drop_bounding_set()
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _ok(libc.prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0), "parent-death signal")
    clear_capabilities()
    _ok(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    install_seccomp(memfd)
