"""Training on several processes (distill/launch.py, distill/train.py).

Two gloo processes on CPU under `launcher: accelerate` (the shipped ddp config) train the tiny
student, are SIGKILLed after their first checkpoint, and resume to the same final step; every file
in OUT is written by the main process only, once. The checkpoint completeness check knows the
DeepSpeed and FSDP layouts, and the training arguments exist before the model loads (ZeRO-3).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.train import is_complete, last_checkpoint
from reasonkit.recipes.tasks.train_sets import write_sft

STEPS, SAVE = 8, 2

#: Loaded by every process of the run (PYTHONPATH): records each Path.write_text and shutil.rmtree
#: with the process's RANK, so the test sees who wrote what in OUT.
RECORDER = """
import os, pathlib, shutil
_log = os.environ.get("WRITES_LOG")
if _log:
    def _record(kind, path):
        with open(f"{_log}.{os.getpid()}", "a") as f:
            f.write(f"{os.environ.get('RANK', '-')}\\t{kind}\\t{os.path.abspath(path)}\\n")
    _write_text, _rmtree = pathlib.Path.write_text, shutil.rmtree
    def write_text(self, *a, **k):
        _record("write", self)
        return _write_text(self, *a, **k)
    def rmtree(path, *a, **k):
        _record("rmtree", path)
        return _rmtree(path, *a, **k)
    pathlib.Path.write_text, shutil.rmtree = write_text, rmtree
