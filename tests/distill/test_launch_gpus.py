"""A train step on a machine with several GPUs (distill/launch.py: layout, split_batch, run_launched).

Before, ``launcher: none`` (the default) trained inside the calling process whatever it saw: on an 8-GPU node
transformers set ``n_gpu`` to 8 and TRL 1.16's SFT, DPO and reward trainers refused ("does not support
nn.DataParallel ... make a single GPU visible"), stopping r1-api-teacher-7b's sft, dpo-verifier-pairs' dpo,
constitutional's sft and dpo and rlaif-constitutional's rm in their first minute. Now such a step trains on every
GPU (or the ``gpus`` asked for) through ``accelerate launch``, with the recipe's global batch.
"""

import json
import os
from pathlib import Path

import pytest

from reasonkit.config import load_yaml
from reasonkit.distill import launch
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.launch import Layout, for_layout, layout, split_batch, visible_devices
from reasonkit.errors import UserError
from reasonkit.recipes.plan import plan
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import validate

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
#: The train steps of the shipped GPU recipes that name no launcher: each was refused on a multi-GPU node.
IN_PROCESS_STEPS = [
    ("r1-api-teacher-7b", "sft"),
    ("dpo-verifier-pairs", "dpo"),
    ("constitutional", "sft"),
    ("constitutional", "dpo"),
    ("rlaif-constitutional", "rm"),
]


def cfg(**kw) -> TrainConfig:
    return TrainConfig(**{"method": "sft", "student": "m", "data": "d", "out": "o", **kw})


def recipe_step(name: str, step: str, tmp_path, overrides=()):
    path = RECIPES / f"{name}.yaml"
    recipe = parse_recipe(load_yaml(path), str(path), list(overrides), out=str(tmp_path))
    return recipe, {p.step.name: p for p in validate(recipe)}[step]


@pytest.mark.parametrize("name,step", IN_PROCESS_STEPS, ids=lambda v: v)
def test_every_shipped_in_process_step_trains_on_all_8_gpus_with_its_global_batch(name, step, tmp_path):
    config = recipe_step(name, step, tmp_path)[1].config
    written = config.batch_size * config.grad_accum
    placed = layout(config, visible=8)
    assert placed.launch and placed.processes == 8 and placed.gpus is None
    assert placed.batch_size * placed.grad_accum * placed.processes == written
    assert placed.batch_size <= config.batch_size  # a device never holds more than the recipe asked
    # the same run as on one GPU: a step interrupted there resumes here
    assert for_layout(config, placed).fingerprinted(world_size=8) == config.fingerprinted(world_size=1)


def test_one_gpu_or_none_trains_in_this_process_as_before():
    assert layout(cfg(batch_size=4), 1) == Layout(1, False, None, 4, 1, 1)
    assert layout(cfg(batch_size=4), 0) == Layout(1, False, None, 4, 1, 0)
    assert layout(cfg(batch_size=4, device="cpu"), 0).launch is False


