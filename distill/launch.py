"""Training on several processes: which process writes, a barrier, and ``launcher: accelerate``.

Two ways to train on the 8 GPUs of a node:

- ``launcher: accelerate`` (a recipe's train step, or ``distill train ... --set launcher=accelerate
  --set num_processes=8 --set accelerate_config=zero3``): this process starts ``accelerate launch``
  as a subprocess, which trains on ``num_processes`` processes; it waits for them and returns the
  report. Their GPU memory is freed when they exit, so a recipe's next step (an eval whose vLLM
  checks the free memory as it starts) finds the GPUs empty.
- on several machines (``num_machines: 2``): the same command on each machine (a Slurm job's
  ``srun``, one task a node), each starting ``accelerate launch`` with its machine rank and the
  main machine's address and port: given (``machine_rank``, ``main_process_ip``,
  ``main_process_port``) or read from Slurm's environment (:func:`machines`). ``num_processes``
  counts every machine's processes, as accelerate does; OUT must be on storage every machine mounts
  (ZeRO-3 checkpoints are written by every process). ``zero3-multinode`` is the shipped config.

Either way every process runs :func:`reasonkit.distill.train.train`, and only the main process
writes into OUT (clearing it for --overwrite, deleting torn checkpoints, lint.json,
train_config.json, the merge, report.json); the others wait at a barrier wherever they would read
what it writes. The Trainer itself writes checkpoints from the processes that hold their shards.

Shipped accelerate configs, by name (``accelerate_config: zero3``), in recipes/accelerate/:
``ddp`` (each GPU a full copy: LoRA and models that fit), ``fsdp`` (FSDP2, full sharding) and
``zero3`` (DeepSpeed ZeRO-3, open-r1's SFT setup; needs ``pip install deepspeed``), ``zero3-multinode``
(the same over 2 nodes of 8 GPUs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
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
#: The main process's plain progress lines (reasonkit/ticker.py): to the launching process's stderr, always, even
#: where its caller passes no ``say`` (a train step inside ``distill run``), so a job's log shows training move.
PROGRESS_MARK = "[reasonkit progress] "
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


# -- where a train step trains -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a train step trains: how many processes, on which GPUs, with which split of the global batch."""

    processes: int  # every machine's
    launch: bool  # started under accelerate launch (False: this process trains)
    gpus: tuple[int, ...] | None  # indices among this process's visible GPUs the processes see; None: all of them
    batch_size: int  # per device
    grad_accum: int
    visible: int  # the GPUs this machine sees

    def describe(self, cfg) -> str:
        """``8 processes under accelerate launch on GPUs 0-7, 1 x 2 accumulation a device (global batch 16)``."""
        if not self.launch:
            where = "this process" + (" on its one GPU" if self.visible == 1 else "" if self.visible else " (no GPU)")
        else:
            where = f"{self.processes} process{'es' if self.processes > 1 else ''} under accelerate launch"
            shown = self.gpus if self.gpus is not None else tuple(range(self.visible))
            gpus = f"GPU{'s' if len(shown) > 1 else ''} {_ranges(shown)}" if shown else ""
            if cfg.num_machines > 1:
                where += f" ({cfg.num_machines} machines" + (f", {gpus} of each)" if gpus else ")")
            elif gpus:
                where += f" on {gpus}"
        split = f"{self.batch_size} x {self.grad_accum} accumulation a device"
        return f"{where}, {split} (global batch {self.batch_size * self.grad_accum * self.processes})"


