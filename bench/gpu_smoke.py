"""GPU smoke check (issue 35 item 8): the embedded models through train sft -> dpo -> grpo -> eval -> score on one
CUDA GPU in bf16, each step in a process of its own, with its wall time, its peak GPU memory and the GPU memory free
when it starts (so the free memory after a step is the next line's). Target: under 8 minutes on an H100.

The models are the quickstart's (recipes/assets/teacher: a 1.1M-parameter Llama); the data is built here, without a
teacher run: problems from the synth stage (GRPO's prompts, eval's held-out problems) and sft/prefs tables of their
worked solutions (recipes/tasks/train_sets.py). Steps: sft (full) on the teacher -> dpo (LoRA) on the SFT model ->
grpo (full, transformers generation: use_vllm false) on the SFT model -> eval of the GRPO model (transformers
backend) -> rm (a reward model, for score to load) -> score of eval's generations with it. Train steps ask for
``attn_implementation: auto`` and print the attention they used.

On the GPU machine (Python 3.12 with torch, transformers, peft and accelerate, no network) the script first makes
sure of what the steps import beyond those (NEEDED below: found with ``--imports FILE``, where every step appends the
distributions it imported, in a venv holding only torch, transformers, peft and accelerate): whatever is missing is
installed from the wheels in bench/gpu_wheels (``pip install --no-index --no-deps --target`` its site-packages
folder, put on the steps' path: the machine's Python is not changed), and what is neither there nor in the folder
stops the run at once, listed with the command that fetches it. The wheels are prepared beforehand on a machine with
the project's .venv and PyPI (bench/gpu_wheels/ is ignored by git):

    .venv/bin/python -m pip download --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --no-deps -d bench/gpu_wheels \
        trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 click==8.5.1 rich==15.0.0 \
        markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 python-dateutil==4.0.0 tzdata==2026.6 \
        pandas==3.1.1 matplotlib==3.11.2 contourpy==1.3.3 cycler==0.12.1 fonttools==4.69.1 kiwisolver==1.5.1 \
        pillow==13.0.0 pyparsing==3.3.3 pyarrow==26.0.1

Measured 2026-12-07 (du -sb): 92.8 MiB in all, more than the 64 MiB a device run carries: pyarrow 52.5, pandas 11.5,
matplotlib with its five dependencies 24.5 (reasonkit draws loss.png and pass_at_k.png with it), the first 12 4.3.
So carry only what the GPU machine lacks: ``python bench/gpu_smoke.py --missing`` there lists it (seconds), or, not
knowing, leave pyarrow out (40.3 MiB): if it is missing too, the run stops in seconds saying so. Then, there, from the
repository root:

    python bench/gpu_smoke.py                        # cuda, bf16: one line a step, then the total
    python bench/gpu_smoke.py --device cpu --tiny    # the same chain on a CPU in fp32, tiny step counts
                                                     # (tests/bench/test_gpu_smoke.py runs it here)

reasonkit itself is imported from this checkout (a link named reasonkit to the repository root, on PYTHONPATH, where
it is not installed), so nothing of it is installed there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEACHER = str(ROOT / "recipes" / "assets" / "teacher")
STEPS = ("sft", "dpo", "grpo", "eval", "rm", "score")
GiB = 1 << 30
WHEELS = ROOT / "bench" / "gpu_wheels"
#: What the steps import beyond torch, transformers, peft, accelerate and their own dependencies: module -> the
#: distribution that provides it (the header's wheel list, in the same order).
NEEDED = {
    "trl": "trl",
    "datasets": "datasets",
    "dill": "dill",
    "multiprocess": "multiprocess",
    "xxhash": "xxhash",
    "click": "click",
    "rich": "rich",
    "markdown_it": "markdown-it-py",
    "mdurl": "mdurl",
    "pygments": "pygments",
    "dateutil": "python-dateutil",
    "tzdata": "tzdata",
    "pandas": "pandas",
    "matplotlib": "matplotlib",
    "contourpy": "contourpy",
    "cycler": "cycler",
    "fontTools": "fonttools",
    "kiwisolver": "kiwisolver",
    "PIL": "pillow",
    "pyparsing": "pyparsing",
    "pyarrow": "pyarrow",
}


def sizes(tiny: bool) -> dict:
    """Step counts and lengths: ``tiny`` for a CPU test here (about a minute), else an H100 run of a few minutes."""
    if tiny:
        return dict(
            sft_rows=32,
            prefs_rows=16,
            rl_rows=8,
            eval_rows=4,
            sft_steps=4,
            dpo_steps=2,
            grpo_steps=2,
            rm_steps=2,
            batch=8,
            k=2,
            completion=32,
            generations=4,
        )
    return dict(
        sft_rows=2000,
        prefs_rows=512,
        rl_rows=256,
        eval_rows=60,
        sft_steps=300,
        dpo_steps=60,
        grpo_steps=20,
        rm_steps=60,
        batch=32,
        k=4,
        completion=192,
        generations=8,
    )


# long: a table of each smoke step's stage config, one branch a step
def step_stage_config(step: str, work: Path, device: str, n: dict) -> tuple[str, dict]:
    """The stage a step runs and its config, as a recipe's ``with:`` would give it."""
    cuda = device == "cuda"
    train = dict(
        device=device,
        bf16=cuda,
        threads=None if cuda else 2,
        warmup=0,
        max_length=256,
        save_steps=10_000,
        attn_implementation="auto",
        overwrite=True,
    )
    data = work / "data"
    if step == "sft":
        return "train", dict(
            train,
            method="sft",
            student=TEACHER,
            data=str(data / "sft"),
            out=str(work / "sft"),
            full=True,
            max_steps=n["sft_steps"],
            batch_size=n["batch"],
            lr=1e-4,
        )
    if step == "dpo":
        return "train", dict(
            train,
            method="dpo",
            student=str(work / "sft" / "model"),
            data=str(data / "prefs"),
            out=str(work / "dpo"),
            lora_r=16,
            lora_alpha=32,
            max_steps=n["dpo_steps"],
            batch_size=n["batch"] // 2,
            lr=5e-5,
        )
    if step == "grpo":
        return "train", dict(
            train,
            method="grpo",
            student=str(work / "sft" / "model"),
            data=str(data / "rl"),
            out=str(work / "grpo"),
            full=True,
            use_vllm=False,
            num_generations=n["generations"],
            batch_size=2 * n["generations"],
            max_steps=n["grpo_steps"],
            lr=2e-5,
            temperature=0.6,
            max_completion_length=n["completion"],
            rewards={"accuracy": 1.0, "format": 0.2},
        )
    if step == "rm":
        return "train", dict(
            train,
            method="rm",
            student=TEACHER,
            data=str(data / "prefs"),
            out=str(work / "rm"),
            full=True,
            max_steps=n["rm_steps"],
            batch_size=n["batch"] // 2,
            lr=1e-4,
        )
    dtype = "bfloat16" if cuda else "float32"
    if step == "eval":
        return "eval", dict(
            model=str(work / "grpo" / "model"),
            data=str(data / "eval"),
            out=str(work / "eval"),
            backend="hf",
            k=n["k"],
            max_tokens=n["completion"],
            dtype=dtype,
            verifier="int",
            batch_size=16,
            overwrite=True,
        )
    return "score", dict(
        input=str(work / "eval" / "generations"),
        model=str(work / "rm" / "model"),
        out=str(work / "score"),
        dtype=dtype,
        overwrite=True,
    )