"""


def kill_tree(pid: int) -> None:
    import psutil

    root = psutil.Process(pid)
    tree = [root, *root.children(recursive=True)]
    for p in tree:
        p.send_signal(signal.SIGKILL)
    psutil.wait_procs(tree, timeout=30)


def writes(log_dir: Path, out: Path) -> list[tuple[str, str, str]]:
    """(rank, kind, path relative to OUT) for every recorded write under OUT, then forget them."""
    found = []
    for f in sorted(log_dir.glob("writes.*")):
        for line in f.read_text().splitlines():
            rank, kind, path = line.split("\t")
            if Path(path).is_relative_to(out):
                found.append((rank, kind, str(Path(path).relative_to(out))))
        f.unlink()
    return found


# long: one scenario, start to finish: launch, kill, resume and the files written
@pytest.mark.slow
def test_two_processes_killed_then_resumed_write_once_from_the_main_process(tiny_model_dir, tmp_path):
    data = write_sft(tmp_path / "sft", n=64)
    out = tmp_path / "run"
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(RECORDER)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "WRITES_LOG": str(tmp_path / "writes"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
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
        str(STEPS),
        "--lr",
        "5e-3",
        "--batch-size",
        "4",
        "--set",
        f"save_steps={SAVE}",
        "--set",
        "threads=1",
        "--set",
        "launcher=accelerate",
        "--set",
        "num_processes=2",
        "--set",
        "accelerate_config=ddp",
    ]

    # a node lost mid-run: every process of the run SIGKILLed once the first checkpoint is complete
    # (the whole tree: torchrun starts each training process in a session of its own)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and not list(out.glob("checkpoints/checkpoint-*/trainer_state.json"))
    ):
        time.sleep(0.05)
    kill_tree(proc.pid)
    proc.wait(timeout=30)
    assert list(out.glob("checkpoints/checkpoint-*/trainer_state.json")), (out / "launch.log").read_text()[-3000:]
    assert not (out / "report.json").exists()
    first = writes(tmp_path, out)
    assert {r for r, _, _ in first} == {"0"}, first  # rank 1 wrote nothing of ours; the launcher neither
    assert sorted(p for _, kind, p in first if kind == "write") == ["lint.json", "train_config.json"], first

    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:] + (out / "launch.log").read_text()[-3000:]
    assert (
        "training on 2 processes under accelerate launch, 4 x 1 accumulation a device (global batch 8); accelerate "
        "config ddp.yaml" in done.stderr
    )
    assert (
        "resuming from" in done.stderr and done.stderr.count("resuming from") == 1
    )  # the main process speaks for all
    report = json.loads((out / "report.json").read_text())
    assert report["device"]["world_size"] == 2 and report["config"]["launcher"] == "accelerate"
    assert report["steps"] == STEPS and report["resumed_from_step"] >= SAVE and report["resumed_from_step"] % SAVE == 0
    assert [r["step"] for r in report["history"]] == list(range(1, STEPS + 1))
    second = writes(tmp_path, out)
    assert {r for r, _, _ in second} == {"0"}, second
    written = sorted(p for _, kind, p in second if kind == "write")
    assert written == [".report.json.tmp", "lint.json"], second  # the report once; train_config.json kept
    assert all(kind == "write" or p.startswith("checkpoints/checkpoint-") for _, kind, p in second), (
        second
    )  # deletes: torn ones only
    assert json.loads((out / "train_config.json").read_text())["config"]["global_batch_size"] == 8  # 4 per device x 2


def checkpoint(tmp_path: Path, files: dict[str, str], name: str = "checkpoint-4") -> Path:
    path = tmp_path / "checkpoints" / name
    for rel, text in {"trainer_state.json": '{"global_step": 4}', **files}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return path


LAYOUTS = {
    # what transformers' Trainer._save_checkpoint leaves under each backend
    "plain": {"adapter_model.safetensors": "w", "optimizer.pt": "o", "scheduler.pt": "s", "rng_state.pth": "r"},
    "deepspeed zero-2": {
        "adapter_model.safetensors": "w",
        "latest": "global_step4",
        "global_step4/mp_rank_00_model_states.pt": "m",
        "global_step4/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt": "o",
        "global_step4/bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt": "o",
    },
    "deepspeed zero-3 without 16-bit weights": {
        "latest": "global_step4",
        "global_step4/zero_pp_rank_0_mp_rank_00_model_states.pt": "m",
        "global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt": "o",
    },
    "fsdp sharded": {
        "pytorch_model_fsdp_0/.metadata": "m",
        "pytorch_model_fsdp_0/__0_0.distcp": "w",
        "optimizer_0/.metadata": "m",
        "optimizer_0/__0_0.distcp": "o",
        "rng_state_0.pth": "r",
    },
    "fsdp full state dict": {"pytorch_model_fsdp.bin": "w", "optimizer.bin": "o"},
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_complete_checkpoint_of_every_backend_is_resumed_not_deleted(tmp_path, layout):
    path = checkpoint(tmp_path, LAYOUTS[layout])
    torn = checkpoint(tmp_path, {k: v for k, v in LAYOUTS[layout].items()}, name="checkpoint-6")
    (torn / "trainer_state.json").unlink()  # killed before the Trainer's last write
    assert is_complete(path)
    assert last_checkpoint(tmp_path / "checkpoints") == path
    assert path.is_dir() and not torn.exists()


@pytest.mark.parametrize(
    "files",
    [
        {
            "global_step4/zero_pp_rank_0_mp_rank_00_model_states.pt": "m"
        },  # DeepSpeed killed before the optimizer shards
        {
            "pytorch_model_fsdp_0/.metadata": "m",
            "optimizer_0/__0_0.distcp": "o",
        },  # FSDP optimizer without its .metadata
        {"adapter_model.safetensors": "w"},  # plain, no optimizer.pt
    ],
    ids=["deepspeed", "fsdp", "plain"],
)
def test_a_checkpoint_without_its_optimizer_state_is_torn(tmp_path, files):
    assert not is_complete(checkpoint(tmp_path, files))


def test_other_processes_skip_torn_checkpoints_without_deleting_them(tmp_path):
    good = checkpoint(tmp_path, LAYOUTS["fsdp sharded"])
    torn = checkpoint(tmp_path, {"optimizer_0/__0_0.distcp": "o"}, name="checkpoint-6")
    assert last_checkpoint(tmp_path / "checkpoints", delete_torn=False) == good and torn.is_dir()


def test_the_global_batch_is_fingerprinted_not_its_split_or_the_launcher():
    base = dict(method="sft", student="m", data="d", out="o")
    eight_gpus = TrainConfig(**base, batch_size=4, launcher="accelerate", num_processes=8, accelerate_config="zero3")
    four_gpus_accumulating = TrainConfig(**base, batch_size=2, grad_accum=4)
    assert eight_gpus.fingerprinted(world_size=8) == four_gpus_accumulating.fingerprinted(world_size=4)
    assert eight_gpus.fingerprinted(world_size=8) != eight_gpus.fingerprinted(
        world_size=4
    )  # half the batch: another run


def test_the_training_arguments_exist_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    """Under DeepSpeed ZeRO-3, TrainingArguments register the config from_pretrained partitions by."""
    from trl import SFTConfig

    from reasonkit.distill import student
    from reasonkit.distill.train import train

    events = []
    post_init, load = SFTConfig.__post_init__, student.load_model
    monkeypatch.setattr(
        SFTConfig, "__post_init__", lambda self: events.append("training arguments") or post_init(self)
    )
    monkeypatch.setattr(student, "load_model", lambda cfg, device: events.append("model") or load(cfg, device))
    data = write_sft(tmp_path / "sft", n=8)
    train(
        TrainConfig(
            method="sft",
            student=tiny_model_dir,
            data=str(data),
            out=str(tmp_path / "run"),
            max_steps=1,
            batch_size=4,
            threads=1,
        )
    )
    assert events == ["training arguments", "model"]


def test_a_launched_run_that_fails_on_bad_input_raises_its_one_line_error(tiny_model_dir, tmp_path):
    """The launched processes' UserError reaches the launching process as the same one line."""
    from reasonkit.distill.train import train
    from reasonkit.errors import UserError

    out = tmp_path / "run"
    out.mkdir()
    (out / "train_config.json").write_text('{"fingerprint": "another run"}')
    data = write_sft(tmp_path / "sft", n=8)
    cfg = TrainConfig(
        method="sft", student=tiny_model_dir, data=str(data), out=str(out), launcher="accelerate", num_processes=1
    )
    with pytest.raises(UserError, match=r"holds a training run already; pass --resume"):
        train(cfg)
    assert (out / "launch.log").is_file() and json.loads((out / "train_config.json").read_text()) == {
        "fingerprint": "another run"
    }


