"""Benchmark: how far a quickstart's headline figures move with the seed and the CPU's instruction set.

    python bench/quickstart_spread.py                                  # the whole quickstart, 3 seeds x 2 ISAs
    python bench/quickstart_spread.py --base runs/quickstart --only sft,eval_student_sft --seeds 0,1,2
    python bench/quickstart_spread.py --base runs/quickstart --from student --isa avx2,avx512 --set sft.epochs=12
    python bench/quickstart_spread.py --aggregate runs/a/runs.json runs/b/runs.json   # one table of both

Each run is ``distill run RECIPE --out DIR --set STEP.seed=SEED ...`` in a process of its own, with the
environment of its instruction-set setting (``--isa``):

- ``native``: nothing set: torch, oneDNN and MKL each pick the best this CPU has;
- ``avx512``: ``ATEN_CPU_CAPABILITY=avx512`` (oneDNN and MKL pick theirs: AVX-512 on a CPU that has it);
- ``avx2``: ``ATEN_CPU_CAPABILITY=avx2``, ``ONEDNN_MAX_CPU_ISA=AVX2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``: the
  kernels an AVX2-only CPU (an AMD Zen 3 laptop or server) runs, emulated on this one;
- ``default``: torch's unvectorised kernels, oneDNN and MKL capped at SSE4.

torch reads ``ATEN_CPU_CAPABILITY`` at import, so each setting needs a process of its own. vLLM's CPU engine
(the teacher's generation, the student's samples, GRPO-free evals) has no switch: it loads its AVX-512 or AVX2
build by the CPU's flags. ``avx2`` and ``default`` make it load the AVX2 build anyway (bench/vllm_avx2/
sitecustomize.py on PYTHONPATH), so those settings run every kernel an AVX2-only CPU would, vLLM's included.

The seed (``--seeds``) is set on every step that initialises, samples or trains (stages student, generate,
train, eval) among those that run; the synthetic problem sets keep theirs (they are the task, not the noise).
``--base RUN`` copies a finished run into each run's directory first, so that ``--from STEP`` (STEP and every
step after it) or ``--only STEP,STEP`` (just those, in order) reuse its teacher traces instead of generating them;
the steps that run are always redone (``--overwrite``), also where the seed is the base's own.

The figures are each eval step's pass@1 (``OUT/STEP/summary.json``: the numbers report.md's eval table and
the README's quickstart table give). It prints, per eval step, the mean and the range over the runs and the
runs themselves, names the machine (reasonkit/hardware.py, as the runs' own reports recorded it: the CPU, the
instruction set torch used, the threads), and writes every run to ``OUT/runs.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Variables each instruction-set setting sets; every one of them that a setting does not name is removed
#: from the run's environment, so the caller's own environment does not leak into a setting.
VLLM_AVX2 = {"REASONKIT_BENCH_VLLM_AVX2": "1"}  # read by bench/vllm_avx2/sitecustomize.py
ISA_ENV = {
    "native": {},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    | VLLM_AVX2,
    "default": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    | VLLM_AVX2,
}
VLLM_SITE = ROOT / "bench" / "vllm_avx2"
ISA_VARS = sorted({name for env in ISA_ENV.values() for name in env})

#: Stages whose steps draw random numbers (a fresh student's weights, sampling, data order): the ones seeded.
SEEDED_STAGES = ("student", "generate", "train", "eval")


def run_env(setting: str, base: dict | None = None) -> dict:
    """The environment of a run under an instruction-set setting."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in ISA_VARS}
    env.update(ISA_ENV[setting])
    if VLLM_AVX2.keys() <= env.keys():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VLLM_SITE), env.get("PYTHONPATH")]))
    return env


def recipe_steps(recipe: Path) -> list[dict]:
    """The recipe's steps, in order: each a dict with at least ``name`` and ``stage``."""
    import yaml

    return yaml.safe_load(recipe.read_text())["steps"]


def steps_that_run(steps: list[dict], start: str | None, only: list[str] | None) -> list[dict]:
    """The steps a run executes: all, those from ``start`` on, or those named in ``only``."""
    names = [step["name"] for step in steps]
    for name in ([start] if start else []) + (only or []):
        if name not in names:
            raise SystemExit(f"no step {name!r} in the recipe (its steps: {', '.join(names)})")
    if only:
        return [step for step in steps if step["name"] in only]
    return steps[names.index(start) :] if start else steps


def seed_overrides(steps: list[dict], seed: int) -> list[str]:
    """``STEP.seed=SEED`` for every step among ``steps`` that samples or trains."""
    return [f"{step['name']}.seed={seed}" for step in steps if step["stage"] in SEEDED_STAGES]


def commands(
    recipe: Path, out: Path, steps: list[dict], sets: list[str], start: str | None, only: list[str] | None
) -> list[list[str]]:
    """The ``distill run`` command lines of one run (one per step with ``--only``)."""
    distill = [str(Path(sys.executable).parent / "distill"), "run", str(recipe), "--out", str(out)]
    flags = [part for item in sets for part in ("--set", item)]
    if only:
        return [distill + ["--only", step["name"], "--overwrite"] + flags for step in steps]
    return [distill + (["--from", start, "--overwrite"] if start else []) + flags]