def layout(cfg, visible: int) -> Layout:
    """Where ``cfg`` trains on a machine that sees ``visible`` CUDA GPUs (0: none, or ``device: cpu``).

    - ``accelerate``: ``num_processes`` processes, else one a GPU of ``gpus`` (every visible GPU) on each machine;
    - ``auto``: the same when ``gpus`` (every visible GPU) holds more than one, else this process: TRL's SFT, DPO and
      reward trainers refuse one process that sees several GPUs (they would need nn.DataParallel);
    - ``none``: one process, on the first GPU of ``gpus``; in a process of its own when this one sees other GPUs too.

    The global batch (batch_size x grad_accum x num_processes, else 1) holds on whatever count runs: the per-device
    batch and accumulation are split again (:func:`split_batch`), using fewer of the GPUs if it must.

    >>> from types import SimpleNamespace as C
    >>> c = C(launcher="auto", gpus=None, gpu_indices=None, num_processes=None, num_machines=1, batch_size=2, grad_accum=16,
    ...       steps_per_generation=None, method="sft")
    >>> layout(c, 8)
    Layout(processes=8, launch=True, gpus=None, batch_size=2, grad_accum=2, visible=8)
    >>> layout(c, 1).launch, layout(c, 0).processes
    (False, 1)
    """  # noqa: E501
    pool = _pool(cfg, visible)
    machines = cfg.num_machines
    if cfg.launcher == "accelerate":
        per_machine = cfg.num_processes // machines if cfg.num_processes else len(pool)
        if not per_machine:
            raise UserError(
                "launcher: accelerate found no GPU; set num_processes (CPU processes then train over gloo)"
            )
        launched_here = True
    elif cfg.launcher == "auto" and len(pool) > 1:
        per_machine, launched_here = len(pool), True
    else:  # one process: here, unless the GPUs it may see must be fewer than this process sees
        pool = pool[:1]
        per_machine, launched_here = 1, bool(pool) and (visible > 1 or pool != [0])
    counted = cfg.num_processes or 1
    processes, batch, accum = split_batch(cfg, per_machine * machines, counted, machines)
    used = pool[: processes // machines] if pool else []
    restricted = tuple(used) if used and used != list(range(visible)) else None
    return Layout(processes, launched_here, restricted, batch, accum, visible)


def _pool(cfg, visible: int) -> list[int]:
    """The GPUs a step may use: ``gpus`` checked against what this machine sees, else every visible one."""
    asked = cfg.gpu_indices
    if asked is None:
        return list(range(visible))
    beyond = [i for i in asked if i >= visible]
    if beyond:
        seen = f"sees {visible} GPU(s) (0-{visible - 1})" if visible else "sees no CUDA GPU"
        raise UserError(
            f"gpus {cfg.gpus}: this machine {seen}; expected indices among the visible GPUs "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})"
        )
    return list(asked)


def split_batch(cfg, processes: int, counted: int, machines: int = 1) -> tuple[int, int, int]:
    """(processes, per-device batch, accumulation) with ``batch x processes x accumulation`` = the global batch.

    The global batch is ``batch_size x grad_accum x counted`` (the processes the config's batch counts). The
    per-device batch only shrinks (it is what must fit a GPU); a count of processes that cannot split the global
    batch evenly is lowered to the largest that can (a whole number a machine). A GRPO step that sets
    ``steps_per_generation`` keeps it, so its generation batch holds too: there ``batch x processes`` must stay.

    >>> from types import SimpleNamespace as C
    >>> split_batch(C(batch_size=2, grad_accum=16, steps_per_generation=None, method="sft"), 8, 1)
    (8, 2, 2)
    >>> split_batch(C(batch_size=8, grad_accum=1, steps_per_generation=None, method="dpo"), 8, 1)
    (8, 1, 1)
    >>> split_batch(C(batch_size=4, grad_accum=3, steps_per_generation=None, method="sft"), 8, 1)  # 12 over 6 GPUs
    (6, 2, 1)
    """
    total = cfg.batch_size * cfg.grad_accum * counted
    fixed_generation = cfg.method == "grpo" and cfg.steps_per_generation is not None
    for p in range(processes, 0, -1):
        if p % machines:
            continue
        for b in range(cfg.batch_size, 0, -1):
            if total % (b * p):
                continue
            if fixed_generation and b * p != cfg.batch_size * counted:
                continue
            return p, b, total // (b * p)
    return counted, cfg.batch_size, cfg.grad_accum  # unreachable: p = counted, b = batch_size always splits


def for_layout(cfg, where: Layout):
    """The config the launched processes train: the launch and the batch split ``where`` says (same global batch)."""
    return dataclasses.replace(
        cfg,
        launcher="accelerate",
        num_processes=where.processes,
        batch_size=where.batch_size,
        grad_accum=where.grad_accum,
    )