def test_an_unknown_accelerate_config_names_the_shipped_ones(tmp_path):
    from reasonkit.distill.launch import config_file
    from reasonkit.errors import UserError

    with pytest.raises(
        UserError,
        match=r"accelerate_config: zerro3: neither a shipped config \(ddp, fsdp, zero3, zero3-multinode\) nor a YAML "
        r"file",
    ):
        config_file("zerro3")
    (tmp_path / "mine.yaml").write_text("distributed_type: MULTI_GPU\n")
    assert config_file(str(tmp_path / "mine.yaml")) == tmp_path / "mine.yaml"


def test_a_recipe_train_step_moved_to_several_gpus_keeps_its_fingerprint(tiny_model_dir, tmp_path):
    """launcher/num_processes/accelerate_config change how the step runs: the runner must not take
    them for a new config (which would delete the step's checkpoints)."""
    from reasonkit.recipes.recipe import parse_recipe
    from reasonkit.recipes.runner import validate

    data = write_sft(tmp_path / "sft", n=8)

    def step_fingerprint(**launch):
        recipe = {
            "out": str(tmp_path / "out"),
            "steps": [
                {
                    "name": "sft",
                    "stage": "train",
                    "with": {"method": "sft", "student": tiny_model_dir, "data": str(data), **launch},
                }
            ],
        }
        return validate(parse_recipe(recipe, "r.yaml"))[0].fingerprint

    assert step_fingerprint() == step_fingerprint(launcher="accelerate", num_processes=8, accelerate_config="zero3")
    assert step_fingerprint() != step_fingerprint(batch_size=4)
