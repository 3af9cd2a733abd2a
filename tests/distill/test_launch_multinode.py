"""Training across machines (distill/launch.py): each machine runs `accelerate launch` with its machine rank and the
main machine's address and port, from the train config or Slurm's environment. Before, the command always said
`--num_machines 1` with a free local port, so only generation could span nodes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.launch import config_file, launch_command, machines
from reasonkit.errors import UserError

SLURM = {"SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu-node[07-08]"}


def cfg(**kw):
    return TrainConfig(**{"method": "sft", "student": "m", "data": "d", "out": "o", "launcher": "accelerate", **kw})


def test_the_command_for_2_nodes_of_8_gpus_under_slurm():
    c = cfg(num_processes=16, num_machines=2, accelerate_config="zero3-multinode")
    where = machines(c, SLURM)
    cmd = launch_command(16, config_file(c.accelerate_config), Path("s.json"), where)
    flags = " ".join(cmd[3:])
    assert (
        "--num_processes 16 --num_machines 2 --machine_rank 1 --main_process_ip gpu-node07 --main_process_port 29500"
        in flags
    ), flags
    shipped = yaml.safe_load(config_file("zero3-multinode").read_text())
    assert shipped["distributed_type"] == "DEEPSPEED" and shipped["deepspeed_config"]["zero_stage"] == 3
    assert (
        shipped["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"
    )  # torchrun on each node, as srun starts it
    assert (shipped["num_machines"], shipped["num_processes"]) == (2, 16)
    # the config's own values win over Slurm's; MASTER_ADDR/MASTER_PORT over the node list and the default
    given = machines(
        cfg(num_processes=16, num_machines=2, machine_rank=0, main_process_ip="10.0.0.1", main_process_port=6000),
        SLURM,
    )
    assert (given.rank, given.address, given.port) == (0, "10.0.0.1", 6000)
    env = machines(c, {**SLURM, "MASTER_ADDR": "head", "MASTER_PORT": "7000"})
    assert (env.address, env.port) == ("head", 7000)
    one = launch_command(8, config_file("zero3"), Path("s.json"), machines(cfg(num_processes=8), SLURM))
    assert "--num_machines 1 --main_process_port" in " ".join(one) and "--machine_rank" not in one


def test_what_a_machine_cannot_know_is_one_clear_error():
    with pytest.raises(UserError, match="this machine's rank is unknown; set machine_rank"):
        machines(cfg(num_processes=4, num_machines=2, main_process_ip="h"), {})
    with pytest.raises(UserError, match="num_machines 2, but this Slurm job has 4 nodes"):
        machines(cfg(num_processes=4, num_machines=2), {**SLURM, "SLURM_NNODES": "4"})
    with pytest.raises(UserError, match="must be a multiple of num_machines 2"):
        cfg(num_processes=3, num_machines=2)
    with pytest.raises(UserError, match="apply with launcher: accelerate only"):
        TrainConfig(method="sft", student="m", data="d", out="o", num_machines=2)


def test_zero3_over_two_nodes_shards_over_every_process():
    from reasonkit.distill.lint.memory import sharding_of

    assert sharding_of(cfg(num_processes=16, num_machines=2, accelerate_config="zero3-multinode")) == ("zero3", 16)


def test_another_machine_of_a_multinode_step_runs_that_step_alone(tmp_path, teacher_dir):
    """Machine 1 under srun must not run the recipe's generation too, nor record the run state."""
    from reasonkit.recipes.recipe import parse_recipe
    from reasonkit.recipes.runner import run

    data = {
        "out": str(tmp_path / "run"),
        "steps": [
            {"name": "problems", "stage": "synth", "with": {"n": 8}},
            {
                "name": "sft",
                "stage": "train",
                "with": {
                    "method": "sft",
                    "student": teacher_dir,
                    "data": "${problems}",
                    "launcher": "accelerate",
                    "num_processes": 4,
                    "num_machines": 2,
                    "machine_rank": 1,
                    "main_process_ip": "127.0.0.1",
                },
            },
        ],
    }
    with pytest.raises(
        UserError, match="this is machine 1 of a multi-node train step \\(sft\\): run it alone here with --only sft"
    ):
        run(parse_recipe(data, "r.yaml"))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_two_machines_of_two_gloo_processes_train_together_on_cpu(tiny_model_dir, tmp_path):
    """2 "machines" x 2 processes on this CPU: two `distill train` commands, machine ranks 0 and 1, one rendezvous at
    127.0.0.1 (accelerate launch -> torchrun, nnodes 2, gloo). One run of world size 4; machine 1 writes no OUT file
    but its own launch log."""
    from reasonkit.distill.launch import _free_port
    from reasonkit.recipes.tasks.train_sets import write_sft

    data = write_sft(tmp_path / "sft", n=32)
    out = tmp_path / "run"
    base = [
        sys.executable,
        "-m",
        "reasonkit.distill.command",
        "--method",
        "sft",
        "--student",
        tiny_model_dir,
        "--data",
        str(data),
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--batch-size",
        "2",
    ]
    sets = {
        "threads": 1,
        "launcher": "accelerate",
        "num_processes": 4,
        "accelerate_config": "ddp",
        "num_machines": 2,
        "main_process_ip": "127.0.0.1",
        "main_process_port": _free_port(),
    }
    flags = [x for k, v in sets.items() for x in ("--set", f"{k}={v}")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    second = subprocess.Popen(
        [*base, *flags, "--set", "machine_rank=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    first = subprocess.run(
        [*base, *flags, "--set", "machine_rank=0"], capture_output=True, text=True, env=env, timeout=400
    )
    tail = second.communicate(timeout=120)[0]
    assert first.returncode == 0, first.stderr[-2000:] + (out / "launch.log").read_text()[-3000:]
    assert second.returncode == 0, tail[-2000:]
    assert (
        "training on 4 processes under accelerate launch (2 machines), 2 x 1 accumulation a device (global batch 8); "
        "accelerate config ddp.yaml; this machine rank 0, main 127.0.0.1:" in first.stderr
    )
    report = json.loads((out / "report.json").read_text())
    assert report["device"]["world_size"] == 4 and report["steps"] == 2
    assert json.loads((out / "train_config.json").read_text())["config"]["global_batch_size"] == 8  # 2 x 4 processes
    assert (out / "launch-machine1.log").is_file() and "--machine_rank 1" in (out / "launch-machine1.log").read_text()


def test_plan_shows_the_machines_and_shards_over_all_their_processes(tmp_path):
    """r1-distill's SFT over 2 nodes x 8: ZeRO-3's 16 bytes a parameter / 16 processes (1.54B x 16 / 16 = 1.5 GB)."""
    from reasonkit.config import load_yaml
    from reasonkit.recipes.plan import plan
    from reasonkit.recipes.recipe import parse_recipe
    from reasonkit.recipes.runner import validate

    path = Path(__file__).resolve().parents[2] / "recipes" / "r1-distill-qwen-1.5b.yaml"
    recipe = parse_recipe(
        load_yaml(path),
        str(path),
        ["sft.num_machines=2", "sft.num_processes=16", "sft.accelerate_config=zero3-multinode"],
        out=str(tmp_path),
    )
    sft = {s.name: s for s in plan(recipe, validate(recipe), {})}["sft"]
    assert sft.gpus == 16 and sft.layout == (
        "on nodes of 8 GPUs: 16 processes under accelerate launch (2 machines, GPUs 0-7 "
        "of each), 2 x 8 accumulation a device (global batch 256)"
    )
    assert "(weights 0.2, gradients 0.2, optimizer 1.2," in sft.memory, sft.memory
