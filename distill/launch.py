"""Training on several processes: which process writes, a barrier, and ``launcher: accelerate``.

Two ways to train on the 8 GPUs of a node:

- ``launcher: accelerate`` (a recipe's train step, or ``distill train ... --set launcher=accelerate
  --set num_processes=8 --set accelerate_config=zero3``): this process starts ``accelerate launch``
  as a subprocess, which trains on ``num_processes`` processes; it waits for them and returns the
  report. Their GPU memory is freed when they exit, so a recipe's next step (an eval whose vLLM
  checks the free memory as it starts) finds the GPUs empty.
- by hand, e.g. on each node of a Slurm job: ``accelerate launch --config_file
  recipes/accelerate/zero3.yaml -m reasonkit.distill.command --method sft ...``.

Either way every process runs :func:`reasonkit.distill.train.train`, and only the main process
writes into OUT (clearing it for --overwrite, deleting torn checkpoints, lint.json,
train_config.json, the merge, report.json); the others wait at a barrier wherever they would read
what it writes. The Trainer itself writes checkpoints from the processes that hold their shards.

Shipped accelerate configs, by name (``accelerate_config: zero3``), in recipes/accelerate/:
``ddp`` (each GPU a full copy: LoRA and models that fit), ``fsdp`` (FSDP2, full sharding) and
``zero3`` (DeepSpeed ZeRO-3, open-r1's SFT setup; needs ``pip install deepspeed``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from reasonkit.errors import UserError

#: accelerate configs shipped with reasonkit, by the name a recipe gives them.
CONFIG_DIR = Path(__file__).resolve().parent.parent / "recipes" / "accelerate"
#: Lines the launched main process prints for the launching process to pass on (the rest of the
#: processes' output, library logs included, goes to OUT/launch.log only).
MARK = "[reasonkit] "
LOG = "launch.log"
#: Set in the launched processes' environment: they train in place (``accelerate launch`` with one
#: process sets no LOCAL_RANK).
LAUNCHED = "REASONKIT_LAUNCHED"


# -- inside a launched process -------------------------------------------------------------------
def world_size() -> int:
    """The processes training together (torchrun and accelerate launch set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    """Whether this is the process that writes OUT's files (global rank 0)."""
    return int(os.environ.get("RANK", "0")) == 0


def launched() -> bool:
    """Whether this process was started by torchrun/accelerate launch (so it must not launch again)."""
    return "LOCAL_RANK" in os.environ or os.environ.get(LAUNCHED) == "1"


def barrier(cfg) -> None:
    """Wait until every process gets here; nothing with one process.

    Through accelerate's PartialState, which starts the process group the way the Trainer will
    (gloo on CPU, NCCL on GPUs, DeepSpeed's when accelerate's config asks for it), so the Trainer
    finds it started.
    """
    if world_size() <= 1:
        return
    import torch
    from accelerate import PartialState

    PartialState(cpu=cfg.device == "cpu" or not torch.cuda.is_available()).wait_for_everyone()


# -- the launching process -----------------------------------------------------------------------
def config_file(name_or_path: str | None) -> Path | None:
    """A shipped accelerate config by name (``ddp``, ``fsdp``, ``zero3``) or a YAML file by path.

    >>> config_file("zero3").name
    'zero3.yaml'
    >>> config_file(None) is None
    True
    """
    if not name_or_path:
        return None
    shipped = CONFIG_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    names = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
    raise UserError(f"accelerate_config: {name_or_path}: neither a shipped config ({names}) nor a YAML file")


def run_launched(cfg, say) -> dict:
    """Train ``cfg`` under ``accelerate launch`` in a subprocess; return the report it wrote."""
    processes = cfg.num_processes or _visible_gpus()
    if not processes:
        raise UserError("launcher: accelerate found no GPU; set num_processes (CPU processes then train over gloo)")
    accelerate_config = config_file(cfg.accelerate_config)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="reasonkit-launch-") as tmp:
        settings = Path(tmp) / "train_config.json"
        settings.write_text(json.dumps(dataclasses.asdict(cfg)))  # the same config: the report records the launch
        cmd = launch_command(processes, accelerate_config, settings)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", LAUNCHED: "1"}
        if cfg.threads:
            env["OMP_NUM_THREADS"] = str(cfg.threads)
        say(f"training on {processes} processes under accelerate launch"
            + (f" ({accelerate_config.name})" if accelerate_config else "") + f"; their output: {out / LOG}")
        code, error, tail = _follow(cmd, env, out / LOG, say)
    if error:
        raise UserError(error)
    if code != 0:
        raise UserError(f"{out}: training under accelerate launch failed (exit {code}): {tail or 'no output'}; see {out / LOG}")
    return json.loads((out / "report.json").read_text())


def launch_command(processes: int, accelerate_config: Path | None, settings: Path) -> list[str]:
    """The ``accelerate launch`` command line; a free port, so two runs on one node do not collide.

    >>> launch_command(2, None, Path("s.json"))[3:5]
    ['--multi_gpu', '--num_processes']
    """
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate_config is not None:
        cmd += ["--config_file", str(accelerate_config)]
    elif processes > 1:
        cmd += ["--multi_gpu"]  # plain DDP: torchrun's processes (on a CPU-only machine, gloo)
    # --mixed_precision no: the train config decides (its bf16 overrides this in TrainingArguments,
    # but a config file's bf16 would otherwise turn autocast on for a run that set bf16=false)
    cmd += ["--num_processes", str(processes), "--num_machines", "1", "--main_process_port", str(_free_port()),
            "--mixed_precision", "no"]
    if accelerate_config is None:
        cmd += ["--dynamo_backend", "no"]
    return [*cmd, "-m", "reasonkit.distill.launch", str(settings)]


def _follow(cmd: list[str], env: dict, log_path: Path, say) -> tuple[int, str | None, str]:
    """Run ``cmd``, all its output appended to ``log_path``; pass the main process's lines to ``say``.

    Returns (exit code, the first error a process reported, the last line of output).
    """
    error, tail = None, ""
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                preexec_fn=_die_with_parent)
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.strip():
                    tail = line.strip()[-300:]
                if line.startswith(MARK):
                    message = line[len(MARK):].rstrip("\n")
                    if message.startswith("error: "):
                        error = error or message[len("error: "):]
                    else:
                        say(message)
            return proc.wait(), error, tail
        finally:
            if proc.poll() is None:  # interrupted: torchrun passes SIGTERM on to the processes
                proc.terminate()
                proc.wait()


def _die_with_parent() -> None:
    """In the launcher's child: receive SIGTERM if this process dies (Linux), so a killed
    ``distill run`` leaves no orphaned training processes holding the GPUs."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> None:
    """Each launched process: train the config in the JSON file ``argv[0]``."""
    from reasonkit.config import from_dict
    from reasonkit.distill.config import TrainConfig
    from reasonkit.distill.train import train

    (path,) = argv if argv is not None else sys.argv[1:]
    main_process = is_main()

    def say(message: str) -> None:
        if main_process:
            print(MARK + message, file=sys.stderr, flush=True)

    try:
        cfg = from_dict(TrainConfig, json.loads(Path(path).read_text()), "train")
        train(cfg, progress=False, log=say)
    except UserError as e:
        print(f"{MARK}error: {e}", file=sys.stderr, flush=True)  # every process: any may be the one that failed
        sys.exit(e.exit_code)


if __name__ == "__main__":  # accelerate launch -m reasonkit.distill.launch SETTINGS.json
    main()
