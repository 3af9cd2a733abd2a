"""On a GPU machine, each recipe step that holds a model runs in a process of its own.

A step run inside ``distill run`` does not give its GPU memory back when it returns: TRL's fused LM
head leaves the model in a reference cycle (``model.forward = MethodType(...)``), torch's caching
allocator keeps what it freed, and vLLM frees its weights in its engine-core child, not here. vLLM
0.31 then refuses to start below ``gpu_memory_utilization`` x the GPU of free memory, and a trainer
runs out of memory: an eval after an in-process SFT, GRPO after a reward model, a DPO after its SFT.
Only the end of a process returns all of it, so such a step runs in a fresh ``python`` child (CUDA
cannot be forked) and the next one starts on a GPU as empty as the first.

The child inherits the terminal (the stage's own output and progress reach the user as before) and
the environment (the recipe's sandbox mode, vLLM's settings), routes library logs to the step's
``run.log`` itself (recipes/logs.py), and answers what the stage returned, made JSON-safe, in a file.
A failing child is one UserError naming the step and its log; a Python traceback goes to the
log, not the terminal. The child dies with ``distill run`` (PR_SET_PDEATHSIG), so a killed run
leaves no process holding the GPUs, and Ctrl-C, which reaches both, stops both.

On a CPU machine steps stay in-process: there is no GPU memory to give back, and each child pays
the library imports again (seconds per step on the quickstart's 2 cores).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reasonkit.errors import UserError

#: ``auto`` (a child per model step where torch sees a CUDA GPU), ``always`` or ``never``. A property of
#: the machine, not of what a recipe writes, so an environment variable and not a recipe key: no step's
#: output or fingerprint depends on it.
ENV = "REASONKIT_ISOLATE_STEPS"
CHOICES = ("auto", "always", "never")
#: The stages that load a model (a policy, a teacher, a judge, a reward model) onto a GPU. prepare-student
#: reads only a tokenizer; synth, student (a tiny random model on the CPU), filter and pairs load none.
MODEL_STAGES = frozenset({"generate", "train", "eval", "score", "label-steps", "judge", "critique"})
#: After Ctrl-C, how long the child (which got the terminal's SIGINT too) has to stop by itself (a stage
#: commits its last shard, vLLM shuts its engine down) before it is terminated.
STOP_GRACE_S = 30.0


def isolating(gpu_visible: bool) -> bool:
    """Whether model steps run in child processes here: ``REASONKIT_ISOLATE_STEPS``, by default where
    torch sees a CUDA GPU (``gpu_visible``, as the runner's fit check found it)."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise UserError(f"{ENV}={os.environ[ENV]!r}: expected one of {', '.join(CHOICES)}")
    return value == "always" or (value == "auto" and gpu_visible)


@dataclasses.dataclass(frozen=True)
class StepTask:
    """What a child needs to run one step: all picklable (the stage's spec, not its loaded function)."""

    name: str
    stage: str
    spec: Any  # stages.StageSpec: the run function by import path
    config: Any  # the stage's frozen config dataclass
    directory: str  # OUT/<step>, where its run.log goes
    verbose: bool
    preload: tuple[str, ...]


#: The child's command line: the parent's sys.path first (a stage a test registered, a user's module),
#: then the task; ``python -c`` so that nothing re-runs the parent's ``__main__`` as multiprocessing's spawn does.
_CHILD = (
    "import pickle, sys; f = open(sys.argv[1], 'rb'); sys.path[:] = pickle.load(f); "
    "from reasonkit.recipes.isolate import child_main; child_main(f, sys.argv[2], int(sys.argv[3]))"
)
_ANSWER = "answer.json"


def run_in_child(task: StepTask, echo: Callable[[str], None] = print) -> tuple[Any, int]:
    """Run ``task`` in a child process; returns (its JSON-safe result, the child's pid).

    Raises UserError naming the step and its log when the child fails, and passes a KeyboardInterrupt
    on after stopping the child.
    """
    import pickle
    import shutil
    import subprocess
    import tempfile

    talk = Path(tempfile.mkdtemp(prefix=f"distill-step-{task.name}-"))  # not OUT/<step>: a stage owns that
    try:
        with open(talk / "task.pickle", "wb") as f:
            pickle.dump(list(sys.path), f)
            pickle.dump(task, f)
        for stream in (sys.stdout, sys.stderr):  # what the parent printed comes before what the child prints
            stream.flush()
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(talk / "task.pickle"), str(talk / _ANSWER), str(os.getpid()), task.name]
        )  # the name for ps; terminal, env and cwd inherited
        try:
            code = child.wait()
        except BaseException:  # Ctrl-C (or an error) in the parent: no orphan keeps the GPUs
            _stop(child)
            raise
        answer = json.loads((talk / _ANSWER).read_text()) if (talk / _ANSWER).is_file() else None
    finally:
        shutil.rmtree(talk, ignore_errors=True)
    if answer is not None and answer[0] == "done":
        return answer[1], child.pid
    from reasonkit.recipes.logs import announce_failure

    announce_failure(Path(task.directory), echo)
    if answer is not None and answer[0] == "interrupted":  # SIGINT reached the child alone: stop the run
        raise KeyboardInterrupt
    raise UserError(_failure(task, answer, code))