def visible_devices(where: Layout, env: dict | None = None) -> str | None:
    """CUDA_VISIBLE_DEVICES for the launched processes: ``where.gpus`` mapped through this process's own list.

    >>> visible_devices(Layout(2, True, (0, 2), 1, 1, 4), {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    '4,6'
    >>> visible_devices(Layout(8, True, None, 1, 1, 8), {}) is None
    True
    """
    if where.gpus is None:
        return None
    env = os.environ if env is None else env
    own = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    names = own if own else [str(i) for i in range(where.visible)]
    return ",".join(names[i] for i in where.gpus)


def visible_gpus(cfg) -> int:
    """CUDA GPUs this process sees (0 for ``device: cpu``). torch counts them through NVML without starting CUDA,
    so the launched processes' CUDA_VISIBLE_DEVICES can still be chosen."""
    if cfg.device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count()


#: The node a plan made without a visible GPU assumes: 8 GPUs (what the shipped GPU recipes are written for).
NODE_GPUS = 8


def visible_here(env: dict | None = None, smi: str | None = "nvidia-smi") -> int:
    """CUDA GPUs this machine shows, counted without torch (``--plan`` stays light): CUDA_VISIBLE_DEVICES when set,
    else the lines of ``nvidia-smi -L``, else 0.

    >>> visible_here({"CUDA_VISIBLE_DEVICES": "2,3"}), visible_here({"CUDA_VISIBLE_DEVICES": ""}), visible_here({}, None)
    (2, 0, 0)
    """  # noqa: E501
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        return len([d for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"])
    import shutil

    if smi is None or shutil.which(smi) is None:
        return 0
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))


