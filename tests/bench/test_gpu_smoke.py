"""bench/gpu_smoke.py (issue 35 item 8): the embedded models through sft -> dpo -> grpo -> eval -> rm -> score, each
step in a process of its own, one line of figures a step. Here it runs on the CPU with tiny step counts (the GPU run
is the same chain on cuda in bf16); the per-line GPU figures and the wheel logic are checked with stand-ins."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_smoke.py"


def smoke():
    spec = importlib.util.spec_from_file_location("gpu_smoke", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_whole_chain_runs_on_the_cpu_each_step_in_its_own_process(tmp_path):
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--tiny", "--work", str(work)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    for step in smoke().STEPS:
        assert any(ln.startswith(f"{step} ") and " wall " in ln and "free at start" in ln for ln in lines), lines
    assert "all 6 steps in" in lines[-1]
    metrics = [json.loads((work / "metrics" / f"{s}.json").read_text()) for s in smoke().STEPS]
    pids = {m["pid"] for m in metrics}
    assert len(pids) == 6 and os.getpid() not in pids, "six processes of their own"
    assert all("attention sdpa" in m["note"] for m in metrics if m["step"] in ("sft", "dpo", "grpo", "rm"))
    assert (work / "grpo" / "model").is_dir() and (work / "dpo" / "adapter").is_dir()
    assert json.loads((work / "eval" / "summary.json").read_text())["protocol"]["backend"] == "hf"
    assert json.loads((work / "score" / "report.json").read_text())


def test_a_gpu_line_gives_wall_time_peak_and_free_memory():
    gib = 1 << 30
    m = {
        "step": "grpo",
        "seconds_in_step": 41.25,
        "total": 80 * gib,
        "peak_allocated": int(2.5 * gib),
        "free_at_start": 79 * gib,
        "note": "20 steps",
    }
    assert smoke().line(m, 52.04) == (
        "grpo   wall   52.0 s (in step 41.2 s) | peak 2.50 GiB | free at start 79.00 GiB of 80.00 GiB | 20 steps"
    )


def test_what_is_missing_is_installed_from_the_wheels_folder_or_named_with_its_fetch_command(tmp_path, monkeypatch):
    module = smoke()
    gone = {"xxhash", "pyarrow"}
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a))
    installed = []

    def pip(command, check):
        installed.extend(Path(c).name for c in command if c.endswith(".whl"))
        gone.discard("xxhash")  # as pip would have installed it

    monkeypatch.setattr(module.subprocess, "run", pip)
    (tmp_path / "xxhash-4.1.0-cp312-cp312-manylinux2014_x86_64.whl").write_bytes(b"")
    problem = module.install_missing(tmp_path)
    assert installed == ["xxhash-4.1.0-cp312-cp312-manylinux2014_x86_64.whl"]
    assert problem.startswith("missing here: pyarrow; fetch their wheels")
    assert problem.endswith("-d bench/gpu_wheels pyarrow")
    gone.clear()
    assert module.install_missing(tmp_path) is None