def build_data(work: Path, n: dict) -> None:
    """Problems from the synth stage and sft/prefs tables of worked solutions, in the teacher's task (aime)."""
    from reasonkit.recipes.tasks.synth import SynthConfig, run_synth
    from reasonkit.recipes.tasks.train_sets import prefs_table, sft_table, write_stage

    data = work / "data"
    for name, split, seed in (("rl", "train", 2), ("eval", "test", 1)):  # eval's problems are held out of training
        run_synth(
            SynthConfig(
                out=str(data / name), n=n[f"{name}_rows"], variant="aime", split=split, seed=seed, overwrite=True
            )
        )
    write_stage(data / "sft", "sft", sft_table(n["sft_rows"], seed=0, variant="aime"))
    write_stage(data / "prefs", "prefs", prefs_table(n["prefs_rows"], seed=3, variant="aime"))


def child(step: str, work: Path, device: str, tiny: bool, imports: str | None) -> None:
    """One step in this process: the GPU's free memory before anything loads, the step, its peak memory."""
    import torch

    cuda = device == "cuda"
    free, total = torch.cuda.mem_get_info() if cuda else (None, None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    from reasonkit.config import from_dict
    from reasonkit.stages import STAGES

    stage, values = step_stage_config(step, work, device, sizes(tiny))
    spec = STAGES[stage]
    started = time.perf_counter()
    result = spec.run_function()(from_dict(spec.config_class(), values))
    metrics = {
        "step": step,
        "pid": os.getpid(),
        "seconds_in_step": round(time.perf_counter() - started, 2),
        "free_at_start": free,
        "total": total,
        "peak_allocated": torch.cuda.max_memory_allocated() if cuda else None,
        **summary(step, result),
    }
    (work / "metrics" / f"{step}.json").write_text(json.dumps(metrics))
    if imports:
        record_imports(imports)


def summary(step: str, result) -> dict:
    """What the step's report says in one line: train steps' steps, last loss and attention; eval's pass@1."""
    result = result if isinstance(result, dict) else {}
    if step in ("sft", "dpo", "grpo", "rm"):
        loss = result.get("loss_final")
        return {
            "note": f"{result.get('steps')} steps, loss {loss if loss is None else round(loss, 4)}, "
            f"attention {result.get('attn_implementation')}"
        }
    if step == "eval":
        metrics = result.get("metrics", result)
        return {"note": f"pass@1 {metrics.get('pass@1')}"}
    return {"note": f"{result.get('rows', result.get('scored', '?'))} rows scored"}


def record_imports(path: str) -> None:
    """Append the distributions this process imported (how the wheel list in the header was found)."""
    from importlib.metadata import packages_distributions

    names = packages_distributions()
    seen = {d for m in list(sys.modules) for d in names.get(m.split(".")[0], [])}
    with open(path, "a") as f:
        f.write("\n".join(sorted(seen)) + "\n")


def missing() -> list[str]:
    """The distributions of NEEDED that do not import here (found without importing them)."""
    import importlib.util

    return [dist for module, dist in NEEDED.items() if importlib.util.find_spec(module) is None]


def site_of(wheels: Path) -> Path:
    """Where the missing wheels are installed: a folder of their own on the path, so the machine's own Python
    (perhaps one pip may not change, PEP 668) is left as it is. Named site-packages because dill (datasets'
    fingerprints) pickles by reference only classes of modules under a path so named or under sys.prefix: from any
    other folder pyarrow's MonthDayNano fails to pickle."""
    return wheels / "site-packages"


def install_missing(wheels: Path = WHEELS) -> str | None:
    """Install what is missing from ``wheels`` (offline, no dependency resolution: the list is complete); None when
    everything imports afterwards, else what is still missing and the command that fetches it."""
    site = site_of(wheels)
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))  # what an earlier run installed counts as there
    absent = missing()
    have = {w.name.split("-")[0].lower().replace("_", "-"): w for w in wheels.glob("*.whl")} if wheels.is_dir() else {}
    found = [str(have[d]) for d in absent if d in have]
    if found:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q", "--target", str(site), *found],
            check=True,
        )
        import importlib

        importlib.invalidate_caches()
        absent = missing()
    if not absent:
        return None
    return (
        f"missing here: {', '.join(absent)}; fetch their wheels where PyPI is reachable (the versions in this "
        f"script's header): python -m pip download --only-binary=:all: --python-version 3.12 --platform "
        f"manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --no-deps -d bench/gpu_wheels {' '.join(absent)}"
    )


