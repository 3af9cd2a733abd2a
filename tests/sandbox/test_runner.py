"""The sandbox really runs programs: right and wrong ones, and adversarial ones (an infinite loop, a
fork bomb, 10 GB allocated or written, writes outside its directory, sockets, the parent's secrets,
a detached daemon, 100 MB printed). Each ends within its limits, with the reason, and leaves the host
as it was. Checks that need an isolation this machine lacks are skipped, saying which."""

import os
import resource
import secrets
import socket
import time
from pathlib import Path

import pytest

from reasonkit import sandbox
from reasonkit.sandbox import Limits, run

from ..helpers.sandbox import NAMESPACE_MODES, processes_with

MODE = sandbox.available_mode()


@pytest.fixture(params=NAMESPACE_MODES)
def mode(request) -> str:
    return request.param


REPO = Path(__file__).resolve().parents[2]


def test_isolation_on_this_machine_is_the_strongest_it_allows():
    # This CI box runs as root with unshare: every isolation must be in force (elsewhere: reported).
    r = run("print('hi')")
    assert r.ok and r.stdout == "hi\n" and r.isolation == sandbox.isolation_of(MODE)
    if os.geteuid() == 0 and MODE == "root":
        assert set(r.isolation) == {
            "netns",
            "pidns",
            "mountns",
            "ipcns",
            "utsns",
            "cgroupns",
            "minroot",
            "uid-drop",
            "nocaps",
            "seccomp",
            "cgroup",
        }  # as root, a cgroup of the run's own


def test_right_program_reads_stdin_and_files():
    r = run(
        "import sys\nn = int(open('data/n.txt').read())\nprint(sum(map(int, sys.stdin.read().split())) * n)",
        stdin="1 2 3\n",
        files={"data/n.txt": "10"},
    )
    assert (r.stdout, r.returncode, r.limit, r.timed_out) == ("60\n", 0, None, False)


def test_many_tests_of_one_program_in_one_process():
    # How the code verifier runs N tests for the price of one sandbox: a harness plus the data.
    harness = (
        "import json, contextlib, io\nfrom solution import add\n"
        "for args, want in json.load(open('tests.json')):\n"
        "    print(json.dumps(add(*args) == want))\n"
    )
    tests = "[[[1, 2], 3], [[2, 2], 5], [[0, 0], 0]]"
    r = run(harness, files={"solution.py": "def add(a, b):\n    return a + b\n", "tests.json": tests})
    assert r.ok and r.stdout.split() == ["true", "false", "true"]


def test_wrong_exit_code_is_not_a_limit():
    r = run("import sys\nprint('partial')\nsys.exit(3)")
    assert (r.returncode, r.limit, r.ok, r.stdout) == (3, None, False, "partial\n")


def test_syntax_error():
    r = run("def f(:\n    pass\n")
    assert r.returncode == 1 and r.limit is None and "SyntaxError" in r.stderr


def test_runtime_error():
    r = run("print(1)\nprint(1 / 0)")
    assert r.returncode == 1 and r.stdout == "1\n" and "ZeroDivisionError" in r.stderr


def test_infinite_loop_is_killed_at_the_wall_clock(mode):
    started = time.monotonic()
    r = run("while True:\n    pass", timeout=1.0, mode=mode)
    assert (r.timed_out, r.limit, r.returncode, r.signal) == (True, "wall", None, "SIGKILL")
    assert time.monotonic() - started < 6


def test_cpu_limit(mode):
    started = time.monotonic()
    r = run("while True:\n    pass", timeout=20, limits=Limits(cpu_seconds=1), mode=mode)
    assert r.limit == "cpu" and not r.timed_out and r.signal in ("SIGXCPU", "SIGKILL")
    assert time.monotonic() - started < 10