def _ranges(indices: tuple[int, ...]) -> str:
    """``(0, 1, 2, 3, 6)`` -> ``"0-3,6"``."""
    parts, start = [], None
    for i, value in enumerate(indices):
        if start is None:
            start = value
        if i + 1 == len(indices) or indices[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ",".join(parts)


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


@dataclasses.dataclass(frozen=True)
class Machines:
    """Where this machine stands in a multi-machine launch (one machine: the defaults)."""

    count: int = 1
    rank: int = 0
    address: str = "127.0.0.1"
    port: int | None = None  # None: a free port of this machine (one machine only)


#: torchrun's default rendezvous port, when neither the config nor MASTER_PORT names one: every machine
#: must agree on it, so it cannot be a free port one machine picks.
DEFAULT_PORT = 29500


def machines(cfg, env: dict | None = None) -> Machines:
    """This machine's rank and the main machine's address and port, from the config, else Slurm's environment.

    >>> machines(type("C", (), {"num_machines": 2, "machine_rank": None, "main_process_ip": None,
    ...     "main_process_port": None})(), {"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[07-08]"})
    Machines(count=2, rank=1, address='gpu07', port=29500)
    """  # noqa: E501
    env = os.environ if env is None else env
    count = cfg.num_machines
    if count <= 1:
        return Machines()
    nodes = env.get("SLURM_NNODES")
    if nodes and int(nodes) != count:
        raise UserError(
            f"num_machines {count}, but this Slurm job has {nodes} nodes (SLURM_NNODES); expected them equal"
        )
    rank = cfg.machine_rank if cfg.machine_rank is not None else env.get("SLURM_NODEID")
    if rank is None:
        raise UserError(
            f"num_machines {count}: this machine's rank is unknown; set machine_rank (0 on the main machine) "
            "or run under Slurm (srun sets SLURM_NODEID)"
        )
    address = cfg.main_process_ip or env.get("MASTER_ADDR") or first_host(env.get("SLURM_JOB_NODELIST", ""))
    if not address:
        raise UserError(
            f"num_machines {count}: the main machine's address is unknown; set main_process_ip, or MASTER_ADDR, "
            "or run under Slurm (SLURM_JOB_NODELIST)"
        )
    port = cfg.main_process_port or int(env.get("MASTER_PORT") or DEFAULT_PORT)
    return Machines(count, int(rank), address, port)


def first_host(nodelist: str) -> str | None:
    """The first host of a Slurm node list (what ``scontrol show hostnames`` prints first), without scontrol.

    >>> first_host("gpu[07-08,12]"), first_host("node-a,node-b"), first_host("h100-[001-016]"), first_host("")
    ('gpu07', 'node-a', 'h100-001', None)
    """
    match = re.match(r"([^,\[]+)(?:\[([^\],-]+))?", nodelist.strip())
    if not match:
        return None
    return match.group(1) + (match.group(2) or "")


def run_launched(cfg, say, placed: Layout) -> dict:
    """Train ``cfg`` under ``accelerate launch`` in a subprocess, as ``placed`` says; return the report it wrote.

    On a machine other than the main one (machine rank > 0) the processes it starts train with the others and
    write nothing of OUT but their checkpoint shards; it returns the report when OUT is shared storage."""
    where = machines(cfg)
    processes = placed.processes
    # one process (a GPU chosen by `gpus`, or launcher none) needs no distributed config unless it was asked for
    accelerate_config = config_file(cfg.accelerate_config) if processes > 1 or cfg.launcher == "accelerate" else None
    devices = visible_devices(placed)
    cfg = for_layout(cfg, placed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / (LOG if where.rank == 0 else f"launch-machine{where.rank}.log")  # one log a machine on shared storage
    with tempfile.TemporaryDirectory(prefix="reasonkit-launch-") as tmp:
        settings = Path(tmp) / "train_config.json"
        settings.write_text(json.dumps(dataclasses.asdict(cfg)))  # the same config: the report records the launch
        cmd = launch_command(processes, accelerate_config, settings, where)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", LAUNCHED: "1"}
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        if cfg.threads:
            env["OMP_NUM_THREADS"] = str(cfg.threads)
        on = f"; this machine rank {where.rank}, main {where.address}:{where.port}" if where.count > 1 else ""
        say(
            f"training on {placed.describe(cfg)}"
            + (f"; accelerate config {accelerate_config.name}" if accelerate_config else "")
            + (f"; CUDA_VISIBLE_DEVICES={devices}" if devices is not None else "")
            + f"{on}; their output: {log}"
        )
        code, error, tail = run_logged(cmd, env, log, say)
    if error:
        raise UserError(error)
    if code != 0:
        raise UserError(
            f"{out}: training under accelerate launch failed (exit {code}): {tail or 'no output'}; see {log}"
        )
    report = out / "report.json"
    if where.rank > 0 and not report.is_file():
        return {"machine_rank": where.rank, "out": str(out), "report": "written by machine 0"}
    return json.loads(report.read_text())


def launch_command(
    processes: int, accelerate_config: Path | None, settings: Path, where: Machines = Machines()
) -> list[str]:
    """The ``accelerate launch`` command line; on one machine a free port, so two runs on one node do not collide.

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
    cmd += ["--num_processes", str(processes), "--num_machines", str(where.count)]
    if where.count > 1:  # the flags override the config file's single-machine values
        cmd += [
            "--machine_rank",
            str(where.rank),
            "--main_process_ip",
            where.address,
            "--main_process_port",
            str(where.port),
        ]
    else:
        cmd += ["--main_process_port", str(_free_port())]
    cmd += ["--mixed_precision", "no"]
    if accelerate_config is None:
        cmd += ["--dynamo_backend", "no"]
    return [*cmd, "-m", "reasonkit.distill.worker", str(settings)]


def run_logged(cmd: list[str], env: dict, log_path: Path, say) -> tuple[int, str | None, str]:
    """Run ``cmd``, all its output appended to ``log_path``; pass the main process's lines to ``say``.

    Returns (exit code, the first error a process reported, the last line of output).
    """
    error, tail = None, ""
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True, preexec_fn=die_with_parent
        )
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.strip():
                    tail = line.strip()[-300:]
                if line.startswith(PROGRESS_MARK):
                    print(line[len(PROGRESS_MARK) :], end="", file=sys.stderr, flush=True)
                elif line.startswith(MARK):
                    message = line[len(MARK) :].rstrip("\n")
                    if message.startswith("error: "):
                        error = error or message[len("error: ") :]
                    else:
                        say(message)
            return proc.wait(), error, tail
        finally:
            if proc.poll() is None:  # interrupted: torchrun passes SIGTERM on to the processes
                proc.terminate()
                proc.wait()


def die_with_parent() -> None:
    """In the launcher's child: receive SIGTERM if this process dies (Linux), so a killed
    ``distill run`` leaves no orphaned training processes holding the GPUs."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
