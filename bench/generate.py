"""Benchmark: the generate stage's tokens/s against a bare ``vllm.LLM.generate``, same engine.

    python bench/generate.py                 # embedded teacher if trained, else a random tiny model
    python bench/generate.py --model DIR --prompts 512 --n 4 --max-tokens 256

One engine serves every contender, in alternating order, ``--repeats`` times each, so engine
start-up, warm-up and machine noise fall on all of them alike; the best and the median run are
both printed (on a shared 2-core box, runs differ by 30%: the best is the steadier estimate):

- ``bare``: one ``llm.generate`` call over all prompts (the chat text is
  rendered beforehand, outside the timer, and vLLM tokenizes it);
- ``bare/shard``: the naive loop, one ``llm.generate`` per shard;
- ``distill``: ``gen.run.generate`` end to end (read the prompts, render, stream through the
  engine, split <think>, commit Parquet shards, manifest), into a fresh directory each time.

Then the ``hf`` backend on a slice of the prompts, for reference. Target: distill/bare >= 0.95.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
TEACHER = Path(__file__).resolve().parent.parent / "recipes" / "assets" / "teacher"


def bare(llm, texts, params, shard_size=None):
    chunks = (
        [slice(0, len(texts))]
        if shard_size is None
        else [slice(i, i + shard_size) for i in range(0, len(texts), shard_size)]
    )
    start = time.perf_counter()
    tokens = 0
    for c in chunks:
        for out in llm.generate(texts[c], params[c], use_tqdm=False):
            tokens += sum(len(o.token_ids) for o in out.outputs)
    return tokens, time.perf_counter() - start


def pipeline(llm, cfg, work):
    from dataclasses import replace

    from reasonkit.gen.run import generate, make_backend

    cfg = replace(cfg, out=str(work / f"run-{time.monotonic_ns()}"))
    start = time.perf_counter()
    manifest = generate(cfg, backend=make_backend(cfg, llm=llm))
    return manifest["summary"]["completion_tokens"], time.perf_counter() - start


# long: a benchmark script: setup, the timed runs and the printed table, in the order they run
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--shard-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hf-prompts", type=int, default=8)
    args = ap.parse_args()

    import vllm
    from vllm import SamplingParams

    from reasonkit.gen.backend import derive_seed
    from reasonkit.gen.render import prompt_text
    from reasonkit.gen.run import GenerateConfig, generate
    from reasonkit.gen.vllm_backend import engine_kwargs
    from reasonkit.readers import read_prompts
    from reasonkit.recipes.tasks.math import write_prompts

    work = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    model = args.model or (str(TEACHER) if (TEACHER / "config.json").is_file() else None)
    if model is None:
        from reasonkit.recipes.teachers.tiny import build_tiny

        model = build_tiny(work / "tiny")
    prompts = write_prompts(work / "prompts.parquet", args.prompts, seed=0, variant="aime")
    cfg = GenerateConfig(
        prompts=prompts,
        teacher=model,
        out="",
        n=args.n,
        max_tokens=args.max_tokens,
        shard_size=args.shard_size,
        dtype="float32",
        max_model_len=1024,
    )
    llm = vllm.LLM(**engine_kwargs(model, dtype="float32", max_model_len=1024, seed=0))
    tok = llm.get_tokenizer()
    table = read_prompts(prompts)
    texts = [prompt_text(tok, m) for m in table.column("messages").to_pylist()]
    params = [
        SamplingParams(
            n=args.n,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_tokens=args.max_tokens,
            seed=derive_seed(cfg.seed, i),
        )
        for i in table.column("id").to_pylist()
    ]
    bare(llm, texts[:8], params[:8])  # warm-up

    runs: dict[str, list[float]] = {"bare": [], "bare/shard": [], "distill": []}
    for _ in range(args.repeats):
        for name in runs:
            if name == "distill":
                tokens, seconds = pipeline(llm, cfg, work)
            else:
                tokens, seconds = bare(llm, texts, params, args.shard_size if name == "bare/shard" else None)
            runs[name].append(tokens / seconds)
            print(f"  {name:<11} {tokens:>8} tokens {seconds:7.2f} s {tokens / seconds:9.1f} tok/s", flush=True)
    llm.llm_engine.engine_core.shutdown()
    del llm

    from dataclasses import replace

    hf_cfg = replace(cfg, backend="hf", out=str(work / "hf"), limit=args.hf_prompts, batch_size=8)
    start = time.perf_counter()
    manifest = generate(hf_cfg)
    hf_rate = manifest["summary"]["completion_tokens"] / manifest["last_run"]["generate_s"]
    hf_wall = time.perf_counter() - start

    med = {k: statistics.median(v) for k, v in runs.items()}
    best = {k: max(v) for k, v in runs.items()}  # the least disturbed run (timeit's rule)
    print(
        f"\nmodel {model}: {args.prompts} prompts x n={args.n}, max_tokens {args.max_tokens}, "
        f"shard {args.shard_size}, {args.repeats} runs each, machine load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':<12} {'best':>9} {'median':>9}  tok/s")
    for name in runs:
        print(f"{name:<12} {best[name]:9.1f} {med[name]:9.1f}")
    print(f"{'hf':<12} {hf_rate:9.1f} {'':>9}  ({args.hf_prompts} prompts, {hf_wall:.1f} s with model load)")
    for base in ("bare", "bare/shard"):
        print(
            f"ratio distill/{base:<10} best {best['distill'] / best[base]:.3f}  median "
            f"{med['distill'] / med[base]:.3f}"
            "   (target >= 0.95)"
        )
    print(f"ratio hf/distill         best {hf_rate / best['distill']:.3f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
