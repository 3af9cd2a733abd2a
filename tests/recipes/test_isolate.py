"""On a GPU machine every model step of a recipe runs in a process of its own, so the next step starts on
a GPU as empty as the first (issue 35, item 2). Forced on here (REASONKIT_ISOLATE_STEPS=always) on the CPU.

A real recipe (tiny generate and eval on the transformers backend) runs in a fresh interpreter, once in
children and once in-process: the children's results equal the in-process ones, and only the in-process
run leaves model objects behind. The failures use a probe stage (tests/helpers/isolate_stages.py) standing in for a
judge step: a UserError, a traceback, a SIGKILL, Ctrl-C and a killed ``distill run``.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from reasonkit.errors import UserError
from reasonkit.recipes import isolate, preflight
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, run
from reasonkit.stages import STAGES, StageSpec

# the probe stage by the name a step's child process imports too (the editable install maps reasonkit.tests)
PROBE = StageSpec(
    "reasonkit.tests.helpers.isolate_stages:ProbeConfig", "reasonkit.tests.helpers.isolate_stages:run_probe"
)
# the recipe in a fresh interpreter: what the parent holds afterwards (gc-tracked torch modules, the
# transformers modules a model load imports) is that run's alone
FRESH = """
import gc, json, os, sys
from pathlib import Path
from reasonkit.config import load_yaml
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import load_state, run
recipe = parse_recipe(load_yaml("r.yaml"), "r.yaml")
run(recipe)
import torch
gc.collect()
print("FRESH " + json.dumps({"pid": os.getpid(), "state": load_state(Path(recipe.out)),
                             "modeling": "transformers.modeling_utils" in sys.modules,
                             "modules": sum(isinstance(o, torch.nn.Module) for o in gc.get_objects())}))