def test_fork_bomb_hits_the_process_limit_and_leaves_nothing(mode):
    # Also in userns forced as root: the program runs there as an unprivileged host uid (the kernel never
    # applies RLIMIT_NPROC to the host's root, whatever namespace it is in).
    marker = f"forkbomb{secrets.token_hex(4)}"
    started = time.monotonic()
    r = run(f"import os, sys\nsys.argv.append({marker!r})\nwhile True:\n    os.fork()", timeout=8, mode=mode)
    assert r.limit in ("processes", "wall") and not r.ok
    assert r.limit == "processes"
    assert time.monotonic() - started < 20  # 8 s of wall clock, then every process killed
    assert processes_with(marker) == []  # the marker is in no process's argv: none left running


def test_allocating_10_gb_fails_fast_with_memory(mode):
    started = time.monotonic()
    r = run("x = bytearray(10 * 1024 ** 3)\nprint('allocated')", limits=Limits(memory_mb=512), mode=mode)
    assert r.limit == "memory" and "MemoryError" in r.stderr and "allocated" not in r.stdout
    assert time.monotonic() - started < 5


def test_writing_10_gb_to_a_file_stops_at_the_file_size_limit(mode):
    program = "b = b'x' * (1 << 20)\nwith open('big', 'wb') as f:\n    for _ in range(10240):\n        f.write(b)\n"
    started = time.monotonic()
    r = run(program, limits=Limits(file_size_mb=8), mode=mode)
    assert r.limit == "file_size" and "File too large" in r.stderr
    assert time.monotonic() - started < 5


def test_open_files_limit(mode):
    r = run("files = [open('/dev/null') for _ in range(1000)]", limits=Limits(open_files=32), mode=mode)
    assert r.returncode == 1 and "Too many open files" in r.stderr


def test_many_files_stop_at_the_tmpfs_size(mode):
    program = "b = b'x' * (1 << 20)\nfor i in range(100):\n    open(f'f{i}', 'wb').write(b * 4)\n"
    r = run(program, limits=Limits(tmpfs_mb=16, file_size_mb=8), mode=mode)
    assert r.limit == "file_size" and "No space left on device" in r.stderr


def test_writes_outside_the_working_directory_do_not_reach_the_host(mode, tmp_path):
    name = f"reasonkit-sandbox-escape-{secrets.token_hex(4)}"
    in_tmp, in_repo = Path("/tmp") / name, REPO / name
    program = (
        f"open({str(in_tmp)!r}, 'w').write('x')\nprint('tmp written')\n"
        f"open({str(in_repo)!r}, 'w').write('x')\nprint('repo written')\n"
    )
    try:
        r = run(program, mode=mode)
        assert not in_repo.exists()
        # a private /tmp: written there, gone with the run; the repository is not in the view: at most an empty
        # skeleton directory leading to the venv, read-only, or (a clone under /tmp) on the private /tmp too
        assert not in_tmp.exists() and r.stdout.startswith("tmp written\n")
        if not str(REPO).startswith("/tmp/"):
            assert ("Read-only file system" in r.stderr or "FileNotFoundError" in r.stderr) and r.returncode == 1
    finally:
        in_tmp.unlink(missing_ok=True)
        in_repo.unlink(missing_ok=True)


def test_no_network_not_even_the_hosts_loopback(mode):
    with socket.socket() as server:  # a real listener on the host's loopback (a vLLM server's place)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        program = (
            "import socket\n"
            f"for addr in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('10.255.255.1', 80)]:\n"
            "    try:\n"
            "        socket.create_connection(addr, timeout=2).close()\n"
            "        print('connected', addr)\n"
            "    except OSError as e:\n"
            "        print('refused', addr, e.errno)\n"
        )
        started = time.monotonic()
        r = run(program, mode=mode)
    assert r.ok and "connected" not in r.stdout and r.stdout.count("refused") == 3
    assert time.monotonic() - started < 5


