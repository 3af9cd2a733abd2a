"""`distill generate --tools search` on the three real backends, with the real BM25 search tool over the
agent task's corpus: vLLM offline (fp32, eager), transformers, and vLLM's OpenAI-compatible server on
loopback with its hermes tool-call parser; and a SIGKILL mid-run resumed with nothing lost or repeated.

The model is the embedded tool-using teacher (recipes/assets/agent_teacher, trained by
recipes/teachers/agent.py) when it is there: it really searches twice and answers. Until then a random
tiny model with the same tokenizer and template stands in, and only the plumbing is checked.
"""

import subprocess
from pathlib import Path

import pytest

from reasonkit.gen.run import GenerateConfig, generate, make_backend
from reasonkit.recipes.tasks import agent as agent_task
from reasonkit.recipes.teachers.agent import SEARCH_K  # passages per observation: what the teacher learnt to read
from reasonkit.store import load_manifest, read_stage

from ...helpers.gen import distill_generate, kill_after_first_shard, serve_vllm, vllm_engine_for

pytestmark = pytest.mark.slow
AGENT_TEACHER = Path(__file__).resolve().parents[3] / "recipes" / "assets" / "agent_teacher"
MAX_MODEL_LEN = 1024
TRAINED = (AGENT_TEACHER / "config.json").is_file()


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> str:
    """The embedded agent teacher, else a random tiny model under TRL's Qwen2.5 template."""
    if TRAINED:
        return str(AGENT_TEACHER)
    from reasonkit.recipes.teachers.tiny import build_model
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    out = tmp_path_factory.mktemp("tool_model")
    texts = [q["question"] for q in agent_task.questions(agent_task.make_world(0), "train")[:200]]
    build_model(build_tool_tokenizer(texts, vocab_size=600), out)
    return str(out)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """The agent task's corpus and 4 held-out questions."""
    d = tmp_path_factory.mktemp("agent_task")
    corpus = agent_task.write_corpus(d / "corpus.jsonl")
    prompts = agent_task.write_prompts(d / "prompts.parquet", 4, split="test")
    return corpus, prompts


@pytest.fixture(scope="module")
def tool_engine(tool_model):
    with vllm_engine_for(tool_model, MAX_MODEL_LEN) as llm:
        yield llm


def tool_config(task, model, out, **kw):
    corpus, prompts = task
    base = dict(
        prompts=prompts,
        teacher=model,
        out=str(out),
        n=1,
        max_tokens=64,
        temperature=0.0,
        shard_size=2,
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
        tools="search",
        corpus=corpus,
        max_turns=4,
        search_k=SEARCH_K,
    )
    return GenerateConfig(**{**base, **kw})


def check_trajectories(out, n_rows):
    """Rows in the contract; with the trained teacher, the search really ran and mostly found the answer."""
    t = read_stage(out, kind="trajectories")
    rows = t.to_pylist()
    assert len(rows) == n_rows
    for r in rows:
        assert r["finish_reason"] in ("stop", "length", "max_turns", "error")
        assert 1 <= r["turns"] <= 4 and r["completion_tokens"] > 0 and r["prompt_tokens"] > 0
        assistant = [m for m in r["messages"] if m["role"] == "assistant"]
        tools = [m for m in r["messages"] if m["role"] == "tool"]
        assert len(assistant) == r["turns"] and len(tools) == r["tool_calls"]
        assert all(m["name"] or m["content"].startswith("error: bad tool call") for m in tools)  # unparseable: no name
    if TRAINED:  # the shipped teacher (0.375 held out) is sure of its form: two searches, a box; when its second
        # search finds no prize it tries a third, whose JSON it sometimes breaks (an error observation, counted)
        assert all(r["tool_calls"] in (2, 3) and r["tool_errors"] <= r["tool_calls"] - 2 for r in rows), rows
        firsts = [next(m["content"] for m in r["messages"] if m["role"] == "tool") for r in rows]
        assert all(" is a novel by " in o for o in firsts), firsts  # its title search hits the book's passage
        boxed = [r for r in rows if r["finish_reason"] == "stop" and "\\boxed{" in r["response"]]
        assert len(boxed) >= len(rows) / 2, [
            r["response"] for r in rows
        ]  # measured: 5 of 8 sampled at T 0.7, 3 of 4 greedy
    return rows