"""
# what differs between two runs of the same recipe whatever runs them: clocks and speeds
VOLATILE = {"created", "updated", "finished", "seconds", "pid", "timing", "last_run"}


def model_recipe(model: str) -> dict:
    sampling = {"backend": "hf", "max_tokens": 12, "dtype": "float32"}
    return {
        "out": "run",
        "report": False,
        "steps": [
            {"name": "problems", "stage": "synth", "with": {"n": 4, "split": "test"}},
            {
                "name": "traces",
                "stage": "generate",
                "with": {"prompts": "${problems}", "teacher": model, "n": 1, **sampling},
            },
            {"name": "evaluate", "stage": "eval", "with": {"data": "${problems}", "model": model, "k": 1, **sampling}},
        ],
    }


def fresh_run(where: Path, recipe: dict, isolate_steps: str) -> dict:
    where.mkdir()
    (where / "r.yaml").write_text(yaml.safe_dump(recipe))
    env = {**os.environ, isolate.ENV: isolate_steps}
    out = subprocess.run(
        [sys.executable, "-c", FRESH], cwd=where, env=env, capture_output=True, text=True, check=False, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(next(line for line in out.stdout.splitlines() if line.startswith("FRESH "))[len("FRESH ") :])


def steady(value):
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VOLATILE and not k.endswith("_s")}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def test_model_steps_run_in_children_return_the_same_and_leave_nothing_behind(tmp_path, gen_model):
    recipe = model_recipe(gen_model)
    inside = fresh_run(tmp_path / "inside", recipe, "never")
    children = fresh_run(tmp_path / "children", recipe, "always")

    pids = {name: record["pid"] for name, record in children["state"].items()}
    assert pids["problems"] == children["pid"], "a step that loads no model stays in-process"
    assert len({children["pid"], pids["traces"], pids["evaluate"]}) == 3, pids
    assert {record["pid"] for record in inside["state"].values()} == {inside["pid"]}
    assert steady(children["state"]) == steady(inside["state"])
    # in-process, the steps' models outlive them (the leak the children exist for); in children, nothing stays
    assert inside["modeling"] and inside["modules"] > 0, inside
    assert not children["modeling"] and children["modules"] == 0, children


def probe_recipe(tmp_path, mode: str, sandbox: str = "auto"):
    steps = [
        {"name": "warm", "stage": "synth", "with": {"n": 2}},
        {"name": "critic", "stage": "judge", "with": {"mode": mode}},
    ]
    return parse_recipe({"out": str(tmp_path / "run"), "report": False, "sandbox": sandbox, "steps": steps}, "r.yaml")


@pytest.fixture
def probe(monkeypatch):
    """The probe stands in for a judge step, and steps are isolated as on a GPU machine."""
    monkeypatch.setitem(STAGES, "judge", PROBE)
    monkeypatch.setenv(isolate.ENV, "always")
    monkeypatch.setenv("PROBE_TEST_PID", str(os.getpid()))


def test_a_childs_result_and_the_recipes_sandbox_reach_the_run_state(tmp_path, probe):
    results = run(probe_recipe(tmp_path, "ok", sandbox="none"), echo=lambda _: None)
    assert results["critic"]["pid"] != os.getpid() and results["critic"]["sandbox"] == "none"
    assert load_state(tmp_path / "run")["critic"]["pid"] == results["critic"]["pid"]
    assert "PROBE-LIBRARY-LINE" in (tmp_path / "run" / "critic" / "run.log").read_text()


@pytest.mark.parametrize(
    "mode, how",
    [
        ("fail", "failed: probe: FAILED-ON-PURPOSE; see "),
        ("crash", "failed with RuntimeError: PROBE-CRASH (exit status 1); see "),
        ("kill", "failed: its process was killed by SIGKILL (the kernel's out-of-memory killer sends SIGKILL); see "),
    ],
)
def test_a_failing_child_is_one_error_naming_the_step_and_its_log(tmp_path, probe, capfd, mode, how):
    lines = []
    with pytest.raises(UserError) as failed:
        run(probe_recipe(tmp_path, mode), echo=lines.append)
    log = tmp_path / "run" / "critic" / "run.log"
    assert str(failed.value) == f"step critic (judge) {how}{log}"
    assert lines[-1] == f"[fail] critic: library logs in {log}", lines
    terminal = capfd.readouterr()
    assert "Traceback" not in terminal.out + terminal.err
    if mode == "crash":
        assert "RuntimeError: PROBE-CRASH" in log.read_text() and "Traceback" in log.read_text()
    assert not load_state(tmp_path / "run")["critic"]["done"]


def test_auto_isolates_where_a_gpu_is_visible(tmp_path, monkeypatch):
    monkeypatch.setitem(STAGES, "judge", PROBE)
    monkeypatch.delenv(isolate.ENV, raising=False)
    assert run(probe_recipe(tmp_path / "cpu", "ok"), echo=lambda _: None)["critic"]["pid"] == os.getpid()
    monkeypatch.setattr(preflight, "gpu_memory_gb", lambda: 80.0)  # torch's answer on an H100 machine
    monkeypatch.setattr(preflight, "check_fit", lambda *a: None)
    assert run(probe_recipe(tmp_path / "gpu", "ok"), echo=lambda _: None)["critic"]["pid"] != os.getpid()
    monkeypatch.setenv(isolate.ENV, "never")
    assert run(probe_recipe(tmp_path / "off", "ok"), echo=lambda _: None)["critic"]["pid"] == os.getpid()
    monkeypatch.setenv(isolate.ENV, "sometimes")
    with pytest.raises(UserError, match="REASONKIT_ISOLATE_STEPS='sometimes': expected one of auto, always, never"):
        run(probe_recipe(tmp_path / "bad", "ok"), echo=lambda _: None)


# ``distill run`` with a hanging probe step, its child's grace after Ctrl-C cut short
HANGING = f"""
import sys
from reasonkit import stages
from reasonkit.recipes import isolate
from reasonkit.recipes.recipe import parse_recipe
from reasonkit.recipes.runner import run
stages.STAGES["judge"] = stages.StageSpec({PROBE.config!r}, {PROBE.run!r})
isolate.STOP_GRACE_S = 0.5
steps = [{{"name": "critic", "stage": "judge", "with": {{"mode": "hang"}}}}]
run(parse_recipe({{"out": sys.argv[1], "report": False, "steps": steps}}, "r.yaml"))
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie holds nothing: it waits for init to reap it


def wait_for(predicate, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("end, group", [(signal.SIGINT, True), (signal.SIGINT, False), (signal.SIGKILL, False)])
def test_stopping_distill_run_stops_its_step_process(tmp_path, end, group):
    """Ctrl-C at the terminal (the whole process group) stops the child; a SIGINT to the parent alone
    terminates it after its grace; a killed parent takes it along (PR_SET_PDEATHSIG)."""
    env = {**os.environ, isolate.ENV: "always"}
    parent = subprocess.Popen(
        [sys.executable, "-c", HANGING, str(tmp_path / "run")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pid_file = tmp_path / "run" / "critic" / "pid"
    try:
        assert wait_for(pid_file.is_file), parent.communicate(timeout=5)
        child = int(pid_file.read_text())
        assert child != parent.pid and alive(child)
        if group:  # as the terminal sends Ctrl-C: to every process of the foreground group
            os.killpg(parent.pid, end)
        else:
            os.kill(parent.pid, end)
        parent.wait(timeout=30)
        assert wait_for(lambda: not alive(child), 15), f"step process {child} outlived distill run"
    finally:
        parent.kill()
        parent.communicate()
