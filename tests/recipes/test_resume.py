"""A recipe step interrupted mid-way resumes when rerun, also when the rerun names it with
``--only``/``--from``: the committed work stays on disk untouched and only what is missing runs.
Only ``--overwrite`` deletes (issue 14, items 1 and 2)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import STATE, run
from reasonkit.recipes.tasks.train_sets import write_sft
from reasonkit.store import load_manifest


def stats(paths) -> dict:
    """What would change if a file were deleted and written again: its inode and mtime."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}


class Interrupted(KeyboardInterrupt):
    pass


def interrupt_after(n: int, monkeypatch):
    """Make the generate stage's real backend stop (as Ctrl-C would) before its n+1-th completion."""
    import reasonkit.gen.run as gen_run

    real = gen_run.make_backend

    class Stopping:
        def __init__(self, backend):
            self.backend = backend

        def generate(self, requests):
            for i, completion in enumerate(self.backend.generate(requests)):
                if i == n:
                    raise Interrupted
                yield completion

        def __getattr__(self, name):
            return getattr(self.backend, name)

    monkeypatch.setattr(gen_run, "make_backend", lambda *a, **k: Stopping(real(*a, **k)))
    return lambda: monkeypatch.setattr(gen_run, "make_backend", real)


def generate_recipe(tmp_path, model):
    return parse_recipe(
        {
            "out": str(tmp_path / "run"),
            "steps": [
                {"name": "problems", "stage": "synth", "with": {"n": 6, "split": "test"}},
                {
                    "name": "traces",
                    "stage": "generate",
                    "with": {
                        "prompts": "${problems}",
                        "teacher": model,
                        "backend": "hf",
                        "n": 1,
                        "max_tokens": 24,
                        "shard_size": 2,
                        "batch_size": 2,
                        "dtype": "float32",
                    },
                },
            ],
        },
        "r.yaml",
    )


@pytest.mark.parametrize("how", ["only", "from", "plain"])
def test_interrupted_generate_step_resumes_on_a_named_rerun(tmp_path, gen_model, monkeypatch, how):
    recipe = generate_recipe(tmp_path, gen_model)
    restore = interrupt_after(3, monkeypatch)  # shard 0 (2 prompts) is committed, shard 1 is not
    with pytest.raises(Interrupted):
        run(recipe, echo=lambda *_: None)
    restore()
    traces = tmp_path / "run" / "traces"
    before = load_manifest(traces)
    assert not before["complete"] and before["rows"] == 2
    kept = stats(traces / s["file"] for s in before["shards"])

    lines = []
    kw = {"only": "traces"} if how == "only" else {"start": "traces"} if how == "from" else {}
    run(recipe, echo=lines.append, **kw)
    assert "[run]  traces (generate): resuming" in lines, lines
    after = load_manifest(traces)
    assert after["complete"] and after["rows"] == 6
    assert stats(traces / name for name in kept) == kept, "the committed shard was deleted and rewritten"

    lines.clear()
    run(recipe, echo=lines.append, **kw)  # finished with the same config: a named rerun is a no-op
    assert any(line.startswith("[skip] traces (generate): finished") for line in lines), lines
    assert load_manifest(traces)["shards"] == after["shards"]

    run(recipe, echo=lines.append, overwrite=True, only="traces")  # only --overwrite redoes it
    redone = load_manifest(traces)
    assert redone["complete"] and redone["rows"] == 6 and redone["created"] >= after["created"]
    assert stats(traces / name for name in kept) != kept


# -- a train step killed after a checkpoint resumes on a plain rerun of the recipe ------------------

STEPS, SAVE = 12, 4


def train_recipe(tmp_path, student, data) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "out": str(tmp_path / "run"),
                "report": False,
                "steps": [
                    {
                        "name": "sft",
                        "stage": "train",
                        "with": {
                            "method": "sft",
                            "student": str(student),
                            "data": str(data),
                            "max_steps": STEPS,
                            "lr": 5e-3,
                            "batch_size": 8,
                            "save_steps": SAVE,
                            "save_total_limit": 10,
                            "threads": 1,
                        },
                    }
                ],
            }
        )
    )
    return path


def kill_after_first_checkpoint(cmd, checkpoints: Path, log: Path, timeout=300) -> int:
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if list(checkpoints.glob("checkpoint-*/trainer_state.json")):
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.05)
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_killed_train_step_resumes_from_its_checkpoint_on_a_plain_rerun(tmp_path, tiny_model_dir):
    data = write_sft(tmp_path / "data", n=64)
    recipe_path = train_recipe(tmp_path, tiny_model_dir, data)
    out = tmp_path / "run" / "sft"
    distill = Path(sys.executable).parent / "distill"
    code = kill_after_first_checkpoint(
        [str(distill), "run", str(recipe_path)], out / "checkpoints", tmp_path / "killed.log"
    )
    assert code == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    assert not (out / "report.json").exists()
    time.sleep(0.1)
    checkpoint = max(out.glob("checkpoint*/checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    step = int(checkpoint.name.split("-")[1])
    kept = stats([checkpoint / "optimizer.pt", checkpoint / "trainer_state.json"])

    from reasonkit.config import load_yaml

    lines = []
    results = run(parse_recipe(load_yaml(str(recipe_path)), str(recipe_path)), echo=lines.append)
    assert "[run]  sft (train): resuming" in lines, lines
    report = results["sft"]
    assert report["resumed_from_step"] == step >= SAVE, report.get("resumed_from_step")
    assert report["steps"] == STEPS and [r["step"] for r in report["history"]] == list(range(1, STEPS + 1))
    assert stats([checkpoint / "optimizer.pt", checkpoint / "trainer_state.json"]) == kept, "checkpoint rewritten"
    assert (tmp_path / "run" / STATE).is_file()