def importable_env(wheels: Path) -> dict:
    """The children's environment: the wheels' folder on the path, and reasonkit importable from this checkout even
    where it is not installed."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    paths = [str(site_of(wheels))] if site_of(wheels).is_dir() else []
    try:
        import reasonkit  # noqa: F401
    except ImportError:
        shim = Path(tempfile.mkdtemp(prefix="reasonkit-path-"))
        (shim / "reasonkit").symlink_to(ROOT)
        paths.insert(0, str(shim))
        sys.path.insert(0, str(shim))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, env.get("PYTHONPATH")]))
    return env


def versions() -> str:
    """The versions the steps run with: the machine's own and the wheels'."""
    import importlib.metadata

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "missing"

    names = ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "huggingface_hub")
    return ", ".join(f"{d} {version(d)}" for d in names)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny step counts (a CPU test)")
    parser.add_argument("--work", help="where the steps write (default: a new temporary folder)")
    parser.add_argument("--imports", help="append each step's imported distributions to this file")
    parser.add_argument("--missing", action="store_true", help="list what would have to be installed, and stop")
    parser.add_argument("--wheels", default=str(WHEELS), help="where the wheels of what is missing are (header)")
    parser.add_argument("--child", choices=STEPS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="gpu-smoke-"))
    if args.child:
        child(args.child, work, args.device, args.tiny, args.imports)
        return 0
    if args.missing:
        sys.path.insert(0, str(site_of(Path(args.wheels))))
        print(f"gpu-smoke: missing here: {', '.join(missing()) or 'nothing'}")
        return 0
    problem = install_missing(Path(args.wheels))
    if problem:
        print(f"gpu-smoke: {problem}")
        return 2
    env = importable_env(Path(args.wheels))
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU run stays off any GPU
    else:
        env.setdefault("CUDA_VISIBLE_DEVICES", "0")  # one GPU: train steps stay in their process
    print(f"gpu-smoke: {args.device}{' (tiny)' if args.tiny else ''} in {work}; {versions()}", flush=True)
    (work / "metrics").mkdir(parents=True, exist_ok=True)
    build_data(work, sizes(args.tiny))
    return run_steps(work, args, env)


def run_steps(work: Path, args, env: dict) -> int:
    started = time.perf_counter()
    for step in STEPS:
        t0 = time.perf_counter()
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            step,
            "--work",
            str(work),
            "--device",
            args.device,
            *(["--tiny"] if args.tiny else []),
            *(["--imports", args.imports] if args.imports else []),
        ]
        log = work / f"{step}.log"
        with open(log, "w") as out:
            done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            tail = log.read_text().splitlines()[-25:]
            print(f"gpu-smoke: {step} failed (exit {done.returncode}) after {wall:.1f} s; {log}:\n" + "\n".join(tail))
            return 1
        print(line(json.loads((work / "metrics" / f"{step}.json").read_text()), wall), flush=True)
    after = free_now(args.device, env)
    print(
        f"gpu-smoke: all {len(STEPS)} steps in {time.perf_counter() - started:.1f} s"
        + (f"; free after the last step: {after}" if after else "")
    )
    return 0


def line(m: dict, wall: float) -> str:
    """One step's figures: wall time (process start to exit), peak allocated, free when it started."""
    if m["total"]:
        memory = (
            f"peak {m['peak_allocated'] / GiB:.2f} GiB | free at start {m['free_at_start'] / GiB:.2f} GiB "
            f"of {m['total'] / GiB:.2f} GiB"
        )
    else:
        memory = "peak n/a (cpu) | free at start n/a (cpu)"
    return f"{m['step']:<6} wall {wall:6.1f} s (in step {m['seconds_in_step']:.1f} s) | {memory} | {m['note']}"


def free_now(device: str, env: dict) -> str | None:
    """The GPU's free memory seen by a fresh process after the last step (None on a CPU)."""
    if device != "cuda":
        return None
    code = "import torch; f, t = torch.cuda.mem_get_info(); print(f'{f / 2**30:.2f} GiB of {t / 2**30:.2f} GiB')"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
