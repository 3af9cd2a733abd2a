"""``distill run`` and ``distill validate``: a recipe's steps in order, resuming what is done.

Each step's fingerprint covers its stage, its resolved config, the fingerprints of the steps it reads and the content
of what it reads from outside the recipe (identity.py: a model's weights and tokenizer hashed, a Hub id at its
revision, a data file's bytes), so a teacher retrained at the same path reruns the steps that used it, and changing one
step's config reruns that step and everything downstream of it, and nothing else. A step whose fingerprint matches a
finished run is skipped and says so; one that was interrupted reruns with the same config, and the stage's own store
resumes it shard by shard (a train step resumes from its last complete checkpoint).

``--only STEP`` and ``--from STEP`` choose which steps run; they never delete work: a chosen step
that was interrupted resumes, and one that finished with the same config is skipped. Only
``--overwrite`` deletes a chosen step's output and redoes it (a changed config replaces the output
too: that step's fingerprint changed, so its old output is no longer what the recipe asks for).

Run state lives in ``OUT/_recipe_state.json``; library logs go to ``OUT/<step>/run.log``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from reasonkit.config import from_dict
from reasonkit.distill.config import LAUNCH_FIELDS
from reasonkit.engine import ENGINE_FIELDS
from reasonkit.errors import UserError
from reasonkit.recipes.isolate import MODEL_STAGES, StepTask, isolating, jsonable, run_in_child
from reasonkit.recipes.recipe import Recipe, Step, placeholders, references, resolve, step_dir
from reasonkit.stages import STAGES
from reasonkit.store import fingerprint

STATE = "_recipe_state.json"
# Settings that change how a stage runs, not what it writes: they never force a rerun. ``resume`` is
# the runner's to set (an interrupted train step resumes on a plain rerun); were it fingerprinted,
# ``--set sft.resume=true`` would look like a new config and delete the checkpoints it asks to keep.
# A train step's launch (launcher, num_processes, accelerate_config) is not fingerprinted either:
# resuming it on fewer GPUs is a train-stage question (its global batch must match), not a new run.
_NOT_FINGERPRINTED = {
    "overwrite",
    "resume",
    "allow_incomplete",
    "workers",
    "concurrency",
    "progress",
    "threads",
    "data_parallel",
    "report_to",
    *ENGINE_FIELDS,
    *LAUNCH_FIELDS,
}  # report_to: where curves go, not what is computed


@dataclasses.dataclass(frozen=True)
class PlannedStep:
    step: Step
    config: Any  # the stage's frozen config dataclass, fully resolved
    fingerprint: str


def validate(recipe: Recipe) -> list[PlannedStep]:
    """Check every step fully (keys, types, references, input paths) without loading a model.

    Every problem of every step is found before one UserError names them all (``distill validate`` shows a recipe's
    errors at once); a step that reads a step with problems is checked too, but not fingerprinted."""
    planned: list[PlannedStep] = []
    fingerprints: dict[str, str] = {}
    problems: list[str] = []
    for i, step in enumerate(recipe.steps):
        try:
            p = _plan_step(recipe, i, fingerprints)
        except UserError as e:
            problems += e.problems
            continue
        if p is not None:
            fingerprints[step.name] = p.fingerprint
            planned.append(p)
    if len(problems) > 1:
        raise UserError(f"{recipe.path}: {len(problems)} problems: {'; '.join(problems)}")
    if problems:
        raise UserError(problems[0])
    return planned


def _plan_step(recipe: Recipe, i: int, fingerprints: dict[str, str]) -> PlannedStep | None:
    """Step ``i`` checked and fingerprinted (None: it reads an earlier step that has problems of its own)."""
    step = recipe.steps[i]
    where = f"{recipe.path}: steps[{i}] ({step.name})"
    spec = STAGES[step.stage]
    earlier = [s.name for s in recipe.steps[:i]]
    problems = []
    for ref in references(step.config):
        if ref not in earlier:
            why = "a later step" if ref in {s.name for s in recipe.steps} else "no step of this recipe"
            problems.append(f"{where}: reads ${{{ref}}}, which {why} writes; a step may only read earlier steps")
    data = resolve(step.config, recipe)
    if spec.out_field in data:
        problems.append(f"{where}.with.{spec.out_field}: set by the runner (OUT/{step.name}); remove it")
    data[spec.out_field] = step_dir(recipe, step.name)
    try:
        config = from_dict(spec.config_class(), data, f"{step.name}")
    except UserError as e:
        problems += e.problems
        config = None
    if config is not None:
        problems += _missing_inputs(step, spec, config, where)
    if problems:
        raise UserError(*problems)
    upstream = [fingerprints.get(r) for r in references(step.config)]
    if None in upstream:  # an earlier step it reads has problems: those are said already
        return None
    semantic = _semantic(step, spec, config)
    if semantic.get("engine_args"):  # only the vLLM arguments that change what a row says
        from reasonkit.gen.engine_args import output_engine_args

        semantic["engine_args"] = output_engine_args(semantic["engine_args"])
    fp = fingerprint([step.stage, semantic, sorted(set(upstream)), _contents(step, spec, config, recipe)])
    return PlannedStep(step, config, fp)


def _missing_inputs(step: Step, spec, config, where: str) -> list[str]:
    """The input paths a step names (not through ``${step}``) that do not exist and are no Hub id."""
    return [
        f"{where}.with.{field_name}: {value}: no such file or directory"
        for field_name in spec.inputs
        for value in _as_list(getattr(config, field_name, None))
        if value and not references(step.config.get(field_name, "")) and not _exists_or_hub_id(value)
    ]


def _semantic(step: Step, spec, config) -> dict[str, Any]:
    """What a step's config says, as its fingerprint sees it: not where the run lives. The step's own
    ``out`` and every value that names another step (``${verified}/sft``) or a builtin (``${reasonkit}``)
    enter as the recipe wrote them, not resolved to this run's paths: what they hold is the upstream
    fingerprints' and :func:`_contents`' to say. So a run directory copied or moved elsewhere (or the
    recipe run from another clone) finds its finished steps finished (identity is content)."""
    semantic = {
        k: v for k, v in dataclasses.asdict(config).items() if k not in _NOT_FINGERPRINTED and k != spec.out_field
    }
    for key, raw in step.config.items():
        if key in semantic and placeholders(raw):
            semantic[key] = raw
    return semantic


def _contents(step: Step, spec, config, recipe: Recipe) -> dict[str, list[str]]:
    """The content identities of a step's inputs that no earlier step writes (those are covered
    by the upstream fingerprints): models through identity.model_identity, data through
    store.fingerprint_path. A rerun seeds the weight hashes from the step's own manifest, so an
    unchanged teacher is not read again."""
    from reasonkit.identity import model_identity
    from reasonkit.store import fingerprint_path

    api = getattr(config, "backend", None) == "openai"
    out: dict[str, list[str]] = {}
    for field_name in dict.fromkeys(spec.models + spec.inputs):
        if references(step.config.get(field_name, "")):
            continue
        values = [v for v in _as_list(getattr(config, field_name, None)) if v]
        if field_name in spec.models:
            _seed_weight_hashes(Path(step_dir(recipe, step.name)), values)
            out[field_name] = [model_identity(v, api=api) for v in values]
        else:
            out[field_name] = [fingerprint_path(v) for v in values]
    return out


def _seed_weight_hashes(step_out: Path, models: list[str]) -> None:
    """identity.remember the per-file hashes a generate or eval manifest recorded for its model."""
    from reasonkit.identity import remember
    from reasonkit.store import is_stage_dir, load_manifest

    for where in (step_out, step_out / "generations"):
        if not is_stage_dir(where):
            continue
        try:
            manifest = load_manifest(where)
        except UserError:  # a damaged directory: its step says so when it runs
            continue
        teacher = (manifest.get("config") or {}).get("teacher")
        if teacher in models:
            remember(teacher, manifest.get("teacher_files"))


def run(recipe: Recipe, **options) -> dict:
    """Run the recipe's steps in order; returns {step name: what its run function returned}.

    ``start``/``only`` choose the steps to run (``--from``/``--only``); ``overwrite`` deletes and
    redoes the chosen steps; ``verbose`` leaves library logs on the terminal instead of in
    ``OUT/<step>/run.log``. The recipe's ``sandbox`` holds for every step (and every process a step starts).
    """
    from reasonkit.sandbox.stage import restore_mode, use_mode

    previous = use_mode(recipe.sandbox if recipe.sandbox != "auto" else None)
    try:
        return _run(recipe, **options)
    finally:
        restore_mode(previous)


def _run(
    recipe: Recipe,
    *,
    start: str | None = None,
    only: str | None = None,
    overwrite: bool = False,
    verbose: bool = False,
    echo=print,
) -> dict:
    planned = validate(recipe)
    names = [p.step.name for p in planned]
    for flag, name in (("--from", start), ("--only", only)):
        if name is not None and name not in names:
            recipe.step(name)  # raises with a did-you-mean
    out = Path(recipe.out)
    state = load_state(out)
    first = names.index(start) if start else 0
    chosen = [p for i, p in enumerate(planned) if (p.step.name == only if only is not None else i >= first)]
    from reasonkit.recipes.preflight import check, check_fit, gpu_memory_gb

    # every package the steps about to run import, before the first of them starts (and before OUT exists),
    # and on a GPU machine whether each fits its GPU as --plan estimates it
    to_run = [p for p in chosen if overwrite or not _finished(state, p, recipe)]
    check(recipe, to_run)
    gpu_gb = gpu_memory_gb()
    check_fit(recipe, planned, {p.step.name for p in to_run}, state, gpu_gb)
    isolated = isolating(gpu_gb is not None)  # each model step in a process of its own (recipes/isolate.py)
    follower = _follower(chosen, only)
    if follower is not None:  # another machine of a multi-node train step: train with machine 0, record nothing
        return _follow(follower, state, overwrite, echo)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for index, p in enumerate(planned):
        name = p.step.name
        if only is not None and name != only:
            continue
        if only is None and index < first:
            if not _finished(state, p, recipe):
                raise UserError(f"--from {start}: earlier step {name!r} has not finished; run without --from first")
            continue
        named = name == only or (start is not None and index >= first)
        if not overwrite and _finished(state, p, recipe):
            hint = "; pass --overwrite to redo it" if named else ""
            echo(f"[skip] {name} ({p.step.stage}): finished with the same config ({p.fingerprint}){hint}")
            results[name] = state[name].get("result")
            continue
        results[name] = _run_step(p, recipe, state, overwrite=overwrite, verbose=verbose, isolated=isolated, echo=echo)
    return results


def _follow(follower: PlannedStep, state: dict, overwrite: bool, echo) -> dict:
    """Train the multi-node step ``follower`` as a machine of rank > 0 (machine 0 records the run state)."""
    previous = state.get(follower.step.name, {})
    resume = bool(previous) and previous.get("fingerprint") == follower.fingerprint and not overwrite
    echo(
        f"[run]  {follower.step.name} ({follower.step.stage}): with machine 0, as machine "
        f"{_rank(follower.config)} of {follower.config.num_machines}"
    )
    config = _with_flags(follower.config, overwrite=overwrite, resume=resume)
    return {follower.step.name: jsonable(STAGES["train"].run_function()(config))}


def _run_step(p: PlannedStep, recipe: Recipe, state: dict, *, overwrite: bool, verbose: bool, isolated: bool, echo):
    """Run one step that is not finished (or is to be redone), recording it in the run state before and after;
    returns what its run function returned, as the state keeps it."""
    name, out = p.step.name, Path(recipe.out)
    previous = state.get(name, {})
    changed = previous.get("fingerprint") not in (None, p.fingerprint)
    resuming = bool(previous) and not changed and not overwrite
    config = _with_flags(p.config, overwrite=overwrite or changed, resume=resuming)
    why = "overwrite requested" if overwrite else "config changed" if changed else "resuming" if resuming else "new"
    echo(f"[run]  {name} ({p.step.stage}): {why}")
    state[name] = {"fingerprint": p.fingerprint, "done": False, "stage": p.step.stage}
    _save_state(out, state)
    t0 = time.perf_counter()
    preload = ("ray",) if getattr(config, "engine", None) == "ray" else ()
    task = StepTask(name, p.step.stage, STAGES[p.step.stage], config, step_dir(recipe, name), verbose, preload)
    result, pid = _execute(task, isolated and p.step.stage in MODEL_STAGES, echo)
    seconds = time.perf_counter() - t0
    state[name] = {
        "fingerprint": p.fingerprint,
        "done": True,
        "stage": p.step.stage,
        "seconds": round(seconds, 1),
        "pid": pid,  # the process that ran it: this one, or a child of its own (recipes/isolate.py)
        "result": jsonable(result),
    }
    _save_state(out, state)
    echo(f"[done] {name} in {seconds:.1f}s")
    return state[name]["result"]


def _execute(task: StepTask, in_child: bool, echo) -> tuple[Any, int]:
    """Run one step, in a child process or in this one; returns (what it returned, the pid that ran it)."""
    if in_child:
        return run_in_child(task, echo)
    from reasonkit.recipes.logs import step_logs

    with step_logs(Path(task.directory), verbose=task.verbose, preload=task.preload, echo=echo):
        return task.spec.run_function()(task.config), os.getpid()


def _rank(config) -> int:
    from reasonkit.distill.launch import machines

    return machines(config).rank


def _follower(chosen: list[PlannedStep], only: str | None) -> PlannedStep | None:
    """The multi-node train step this machine joins as machine rank > 0, else None (this is machine 0 or the
    steps are single-machine). Such a machine runs that step alone (``--only``): the steps before it ran on
    machine 0, and only machine 0 records the run state."""
    multi = [p for p in chosen if p.step.stage == "train" and getattr(p.config, "num_machines", 1) > 1]
    joining = [p for p in multi if _rank(p.config) > 0]
    if not joining:
        return None
    if only is None or len(chosen) != 1:
        names = ", ".join(p.step.name for p in joining)
        raise UserError(
            f"this is machine {_rank(joining[0].config)} of a multi-node train step ({names}): run it alone here "
            f"with --only {joining[0].step.name}; every other step runs on machine 0"
        )
    return joining[0]


def _with_flags(config: Any, *, overwrite: bool, resume: bool) -> Any:
    """The step's config with ``overwrite``/``resume`` set where the stage has those settings.

    ``resume`` exists on train steps only (the other stages' stores resume by themselves): a train
    step that was started with this fingerprint and did not finish continues from its checkpoint.
    """
    fields = {f.name for f in dataclasses.fields(config)}
    flags = {k: True for k, on in (("overwrite", overwrite), ("resume", resume)) if on and k in fields}
    return dataclasses.replace(config, **flags) if flags else config


def _finished(state: dict, p: PlannedStep, recipe: Recipe) -> bool:
    record = state.get(p.step.name) or {}
    return (
        bool(record.get("done"))
        and record.get("fingerprint") == p.fingerprint
        and Path(step_dir(recipe, p.step.name)).exists()
    )


def load_state(out: Path) -> dict:
    path = out / STATE
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise UserError(f"{path}: unreadable run state; delete it to rerun every step") from None


def _save_state(out: Path, state: dict) -> None:
    tmp = out / f".{STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=2, default=str))
    tmp.replace(out / STATE)


def _exists_or_hub_id(value: str) -> bool:
    """A local path that exists, or an ``org/name`` Hub id (checked when the stage loads it)."""
    from reasonkit.gen.preflight import looks_like_hub_id

    return Path(value).exists() or looks_like_hub_id(str(value))


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
