"""An escape attempt and what must come of it, shared by the in-process matrix (every mode this machine
can take) and the non-root run (tests/sandbox/test_nonroot.py runs this file as a script as uid 65534).

``plant(dir)`` writes, outside ``/tmp``: a 0600 secret (a token file's place), a 0644 file holding a
test's expected output (the Parquet's neighbour), a victim file. ``ESCAPE`` is the model's program:
it tries every way to read, write, delete, list, unmount, mount, trace, link; it prints one JSON
object of outcomes. ``verdicts(outcomes, planted)`` lists every way the sandbox failed (empty: held).

    python tests/sandbox/sandbox_escape.py PLANT_DIR   # plants, runs ESCAPE in the default mode, prints the failures
"""

import json
import os
import secrets
import sys
from pathlib import Path

ESCAPE = r"""
import ctypes, json, os, sys
planted = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
out = {}

def attempt(name, fn):
    try:
        out[name] = "ok:" + str(fn())[:200]
    except Exception as e:
        out[name] = "err:" + type(e).__name__

def call(fn, *args):  # a libc call: its errno, or "ok"
    return "ok" if fn(*args) == 0 else os.strerror(ctypes.get_errno())

attempt("read_secret", lambda: open(planted["secret"]).read())
attempt("read_expected", lambda: open(planted["expected"]).read())
attempt("read_via_proc1_root", lambda: open("/proc/1/root" + planted["secret"]).read())
attempt("write_beside", lambda: open(os.path.join(planted["dir"], "forged.txt"), "w").write("x"))
attempt("delete_victim", lambda: os.remove(planted["victim"]))
attempt("list_planted_dir", lambda: os.listdir(planted["dir"]))
attempt("list_home", lambda: os.listdir(planted["home"]))
attempt("list_project", lambda: os.listdir(planted["project"]))
attempt("symlink_secret", lambda: (os.symlink(planted["secret"], "s"), open("s").read())[1])
attempt("hardlink_secret", lambda: (os.link(planted["secret"], "h"), open("h").read())[1])
out["umount_tmp"] = call(libc.umount2, b"/tmp", 2)
out["mount_tmpfs"] = call(libc.mount, b"none", b"/tmp/sandbox", b"tmpfs", 0, None)
out["chroot"] = call(libc.chroot, b"/tmp")
out["unshare_user"] = call(libc.unshare, 0x10000000)
out["setns"] = call(libc.setns, 0, 0)
out["ptrace_attach_1"] = call(libc.ptrace, 16, 1, None, None)
pid = os.fork()
if pid == 0:
    import time; time.sleep(3); os._exit(0)
out["ptrace_attach_child"] = call(libc.ptrace, 16, pid, None, None)
os.kill(pid, 9)
status = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if l.startswith("Cap"))
out.update({k: v.strip() for k, v in status.items()})
out["mounts"] = [l.split()[4] for l in open("/proc/self/mountinfo")]
print(json.dumps(out))
"""


def plant(directory: Path) -> dict:
    """The planted files (and the places to list) under ``directory``, which must be outside /tmp."""
    home, project = directory / "home", directory / "project"
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (project / "runs" / "code").mkdir(parents=True)
    secret = home / ".cache" / "huggingface" / "token"
    secret.write_text(f"hf_{secrets.token_hex(17)}")
    secret.chmod(0o600)
    expected = project / "runs" / "code" / "tests.json"
    expected.write_text(json.dumps({"expected_output": f"EXPECTED-{secrets.token_hex(6)}"}))
    expected.chmod(0o644)
    victim = project / "runs" / "code" / "part-00000.parquet"
    victim.write_bytes(b"PAR1 committed shard")
    return {
        "dir": str(project / "runs" / "code"),
        "home": str(home),
        "project": str(project),
        "secret": str(secret),
        "expected": str(expected),
        "victim": str(victim),
    }


def failures(outcomes: dict, planted: dict) -> list[str]:
    """Every way the sandbox failed to hold (empty when it held)."""
    bad = []
    for name in (
        "read_secret",
        "read_expected",
        "read_via_proc1_root",
        "write_beside",
        "delete_victim",
        "list_planted_dir",
        "list_home",
        "list_project",
        "symlink_secret",
        "hardlink_secret",
    ):
        if not outcomes.get(name, "").startswith("err:"):
            bad.append(f"{name}: {outcomes.get(name)}")
    for name in (
        "umount_tmp",
        "mount_tmpfs",
        "chroot",
        "unshare_user",
        "setns",
        "ptrace_attach_1",
        "ptrace_attach_child",
    ):
        if outcomes.get(name) == "ok":
            bad.append(f"{name} succeeded")
    for cap in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"):
        if int(outcomes.get(cap, "f"), 16) != 0:
            bad.append(f"{cap} {outcomes.get(cap)}")
    secret_text, expected_text = Path(planted["secret"]).read_text(), Path(planted["expected"]).read_text()
    blob = json.dumps(outcomes)
    if secret_text in blob or "EXPECTED-" in blob:
        bad.append("a planted secret or expected output reached the program's output")
    if not Path(planted["victim"]).exists() or Path(planted["dir"], "forged.txt").exists():
        bad.append("the host's files were changed")
    if expected_text != Path(planted["expected"]).read_text():
        bad.append("the expected output was rewritten")
    for mount in outcomes.get("mounts", []):
        if mount.startswith((planted["home"], planted["project"])) or mount in ("/root", "/home", "/work"):
            bad.append(f"mount point {mount} is in the view")
    return bad


def run_escape(planted: dict, mode: str | None = None):
    from reasonkit import sandbox

    return sandbox.run(argv=["python", "main.py", json.dumps(planted)], files={"main.py": ESCAPE}, mode=mode)


def fork_bomb_limit(mode: str | None = None) -> str | None:
    from reasonkit import sandbox

    return sandbox.run("import os\nwhile True:\n    os.fork()", timeout=8, mode=mode).limit


if __name__ == "__main__":
    planted = plant(Path(sys.argv[1]))
    result = run_escape(planted)
    outcomes = json.loads(result.stdout) if result.ok else {"run": result.stderr[-500:]}
    found = failures(outcomes, planted) if result.ok else [f"did not run: {result.stderr[-300:]}"]
    print(
        json.dumps(
            {
                "failures": found,
                "isolation": list(result.isolation),
                "uid": os.getuid(),
                "fork_bomb": fork_bomb_limit(),
            }
        )
    )
