"""Benchmark: `distill train --method grpo` against a plain TRL GRPOTrainer script, same model, prompts and G.

    python bench/grpo.py                          # 3 comparisons x 2 rounds of 12 steps, the embedded teacher (~5 min)
    python bench/grpo.py --modes full --repeats 4  # the same training only, more rounds

- ``ours``: the command as a user runs it, ``distill train --method grpo --student M --data prompts.jsonl
  --max-steps S --num-generations G --batch-size B --set threads=T`` (its defaults: LoRA r=16 on every
  linear layer, accuracy 1.0 + format 0.2 rewards, CPU fp32 without gradient checkpointing, rollouts
  written to OUT/rollouts, lint, report.md and PNG curves), in its own process;
- ``baseline``: a plain TRL script (``--one baseline`` below): ``GRPOTrainer(model=M, reward_funcs=...,
  args=GRPOConfig(...))`` with TRL's defaults (full fine-tuning, lr 1e-6, beta 0, loss dapo, seed 42)
  except what a CPU wants: ``use_cpu=True``, ``bf16=False`` (TRL's bf16 default runs on a CPU under
  bf16 autocast, slower: 4.6 against 4.0 CPU-s for 4 steps here, and ours trains in fp32 on a CPU) and
  ``gradient_checkpointing=False`` unless ``--baseline-checkpointing`` (TRL's default; on a CPU it only
  recomputes each forward, a choice that would slow the baseline for nothing). Its rewards are
  reasonkit's, imported as the README shows, so both pay the same for them.

Three comparisons (``--modes``): ``defaults``, each as it comes (ours LoRA, lr 1e-5, seed 0; the
baseline every weight); ``full``, the same training (ours ``--full --lr 1e-6 --seed 42``: TRL's
defaults), so the ratio is the cost of what reasonkit adds (rollouts, lint, report, callbacks); ``lora``,
the same again with ours' adapter given to the baseline (peft ``LoraConfig``, r 16, alpha 32, dropout
0.05, every linear layer).

Same model (the embedded 1.1M teacher, recipes/assets/teacher, or ``--model``), same prompts (the
synthetic task's ``aime`` problems, recipes/tasks/math.py, rendered ``problem + "\\n\\n" + instruction`` by
both), same G and completions per step, same torch threads. Both trainers are timed the same way: TRL's
own ``step_time`` per optimizer step, and the wall time of three of TRL's methods, wrapped (ours in
distill/rl/grpo.py, the baseline's in the subclass below): ``_generate`` (sampling), ``_calculate_rewards``
(the reward functions), ``_generate_and_score_completions`` (both, plus the log-prob passes); the rest of
a step is the loss's forward and backward and the optimizer. Rollout tokens are the completion tokens
sampled (TRL's ``completions/mean_length`` x completions a step); rates are over TRL's ``train_runtime``
(the whole training loop: our rollout writes and callbacks count against us). The two alternate order
each round (``--repeats``), so a busy machine slows both alike; the ratio ours/baseline of each round is
printed, then the median and the spread.

Measured 2026-12-04 (2 cores shared with other helpers' jobs; teacher, G 8, 8 completions a step, 12 steps,
1 thread; completions ~135 tokens; ``--repeats 3``, two runs of the default command, medians of 3 rounds).
Ours samples from the policy itself (distill/sampling.py ``sampling_policy``): in eval mode, the LoRA adapter
merged into the fp32 weights and unmerged after, as TRL's vLLM path samples; TRL's transformers path
samples in train mode, the adapter unmerged with its dropout on (0.74 against 0.45 CPU-s a ``generate``).

- ``defaults`` (ours LoRA, the baseline every weight): 0.84x rollout tokens/s and steps/min on the quieter
  run (0.80-0.85), 0.70x on the busier one (0.64-0.98); before the sampling change 0.46-0.79x. Below 1.0:
  ours' generation is now within ~10% of the full model's (0.40 against 0.36 s a step; peft's wrappers
  still cost ~0.04 CPU-s a generate when merged), but LoRA's training forward and backward cost more than
  full fine-tuning's at this size (0.24 against 0.18 s a step: 28 extra dropout + two-matmul branches on
  1.1M weights, and nothing saved). A tiny CPU student trains GRPO fastest with ``--full``.
- ``full`` (the same training): 0.95x (0.89-1.01) and 0.88x (0.83-0.96): at par within this machine's
  noise (it moved identical runs by 20% between minutes); ours 0.55-0.74 s a step.
- ``lora`` (the same adapter): 1.23x (1.15-1.40): the same training, sampled merged and without dropout.
- Where a step goes (both alike): generation 62-75%, the loss's forward, backward and optimizer 26-35%,
  log-prob passes 0 (num_iterations 1: TRL computes no old log-probs), rewards 1.0-1.4 ms a step (median),
  0.15-0.19% of a step against the 2% target (the first non-integer answer starts math-verify's pool
  once, ~1 s); outside the steps ~1% (ours: rollouts, callbacks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REWARDS = {"accuracy": 1.0, "format": 0.2}  # ours' defaults (distill/config.py DEFAULT_REWARDS)
MAX_COMPLETION = (
    256  # ours' default max_completion_length, given to both (TRL's is 512; completions here end near 135)
)
MODES = ("defaults", "full", "lora")
TRL_LR, TRL_SEED = 1e-6, 42  # GRPOConfig's defaults, given to ours in the full and lora modes


# -- the baseline: a plain TRL script ------------------------------------------------------------
# long: a benchmark's child process: TRL's trainer set up and timed as the measured run is, in one piece
def baseline(args) -> None:
    """Child process: TRL's GRPOTrainer with its defaults (CPU-legal), timed as distill/rl/grpo.py times ours."""
    import datasets
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from reasonkit.recipes.tasks import math as task
    from reasonkit.reward.functions import close, make_rewards

    torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines()]
    dataset = datasets.Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": task.user_content(r["problem"])}], "answer": r["answer"]}
            for r in rows
        ]
    )
    funcs, weights = make_rewards(REWARDS, max_completion_length=MAX_COMPLETION)

    class Timed(GRPOTrainer):  # the same three wrappers as distill/rl/grpo.py's RolloutGRPOTrainer, nothing else
        def _timed(self, what, start):
            self._metrics["train"][f"time/{what}"].append(time.perf_counter() - start)

        def _generate(self, prompts):
            start = time.perf_counter()
            out = super()._generate(prompts)
            self._timed("generate", start)
            return out

        def _calculate_rewards(self, *a, **kw):
            start = time.perf_counter()
            out = super()._calculate_rewards(*a, **kw)
            self._timed("reward", start)
            return out

        def _generate_and_score_completions(self, inputs):
            start = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self._timed("score", start)
            return out

    peft = None
    if args.mode == "lora":  # ours' adapter (distill/config.py: r 16, alpha 32, dropout 0.05, every linear layer)
        from peft import LoraConfig

        peft = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", task_type="CAUSAL_LM")
    config = GRPOConfig(
        output_dir=args.out,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=args.baseline_checkpointing,
        num_generations=args.group,
        per_device_train_batch_size=args.batch,
        max_steps=args.steps,
        max_completion_length=MAX_COMPLETION,
        reward_weights=weights,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )

    class CPU(
        TrainerCallback
    ):  # the training loop's CPU seconds, over the window ours' Monitor counts (distill/report.py)
        def on_train_begin(self, *a, **kw):
            self.cpu_s = -time.process_time()

        def on_train_end(self, *a, **kw):
            self.cpu_s += time.process_time()

    cpu = CPU()
    trainer = Timed(
        model=args.model, reward_funcs=funcs, args=config, train_dataset=dataset, peft_config=peft, callbacks=[cpu]
    )
    result = trainer.train()
    close()
    logs = [r for r in trainer.state.log_history if "step_time" in r]
    steps = [
        {
            "step_s": r["step_time"],
            "generate_s": r["time/generate"],
            "reward_s": r["time/reward"],
            "score_s": r["time/score"],
            "completion_length": r["completions/mean_length"],
        }
        for r in logs
    ]
    print("RESULT " + json.dumps({"runtime_s": result.metrics["train_runtime"], "cpu_s": cpu.cpu_s, "steps": steps}))