def test_vllm_offline_runs_the_tool_loop(tmp_path, task, tool_model, tool_engine):
    cfg = tool_config(task, tool_model, tmp_path / "out", n=2, temperature=0.7, top_p=1.0)
    manifest = generate(cfg, backend=make_backend(cfg, llm=tool_engine))
    assert (
        manifest["complete"] and manifest["kind"] == "trajectories" and manifest["backend_info"]["backend"] == "vllm"
    )
    check_trajectories(tmp_path / "out", 8)
    # per-turn seeds: the same run again draws the same trajectories
    cfg_b = tool_config(task, tool_model, tmp_path / "again", n=2, temperature=0.7, top_p=1.0)
    generate(cfg_b, backend=make_backend(cfg_b, llm=tool_engine))
    key = lambda t: sorted(zip(t["id"].to_pylist(), t["sample"].to_pylist(), map(str, t["messages"].to_pylist())))
    assert key(read_stage(tmp_path / "out")) == key(read_stage(tmp_path / "again"))


def test_transformers_runs_the_tool_loop(tmp_path, task, tool_model):
    cfg = tool_config(task, tool_model, tmp_path / "out", backend="hf", batch_size=4)
    manifest = generate(cfg)
    assert manifest["complete"] and manifest["backend_info"]["backend"] == "hf"
    check_trajectories(tmp_path / "out", 4)


def test_openai_backend_reads_the_servers_parsed_tool_calls(tmp_path, task, tool_model):
    from reasonkit.gen.backend import Request, Sampling
    from reasonkit.gen.openai_backend import OpenAIBackend
    from reasonkit.gen.tools.base import load_tools

    flags = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    with serve_vllm(tool_model, tmp_path / "server.log", max_model_len=MAX_MODEL_LEN, extra=flags) as url:
        cfg = tool_config(task, tool_model, tmp_path / "out", backend="openai", base_url=url)
        manifest = generate(cfg)
        assert manifest["complete"] and manifest["backend_info"]["backend"] == "openai"
        rows = check_trajectories(tmp_path / "out", 4)
        if TRAINED:  # the server, not our parser, split the call off: one turn asked directly
            box = load_tools("search", corpus=task[0], k=SEARCH_K)
            question = rows[0]["messages"][:1]
            backend = OpenAIBackend(tool_model, base_url=url)
            [done] = backend.generate(
                [
                    Request(
                        "q",
                        question,
                        1,
                        Sampling(temperature=0.0, top_p=1.0, max_tokens=64, seed=0),
                        tools=box.schemas(),
                    )
                ]
            )
            assert done.tool_calls and done.tool_calls[0].name == "search" and "<tool_call>" not in done.text


def test_sigkill_mid_run_resumes_with_nothing_lost_or_repeated(tmp_path, task, tool_model):
    corpus, _ = task
    # transformers: a process starts in seconds (a vLLM engine takes a minute on 2 cores); the stage's
    # shards and resume are the same on every backend
    prompts = agent_task.write_prompts(tmp_path / "p.parquet", 4, split="test")
    out = tmp_path / "out"
    args = [
        "--prompts",
        prompts,
        "--teacher",
        tool_model,
        "--out",
        str(out),
        "--backend",
        "hf",
        "--n",
        "2",
        "--max-tokens",
        "32",
        "--temperature",
        "0",
        "--shard-size",
        "1",
        "--batch-size",
        "4",
        "--dtype",
        "float32",
        "--tools",
        "search",
        "--corpus",
        corpus,
        "--max-turns",
        "4",
        "--search-k",
        str(SEARCH_K),
    ]
    killed = kill_after_first_shard(distill_generate(args), out, tmp_path / "log")
    assert not killed["complete"] and 0 < killed["rows"] < 8
    done = subprocess.run(distill_generate(args), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    t = read_stage(out, kind="trajectories")
    keys = list(zip(t["id"].to_pylist(), t["sample"].to_pylist()))
    assert len(keys) == len(set(keys)) == 8  # none lost, none twice
    manifest = load_manifest(out)
    assert manifest["complete"] and manifest["rows"] == 8
    assert all(t["messages"].to_pylist()), "every row holds its whole trajectory"
