"""Shared test setup: offline, CPU-only, and tiny models built once per session."""

import os

# Before anything imports transformers or vLLM: no Hub, a small vLLM KV cache, quiet tokenizers.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TEACHER_DIR = REPO / "recipes" / "assets" / "teacher"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A random-init tiny Llama + digit tokenizer, built offline once per session."""
    from reasonkit.recipes.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def teacher_dir() -> str:
    """The committed embedded teacher (trained by `distill make-teacher`), read-only."""
    if not (TEACHER_DIR / "config.json").is_file():
        pytest.fail(f"embedded teacher missing at {TEACHER_DIR}; run `distill make-teacher`")
    return str(TEACHER_DIR)