def read_run(out: Path, eval_steps: list[str], train_steps: list[str]) -> dict:
    """A finished run's figures (pass@1 of each eval step that has a summary) and the machine its reports
    recorded: a train step's report.json where one ran (the kernels training used), else an eval's. Only the
    steps named: a run copied from a base also holds the base's reports, made on the base's settings."""
    figures, hardware = {}, None
    for step in train_steps:
        report = out / step / "report.json"
        if report.is_file() and hardware is None:
            hardware = json.loads(report.read_text()).get("hardware")
    for step in eval_steps:
        summary = out / step / "summary.json"
        if summary.is_file():
            found = json.loads(summary.read_text())
            figures[step] = found["pass@1"]
            hardware = hardware or found.get("protocol", {}).get("hardware")
    return {"figures": figures, "hardware": hardware}


def one_run(args, steps: list[dict], setting: str, seed: int) -> dict:
    """Run the quickstart (or the chosen steps of it) once, under one setting and seed."""
    out = Path(args.out) / f"{setting}_seed{seed}"
    if out.exists():
        shutil.rmtree(out)
    if args.base:
        shutil.copytree(args.base, out, symlinks=True)
    running = steps_that_run(steps, args.start, args.only)
    sets = seed_overrides(running, seed) + list(args.set)
    started = time.monotonic()
    log = (Path(args.out) / f"{setting}_seed{seed}.log").open("w")
    for line in commands(Path(args.recipe), out, running, sets, args.start, args.only):
        done = subprocess.run(line, env=run_env(setting), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        if done.returncode:
            raise SystemExit(f"{' '.join(line)} failed ({done.returncode}): see {log.name}")
    names = {stage: [step["name"] for step in running if step["stage"] == stage] for stage in ("eval", "train")}
    record = {
        "setting": setting,
        "seed": seed,
        "env": ISA_ENV[setting],
        "out": str(out),
        "sets": sets,
        "wall_s": round(time.monotonic() - started, 1),
    }
    return record | read_run(out, names["eval"], names["train"])


def aggregate(runs: list[dict]) -> dict:
    """Per eval step: the number of runs, the mean, the lowest and the highest pass@1."""
    steps = list(dict.fromkeys(step for run in runs for step in run["figures"]))
    spread = {}
    for step in steps:
        values = [run["figures"][step] for run in runs if step in run["figures"]]
        spread[step] = {"n": len(values), "mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    return spread


def machine_line(runs: list[dict]) -> str:
    """The machine(s) the runs were measured on, and the instruction sets torch used."""
    cpus = sorted({(run["hardware"] or {}).get("cpu") or "?" for run in runs})
    used = sorted({(run["hardware"] or {}).get("cpu_capability") or "?" for run in runs})
    threads = sorted({str((run["hardware"] or {}).get("threads") or "?") for run in runs})
    return f"machine: {'; '.join(cpus)}; torch kernels: {', '.join(used)}; threads: {', '.join(threads)}"


def table(runs: list[dict]) -> str:
    """The README's table: mean and range per eval step over the runs, then every run, then the machine."""
    spread = aggregate(runs)
    lines = ["| model | pass@1 mean | range (max - min) | runs |", "|---|---|---|---|"]
    for step, s in spread.items():
        lines.append(
            f"| {step} | {s['mean']:.3f} | {s['min']:.3f}-{s['max']:.3f} ({s['max'] - s['min']:.3f}) | {s['n']} |"
        )
    lines += ["", "| setting | seed | " + " | ".join(spread) + " | wall |", "|---|---|" + "---|" * (len(spread) + 1)]
    for run in runs:
        cells = [f"{run['figures'][step]:.3f}" if step in run["figures"] else "-" for step in spread]
        lines.append(f"| {run['setting']} | {run['seed']} | " + " | ".join(cells) + f" | {run['wall_s']:.0f} s |")
    return "\n".join(lines + ["", machine_line(runs)])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "quickstart.yaml"))
    parser.add_argument("--out", default="runs/quickstart_spread", help="each run's directory goes here")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--isa", default="avx2,avx512", help=f"comma-separated: {', '.join(ISA_ENV)}")
    parser.add_argument("--base", help="a finished run to copy into each run's directory first")
    parser.add_argument("--from", dest="start", metavar="STEP", help="run STEP and every step after it")
    parser.add_argument("--only", type=lambda text: text.split(","), help="run only these steps (comma-separated)")
    parser.add_argument("--set", action="append", default=[], metavar="STEP.KEY=VALUE", help="passed to distill run")
    parser.add_argument("--aggregate", metavar="JSON", nargs="+", help="print the runs.json files' table; run nothing")
    args = parser.parse_args(argv)
    if (args.start or args.only) and not args.base:
        parser.error("--from and --only need --base: a finished run whose earlier steps they reuse")
    unknown = set(args.isa.split(",")) - set(ISA_ENV)
    if unknown:
        parser.error(f"--isa: unknown {', '.join(sorted(unknown))} (known: {', '.join(ISA_ENV)})")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.aggregate:
        print(table([run for path in args.aggregate for run in json.loads(Path(path).read_text())["runs"]]))
        return
    steps = recipe_steps(Path(args.recipe))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    runs = []
    for setting in args.isa.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            runs.append(one_run(args, steps, setting, seed))
            written = {"recipe": args.recipe, "base": args.base, "runs": runs, "spread": aggregate(runs)}
            (Path(args.out) / "runs.json").write_text(json.dumps(written, indent=2))
            print(f"[{setting} seed {seed}] {runs[-1]['figures']} in {runs[-1]['wall_s']:.0f} s", flush=True)
    print(table(runs))


if __name__ == "__main__":
    main()