# -- ours: the command --------------------------------------------------------------------------
def ours_command(args, out: Path) -> list[str]:
    distill = Path(sys.executable).with_name("distill")
    return [
        str(distill),
        "train",
        "--method",
        "grpo",
        "--student",
        args.model,
        "--data",
        args.data,
        "--out",
        str(out),
        "--max-steps",
        str(args.steps),
        "--num-generations",
        str(args.group),
        "--batch-size",
        str(args.batch),
        "--max-completion-length",
        str(MAX_COMPLETION),
        "--set",
        f"threads={args.threads}",
        "--set",
        "save_steps=100000",
    ]


def ours_result(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    steps = [
        {k: r[k] for k in ("step_s", "generate_s", "reward_s", "score_s", "completion_length")}
        for r in report["history"]
    ]
    return {"runtime_s": report["train_runtime_s"], "cpu_s": report["train_cpu_s"], "steps": steps}


def run(contender: str, args, work: Path, i: int) -> dict:
    out = work / f"{args.mode}-{contender}-{i}"
    if contender == "ours":
        cmd = ours_command(args, out)
        if args.mode != "defaults":  # the same training as the baseline: TRL's learning rate and seed
            cmd += ["--lr", str(TRL_LR), "--seed", str(TRL_SEED)] + ["--full"] * (args.mode == "full")
    else:
        cmd = [
            sys.executable,
            __file__,
            "--one",
            "baseline",
            "--model",
            args.model,
            "--data",
            args.data,
            "--out",
            str(out),
            "--steps",
            str(args.steps),
            "--group",
            str(args.group),
            "--batch",
            str(args.batch),
            "--threads",
            str(args.threads),
        ]
        cmd += ["--mode", args.mode] + ["--baseline-checkpointing"] * args.baseline_checkpointing
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"{contender} failed ({' '.join(cmd)}):\n{proc.stderr[-3000:]}")
    if contender == "ours":
        r = ours_result(out)
    else:
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
        r = json.loads(line[len("RESULT ") :])
    return summarize(r, args, wall)