def _failure(task: StepTask, answer: list | None, code: int) -> str:
    """The one line that says which step failed, how, and where its log is."""
    from reasonkit.recipes.logs import LOG

    log = Path(task.directory) / LOG
    see = f"; see {log}" if log.is_file() else ""
    head = f"step {task.name} ({task.stage}) failed"
    if answer is not None and answer[0] == "error":  # a UserError: its message is the whole story
        return f"{head}: {answer[1]}{see}"
    if answer is not None:  # an exception: its traceback went to the log
        return f"{head} with {answer[1]} (exit status {code}){see}"
    if code < 0:
        name = signal.Signals(-code).name
        oom = " (the kernel's out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else ""
        return f"{head}: its process was killed by {name}{oom}{see}"
    return f"{head}: its process exited with status {code} before returning a result{see}"


def _stop(child) -> None:
    """Give the child ``STOP_GRACE_S`` to end after Ctrl-C, then terminate it, then kill it."""
    import subprocess

    for end, wait in ((None, STOP_GRACE_S), (child.terminate, 5.0), (child.kill, None)):
        if end is not None:
            end()
        try:
            child.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def child_main(task_file, answer: str, parent: int) -> None:
    """The child: run the step under its log routing and answer ["done", result] or why not."""
    import pickle

    from reasonkit.distill.launch import die_with_parent
    from reasonkit.recipes.logs import step_logs

    die_with_parent()
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    task: StepTask = pickle.load(task_file)
    task_file.close()
    try:
        with step_logs(Path(task.directory), verbose=task.verbose, preload=task.preload, echo=lambda _: None):
            result = task.spec.run_function()(task.config)
        message, code = ["done", jsonable(result)], 0
    except UserError as e:
        message, code = ["error", str(e)], 2
    except KeyboardInterrupt:
        message, code = ["interrupted", None], 130
    except BaseException as e:  # noqa: BLE001 - any other failure (SystemExit too): its traceback to the step's log
        _log_traceback(Path(task.directory))
        message, code = ["crash", f"{type(e).__name__}: {e}"[:500]], 1
    tmp = f"{answer}.tmp"  # written whole, then renamed: a child killed meanwhile leaves no half answer
    with open(tmp, "w") as f:
        json.dump(message, f)
    os.replace(tmp, answer)
    sys.exit(code)


def _log_traceback(directory: Path) -> None:
    from reasonkit.recipes.logs import LOG

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOG, "a", encoding="utf-8") as log:
        log.write(f"step process {os.getpid()} failed:\n{traceback.format_exc()}")


def jsonable(value: Any) -> Any:
    """A small JSON-safe summary of what a stage returned (manifests, reports): the run state keeps it,
    and a child sends it back (a stage's live objects never cross, nor stay in the parent)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)
    if len(text) > 20_000:  # keep the state file small: a manifest's shard list is not needed here
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k not in ("shards", "config")}
        return None
    return json.loads(text)