def test_parent_secrets_are_not_visible(mode, monkeypatch):
    token, key = f"hf_{secrets.token_hex(8)}", f"sk-{secrets.token_hex(8)}"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    program = (
        "import os, glob\nprint(dict(os.environ))\n"
        "for path in glob.glob('/proc/*/environ'):\n"
        "    try:\n        print(path, open(path, 'rb').read())\n"
        "    except OSError as e:\n        print(path, e)\n"
    )
    r = run(program, mode=mode)
    assert r.ok and "HOME" in r.stdout
    for secret in (token, key, "HF_TOKEN", "OPENAI_API_KEY"):
        assert secret not in r.stdout and secret not in r.stderr


DETACH = """import os, sys, time
if os.fork() == 0:          # a daemon: new session, double fork, parent gone
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(900)", sys.argv[1]])
    os._exit(0)
time.sleep(0.5)  # the daemon has exec'd (its argv carries the marker) before the program ends
print("spawned")
"""


def test_a_detached_child_does_not_outlive_the_run(mode):
    marker = f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6)}"  # sleep's argument, unique
    r = run(argv=["python", "main.py", marker], files={"main.py": DETACH}, mode=mode)
    assert r.ok and r.stdout == "spawned\n"  # it was there when the program ended (it had exec'd)...
    assert processes_with(marker) == []  # ...and is not any more: the kernel ends a PID namespace with its PID 1


def test_fallback_without_namespaces_still_kills_detached_children():
    # No PID namespace: the init, a child subreaper, finds the orphans and kills them.
    # (/bin/sh, not the venv's python: as root the dropped uid may not reach the venv's interpreter.)
    marker = f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6)}"
    script = f"setsid sh -c 'sleep {marker} & sleep {marker}' & echo started"
    r = run(argv=["/bin/sh", "-c", script], mode="none")
    assert r.ok and r.stdout == "started\n" and r.processes_left >= 1
    assert processes_with(marker) == []
    assert "netns" not in r.isolation and "pidns" not in r.isolation


def test_printing_100_mb_is_capped_flagged_and_not_buffered(mode):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    r = run("import sys\nb = 'x' * (1 << 20)\nfor _ in range(100):\n    sys.stdout.write(b)\n", mode=mode)
    assert r.truncated and r.limit == "output" and not r.ok
    assert len(r.stdout) == Limits().output_bytes
    assert time.monotonic() - started < 10
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 40  # a few MB of cap, not 100 MB


def test_userns_mode_where_the_kernel_allows_it():
    if os.geteuid() == 0 and MODE != "root":
        pytest.skip("root without unshare")
    if os.system("unshare --user --map-root-user true 2>/dev/null") != 0:
        pytest.skip("no unprivileged user namespaces here")
    r = run(
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\nexcept OSError:\n"
        "    print('offline')",
        mode="userns",
    )
    assert r.ok and r.stdout == "offline\n" and "userns" in r.isolation


def test_a_file_outside_the_working_directory_is_refused():
    with pytest.raises(ValueError, match="outside the working directory"):
        run("pass", files={"../escape.py": "x"})


@pytest.mark.skipif(os.geteuid() != 0, reason="a cgroup of the run's own is made as root here")
def test_runs_started_side_by_side_each_get_a_cgroup(monkeypatch):
    # The probe for a cgroup runs once even when the first runs start in many threads at once (the code
    # verifier's workers): side by side, one thread's probe directory was another's EEXIST, and its runs
    # went without a cgroup ("no-cgroup").
    from concurrent.futures import ThreadPoolExecutor

    from reasonkit.sandbox import cgroup

    real_make = cgroup._make

    def slow_make(*args):  # the probe's window held open, so the threads' first runs meet in it
        time.sleep(0.05)
        return real_make(*args)

    monkeypatch.setattr(cgroup, "_probed", {})
    monkeypatch.setattr(cgroup, "_make", slow_make)
    with ThreadPoolExecutor(8) as pool:
        runs = list(pool.map(lambda _: run("print(0)", mode=MODE), range(16)))
    assert [r.stdout for r in runs] == ["0\n"] * 16
    assert {r.isolation[-1] for r in runs} == {"cgroup"}