def summarize(r: dict, args, wall: float) -> dict:
    """Rates and where the time went, from one run's per-step records."""
    steps = r["steps"]
    total = {k: sum(s[k] for s in steps) for k in ("step_s", "generate_s", "reward_s", "score_s")}
    tokens = sum(s["completion_length"] for s in steps) * args.batch  # completions a step (grad_accum 1)
    return {
        "steps": len(steps),
        "tokens": tokens,
        "runtime_s": r["runtime_s"],
        "cpu_s": r["cpu_s"],
        "process_s": wall,
        "tokens_per_s": tokens / r["runtime_s"],
        "tokens_per_cpu_s": tokens / r["cpu_s"],
        "steps_per_min": 60 * len(steps) / r["runtime_s"],
        "mean_length": tokens / (len(steps) * args.batch),
        "step_s": total["step_s"] / len(steps),
        "share": {
            "generate": total["generate_s"] / total["step_s"],
            "reward": total["reward_s"] / total["step_s"],
            "logprobs": (total["score_s"] - total["generate_s"] - total["reward_s"]) / total["step_s"],
            "loss+backward+optimizer": (total["step_s"] - total["score_s"]) / total["step_s"],
            "outside steps": max(0.0, r["runtime_s"] - total["step_s"]) / r["runtime_s"],
        },
        # per step: the median, since the first non-integer answer starts math-verify's pool once (~1 s)
        "reward_ms": statistics.median(s["reward_s"] for s in steps) * 1000,
        "reward_step_share": statistics.median(s["reward_s"] / s["step_s"] for s in steps),
        "reward_max_ms": max(s["reward_s"] for s in steps) * 1000,
    }


