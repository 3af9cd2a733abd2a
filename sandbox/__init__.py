"""Run an untrusted program (a model's Python code) in a throwaway, limited, offline process.

Shared by the ``python`` tool (gen/tools/python.py) and the code verifier; it knows no stage. One
call of :func:`run` is one program run, in the strongest mode the machine allows (``root`` as root,
``userns`` for everyone else; ``none`` only when the user asks for it by name, ``--sandbox none``):

- fresh PID, mount, network, IPC, UTS and cgroup namespaces: no network at all (not even the host's
  loopback, where a vLLM server may listen), only its own processes visible (the init stays outside
  them), no System V or POSIX IPC object of the host's or another run's, and every process of the run
  (a detached, double-forked daemon included) killed when the program ends;
- a **minimal root of its own** (view.py, ``pivot_root``): read-only binds of what the interpreter
  needs, ``/dev`` with four devices, its own ``/proc``, a private size-capped ``/tmp`` holding an
  empty working directory; no home, no project, no run directory, no dataset (so no test's
  expected output, no token file) exists there;
- **no privilege** (confine.py): empty effective, permitted, inheritable, ambient and bounding
  capability sets, an unprivileged uid of its own as root, ``no_new_privs``, and a seccomp filter
  refusing mount, umount2, pivot_root, chroot, unshare, setns, ptrace and namespace clones;
- limits for the run as a whole where a cgroup can be made (cgroup.py: memory with its tmpfs and memfd
  pages, process count, CPU time), and ``setrlimit`` limits per process (CPU seconds, address space,
  file size, open files, process count); ``Result.isolation`` says ``cgroup`` or ``no-cgroup``;
- a clean environment (``PATH``, ``LANG``, ``HOME``: no token or key of the caller's);
- a wall-clock timeout that kills everything; stdout and stderr read up to a cap (the run is
  stopped when a stream passes it), never buffered whole.

A stage that will run programs calls :func:`preflight` before it reads its input: a machine where the
sandbox cannot start is one error naming the fix, not a column of unverifiable rows. With
``--sandbox none`` (no namespaces) the same limits, capability drop and seccomp filter apply,
leftovers are found through a child subreaper, and ``Result.isolation`` says ``no-namespaces``.

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
>>> run("import os; print(os.path.exists(os.path.expanduser('~root/.bashrc')))").stdout
'False\\n'

The program's /tmp holds its own directory and, where the interpreter lives under /tmp (a clone or venv there),
the read-only path to it; nothing else of the host's /tmp:

>>> probe = "import os, sys; print(sorted(set(os.listdir('/tmp')) - {'sandbox'} - {p.split('/')[2] for p in sys.path if p.startswith('/tmp/')}))"
>>> run(probe).stdout
'[]\\n'
"""  # noqa: E501

from reasonkit.sandbox.host import SandboxError
from reasonkit.sandbox.modes import ENV_MODE, MODES, available_mode, isolation_of, requested_mode, resolve_mode
from reasonkit.sandbox.runner import Limits, Result, preflight, run

__all__ = [
    "ENV_MODE",
    "MODES",
    "Limits",
    "Result",
    "SandboxError",
    "available_mode",
    "isolation_of",
    "preflight",
    "requested_mode",
    "resolve_mode",
    "run",
]
