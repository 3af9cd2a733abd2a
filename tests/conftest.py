"""Shared test setup: offline, CPU-only, and tiny models built once per session."""

import os

# Before anything imports transformers or vLLM: no Hub, a small vLLM KV cache, quiet tokenizers.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TEACHER_DIR = REPO / "recipes" / "assets" / "teacher"
AGENT_TEACHER_DIR = REPO / "recipes" / "assets" / "agent_teacher"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A random-init tiny Llama + digit tokenizer, built offline once per session."""
    from reasonkit.recipes.teachers.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def teacher_dir() -> str:
    """The committed embedded teacher (trained by `distill make-teacher`), read-only."""
    if not (TEACHER_DIR / "config.json").is_file():
        pytest.fail(f"embedded teacher missing at {TEACHER_DIR}; run `distill make-teacher`")
    return str(TEACHER_DIR)


@pytest.fixture(scope="session")
def agent_teacher_dir() -> str:
    """The committed tool-using teacher (recipes/teachers/agent.py: TRL's Qwen2.5 template, calls search), read-only."""  # noqa: E501
    if not (
        AGENT_TEACHER_DIR / "model.safetensors"
    ).is_file():  # as tests/recipes/teachers/test_agent_teacher.py waits for it
        pytest.skip(
            f"embedded agent teacher not trained yet at {AGENT_TEACHER_DIR} (distill make-teacher --task agent)"
        )
    return str(AGENT_TEACHER_DIR)


@pytest.fixture(scope="session")
def gen_model(tiny_model_dir) -> str:
    """The embedded teacher once trained, else the random tiny model."""
    return str(TEACHER_DIR) if (TEACHER_DIR / "config.json").is_file() else tiny_model_dir


@pytest.fixture(scope="session")
def vllm_engine(gen_model):
    """One vllm.LLM per session (fp32, eager, max_model_len 512, seed 0), shared by gen and eval."""
    from .helpers.gen import vllm_engine_for

    with vllm_engine_for(gen_model, 512) as llm:
        yield llm


@pytest.fixture(scope="session")
def vllm_server(gen_model, tmp_path_factory):
    """vLLM's OpenAI-compatible server on loopback; yields (base_url, model)."""
    from .helpers.gen import serve_vllm

    with serve_vllm(gen_model, tmp_path_factory.mktemp("server") / "server.log", max_model_len=1024) as url:
        yield url, gen_model


@pytest.fixture(scope="session")
def ray_cluster() -> str:
    """One local Ray cluster per session (2 CPUs, 200 MB object store, no dashboard); yields its
    address, which subprocess drivers join with ``--ray-address``. Workers inherit the offline
    environment set above. Imported here, not at the top: only the Ray tests pay for Ray."""
    import ray
    from ray import cloudpickle

    from reasonkit.ray_engine import connect

    # A class a test defines travels to Ray's workers by value: pytest imports this folder as a package
    # named after the checkout's folder (main.tests in a clone named main), which no worker can import, so
    # a reference to it failed there (ModuleNotFoundError: No module named 'main').
    cloudpickle.register_pickle_by_value(sys.modules[__package__])
    connect(num_cpus=2, object_store_mb=200)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory):
    """The README's main job at full size, run once per session as a user runs it:
    `distill quickstart --out OUT` (vLLM, ~9 min on 2 cores). tests/recipes/test_quickstart.py checks its
    headline figures and its terminal; tests/hub/test_quickstart.py publishes its stages.
    Yields (out, completed process, seconds)."""
    import subprocess
    import time
    from types import SimpleNamespace

    out = tmp_path_factory.mktemp("quickstart") / "qs"
    started = time.monotonic()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "distill"), "quickstart", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return SimpleNamespace(out=out, process=done, seconds=time.monotonic() - started)