def test_the_gpus_asked_for_are_the_only_ones_the_processes_see():
    placed = layout(cfg(batch_size=2, grad_accum=8, gpus=[1, 3]), 4)
    assert (placed.processes, placed.gpus, placed.batch_size, placed.grad_accum) == (2, (1, 3), 2, 4)
    # indices are among what this process sees: CUDA_VISIBLE_DEVICES=4,5,6,7 makes GPU 1 the node's 5
    assert visible_devices(placed, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == "5,7"
    assert visible_devices(placed, {}) == "1,3"
    one = layout(cfg(gpus="2"), 8)  # one GPU of eight: its own process, that GPU only
    assert one.launch and one.processes == 1 and visible_devices(one, {}) == "2"


def test_gpus_the_machine_does_not_have_are_one_clear_error():
    with pytest.raises(UserError, match=r"gpus \[6, 9\]: this machine sees 8 GPU\(s\) \(0-7\); expected indices"):
        layout(cfg(gpus=[6, 9]), 8)
    with pytest.raises(UserError, match="sees no CUDA GPU"):
        layout(cfg(gpus=[0]), 0)
    with pytest.raises(UserError, match="gpus must name distinct GPU indices"):
        cfg(gpus="0,0")
    with pytest.raises(UserError, match="gpus must name distinct GPU indices"):
        cfg(gpus="first")
    with pytest.raises(UserError, match="num_processes is 4; expected them equal"):
        cfg(launcher="accelerate", gpus=[0, 1], num_processes=4)


def test_launcher_none_is_one_process_on_the_first_gpu_even_on_a_node_of_eight():
    placed = layout(cfg(launcher="none", batch_size=8), 8)
    assert placed.launch and placed.processes == 1 and visible_devices(placed, {}) == "0"
    assert (placed.batch_size, placed.grad_accum) == (8, 1)


def test_the_split_uses_fewer_gpus_rather_than_change_the_global_batch():
    # 12 rows a step cannot go evenly over 8 processes: 6 of them, 2 rows each
    placed = layout(cfg(batch_size=4, grad_accum=3), 8)
    assert (placed.processes, placed.batch_size, placed.grad_accum, placed.gpus) == (6, 2, 1, (0, 1, 2, 3, 4, 5))
    # an explicit num_processes is what the batch counts: nothing is split again
    assert split_batch(cfg(launcher="accelerate", num_processes=8, batch_size=4, grad_accum=16), 8, 8) == (8, 4, 16)


def test_a_grpo_step_keeps_its_generation_batch_on_any_count():
    grpo = cfg(method="grpo", batch_size=8, grad_accum=4, num_generations=8)
    placed = layout(grpo, 8)
    assert placed.batch_size * placed.processes * placed.grad_accum == 32  # steps_per_generation follows grad_accum
    fixed = cfg(method="grpo", batch_size=4, grad_accum=4, steps_per_generation=8, num_generations=8)
    placed = layout(fixed, 8)  # 4 completions a micro-step must stay 4: 4 processes of 1
    assert (placed.processes, placed.batch_size, placed.grad_accum) == (4, 1, 4)
    laid = for_layout(fixed, placed)
    assert laid.generation_batch_size(placed.processes) == fixed.generation_batch_size(1) == 32


def test_train_on_a_multi_gpu_machine_starts_accelerate_with_the_gpus_and_the_split(monkeypatch, tmp_path):
    """What train() hands accelerate launch on a node of 4 GPUs seen as CUDA_VISIBLE_DEVICES=4,5,6,7, asked for
    gpus 1,2: the command, the processes' environment, and the config they train (the library call is replaced
    by a recorder; the next test runs it for real)."""
    seen = {}

    def follow(cmd, env, log_path, say):
        seen.update(cmd=cmd, env=env, config=json.loads(Path(cmd[-1]).read_text()))
        (tmp_path / "out" / "report.json").write_text(json.dumps({"complete": True}))
        return 0, None, ""

    monkeypatch.setattr(launch, "run_logged", follow)
    monkeypatch.setattr(launch, "visible_gpus", lambda c: 4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    said = []
    from reasonkit.distill.train import train

    report = train(cfg(out=str(tmp_path / "out"), batch_size=8, grad_accum=2, gpus="1,2"), log=said.append)
    assert report == {"complete": True}
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "5,6" and seen["env"][launch.LAUNCHED] == "1"
    assert seen["cmd"][seen["cmd"].index("--num_processes") + 1] == "2" and "--multi_gpu" in seen["cmd"]
    assert (seen["config"]["batch_size"], seen["config"]["grad_accum"], seen["config"]["num_processes"]) == (8, 1, 2)
    assert any(
        "training on 2 processes under accelerate launch on GPUs 1-2, 8 x 1 accumulation a device "
        "(global batch 16); CUDA_VISIBLE_DEVICES=5,6" in line
        for line in said
    ), said


def test_plan_says_which_gpus_and_how_many_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    recipe, _ = recipe_step("r1-api-teacher-7b", "sft", tmp_path)
    sft = {s.name: s for s in plan(recipe, validate(recipe), {})}["sft"]
    assert sft.gpus == 4
    assert (
        sft.layout == "4 processes under accelerate launch on GPUs 0-3, 2 x 4 accumulation a device (global batch 32)"
    )
    assert any(note.startswith("32 rows a step (2 x 4 processes x 4 accumulation)") for note in sft.notes), sft.notes
    recipe, _ = recipe_step("r1-api-teacher-7b", "sft", tmp_path, ["sft.gpus=[2, 3]"])
    sft = {s.name: s for s in plan(recipe, validate(recipe), {})}["sft"]
    assert sft.gpus == 2 and sft.layout.startswith(
        "2 processes under accelerate launch on GPUs 2-3, 2 x 8 accumulation"
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # planned off the node: as on a node of 8, and says so
    recipe, _ = recipe_step("r1-api-teacher-7b", "sft", tmp_path)
    sft = {s.name: s for s in plan(recipe, validate(recipe), {})}["sft"]
    assert sft.layout.startswith(
        "here this process (no GPU), 2 x 16 accumulation a device (global batch 32); on a node of "
        "8 GPUs: 8 processes under accelerate launch on GPUs 0-7, 2 x 2 accumulation"
    )
    recipe, _ = recipe_step("r1-api-teacher-7b", "sft", tmp_path, ["sft.gpus=[2, 3]"])  # GPUs only the node has
    sft = {s.name: s for s in plan(recipe, validate(recipe), {})}["sft"]
    assert sft.refusal is None and sft.layout.startswith(
        "on a node of 8 GPUs: 2 processes under accelerate launch on GPUs 2-3"
    )


@pytest.mark.slow
def test_a_two_gpu_machine_trains_in_two_processes_with_the_same_global_batch(monkeypatch, tiny_model_dir, tmp_path):
    """train() with the default launcher where torch counts 2 GPUs: two processes under accelerate launch (gloo on
    this CPU, as NCCL on the GPUs), 4 rows a device with no accumulation for the 4 x 2 the config wrote."""
    from reasonkit.distill.train import train
    from reasonkit.recipes.tasks.train_sets import write_sft

    monkeypatch.setattr(launch, "visible_gpus", lambda c: 2)
    data = write_sft(tmp_path / "sft", n=32)
    out = tmp_path / "run"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = train(
        TrainConfig(
            method="sft",
            student=tiny_model_dir,
            data=str(data),
            out=str(out),
            max_steps=2,
            batch_size=4,
            grad_accum=2,
            threads=1,
        )
    )
    assert report["device"]["world_size"] == 2 and report["steps"] == 2
    assert (report["config"]["batch_size"], report["config"]["grad_accum"]) == (4, 1)
    assert json.loads((out / "train_config.json").read_text())["config"]["global_batch_size"] == 8
    assert (out / "launch.log").is_file() and os.path.getsize(out / "launch.log") > 0