def line(name: str, i: int, r: dict) -> str:
    share = ", ".join(f"{k} {v:.0%}" for k, v in r["share"].items())
    return (
        f"  {name:8s} round {i}: {r['tokens_per_s']:6.1f} rollout tokens/s, {r['steps_per_min']:5.1f} steps/min "
        f"({r['steps']} steps in {r['runtime_s']:.1f} s, {r['step_s']:.2f} s a step, mean completion "
        f"{r['mean_length']:.0f} tokens; process {r['process_s']:.1f} s); {r['tokens_per_cpu_s']:.0f} tokens/CPU-s; "
        f"step: {share}; rewards {r['reward_ms']:.1f} ms a step (median; slowest {r['reward_max_ms']:.0f} ms)"
    )


def spread(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):.2f}x (min {min(values):.2f}, max {max(values):.2f}, {len(values)} rounds)"
    )


def compare(args, work: Path) -> dict:
    """One mode: ours and the baseline alternating for ``--repeats`` rounds; prints each run and the ratios."""
    label = {
        "defaults": "each with its defaults: ours LoRA r 16, the baseline every weight",
        "full": "every weight (ours --full; TRL's default)",
        "lora": "LoRA r 16 (ours' default; the baseline given the same peft config)",
    }
    print(f"{args.mode}: {label[args.mode]}", flush=True)
    results: dict[str, list[dict]] = {"ours": [], "baseline": []}
    for i in range(args.repeats):
        for contender in ("ours", "baseline") if i % 2 == 0 else ("baseline", "ours"):
            r = run(contender, args, work, i)
            results[contender].append(r)
            print(line(contender, i, r), flush=True)
    ratios = {}
    for key, what in (
        ("tokens_per_s", "rollout tokens/s"),
        ("steps_per_min", "steps/min"),
        ("tokens_per_cpu_s", "tokens/CPU-s"),
    ):
        ratios[key] = [o[key] / b[key] for o, b in zip(results["ours"], results["baseline"])]
        best = max(r[key] for r in results["ours"]) / max(r[key] for r in results["baseline"])
        print(
            f"  {args.mode} ours/baseline {what:16s}: {spread(ratios[key])}; best run / best run {best:.2f}x",
            flush=True,
        )
    ours = results["ours"]
    print(
        f"  {args.mode} ours' rewards: {statistics.median(r['reward_ms'] for r in ours):.1f} ms a step, "
        f"{statistics.median(r['reward_step_share'] for r in ours):.2%} of a step (median; target < 2%)",
        flush=True,
    )
    return ratios


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--group", type=int, default=8, help="G, completions per prompt (TRL's default 8, ours too)")
    p.add_argument(
        "--batch", type=int, default=8, help="completions a step (TRL's per_device_train_batch_size default 8)"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--modes",
        default="defaults,full,lora",
        help="what is trained: defaults (each its own), full (every weight, both), lora (the same adapter, both)",
    )
    p.add_argument("--model", default=str(Path(__file__).resolve().parent.parent / "recipes" / "assets" / "teacher"))
    p.add_argument(
        "--baseline-checkpointing", action="store_true", help="keep TRL's gradient_checkpointing=True default"
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (runs, reports, rollouts)")
    p.add_argument("--one", choices=["baseline"], help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=MODES, default="full", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return baseline(args)

    from reasonkit.recipes.tasks import math as task

    work = Path(tempfile.mkdtemp(prefix="bench-grpo-"))
    prompts = args.steps * args.batch // args.group  # one pass: every step sees new prompts
    problems = task.make_problems(prompts, seed=0, variant="aime")
    args.data = str(work / "prompts.jsonl")
    Path(args.data).write_text(
        "".join(json.dumps({"id": r["id"], "problem": r["problem"], "answer": r["answer"]}) + "\n" for r in problems)
    )
    print(
        f"model {args.model}; {prompts} prompts (synthetic aime), G {args.group}, {args.batch} completions a step, "
        f"{args.steps} steps, {args.threads} thread(s); baseline: TRL's defaults, use_cpu, fp32, gradient "
        "checkpointing "
        f"{'on' if args.baseline_checkpointing else 'off'}; work dir {work}",
        flush=True,
    )
    for mode in args.modes.split(","):
        args.mode = mode
        compare(args, work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
