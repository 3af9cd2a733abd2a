"""`distill run` on a GPU machine runs each model step in a child process (recipes/isolate.py); with the run's stderr
in a file (a Slurm job's output), the child's step prints its plain progress lines into that file, as in-process
(issue 36, item 4). Forced here with REASONKIT_ISOLATE_STEPS=always on the CPU."""

import os
import subprocess
import sys

import yaml

from reasonkit.recipes import isolate
from reasonkit.recipes.runner import load_state
from reasonkit.ticker import EVERY_ENV

from .test_isolate import model_recipe


def test_a_model_step_in_a_child_prints_progress_into_the_runs_log(tmp_path, gen_model):
    recipe = model_recipe(gen_model)
    recipe["steps"] = [s for s in recipe["steps"] if s["stage"] != "eval"]  # synth, then generate in a child
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    env = {**os.environ, isolate.ENV: "always", EVERY_ENV: "0"}
    with open(tmp_path / "job.err", "w") as err:  # what sbatch --error or `2> job.err` hands the run
        run = subprocess.Popen(
            [sys.executable, "-c", "from reasonkit.cli import main; main()", "run", "r.yaml"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        code = run.wait(timeout=300)
    log = (tmp_path / "job.err").read_text()
    assert code == 0, log[-3000:]
    pids = {name: record["pid"] for name, record in load_state(tmp_path / "run").items()}
    assert pids["problems"] == run.pid != pids["traces"], "generate ran in a child"
    lines = [line for line in log.splitlines() if line.startswith("[generate]")]
    assert lines[0] == "[generate] 0/4 prompts (0%), starting"
    assert any(line.startswith("[generate] 2/4 prompts (50%), ") and line.endswith(" left") for line in lines)
    assert lines[-1].startswith("[generate] done: 4/4 prompts (100%), ")
