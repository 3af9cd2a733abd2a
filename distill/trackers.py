"""``--report-to``: training curves and evaluation figures in the trackers people use, none required.

tensorboard, wandb, trackio, mlflow (several at once), each an extra (``pip install 'reasonkit[wandb]'``). A train
step hands the names to transformers (``TrainingArguments.report_to``: its callbacks log every step's loss and
learning rate) and adds the run's protocol (the settings, the data and student identities, the versions) as the
tracker's config; an evaluation logs its summary (pass@1, cons@k, pass@k, counts) as a run of its own. Where
each writes is the tracker's own business (``WANDB_DIR``/``WANDB_MODE``, ``TRACKIO_DIR``, ``MLFLOW_TRACKING_URI``),
except TensorBoard's event files, which go to ``OUT/tensorboard`` unless ``TENSORBOARD_LOGGING_DIR`` says otherwise.

>>> names("tensorboard,wandb"), names(["mlflow"]), names(None), names("none")
(('tensorboard', 'wandb'), ('mlflow',), (), ())
>>> names("comet")
Traceback (most recent call last):
...
ValueError: report_to: comet is not a tracker reasonkit logs to (tensorboard, wandb, trackio, mlflow; none: no tracker)
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

#: The trackers, each with the module it needs and the extra that installs it.
TRACKERS = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "trackio": ("trackio", "trackio"),
    "mlflow": ("mlflow", "mlflow"),
}
#: what ``--report-to`` accepts (train, eval): a tracker, or none
REPORT_TO = (*TRACKERS, "none")
TENSORBOARD_DIR = "tensorboard"  # OUT/tensorboard: the event files of a run's TensorBoard
#: A run's project where the tracker groups runs by one (transformers' TrainingArguments.project default, so a
#: train step's run and its evaluations land together); WANDB_PROJECT and TRACKIO_PROJECT name another.
PROJECT = "huggingface"


def names(value) -> tuple[str, ...]:
    """The trackers named by a flag, a YAML list or a comma-separated string; "none" or nothing: none."""
    if value is None:
        return ()
    items = [part for v in ([value] if isinstance(value, str) else value) for part in str(v).split(",")]
    found = tuple(dict.fromkeys(i.strip().lower() for i in items if i.strip() and i.strip().lower() != "none"))
    for name in found:
        if name not in TRACKERS:
            raise ValueError(
                f"report_to: {name} is not a tracker reasonkit logs to ({', '.join(TRACKERS)}; none: no tracker)"
            )
    return found


def require(trackers: tuple[str, ...]) -> None:
    """Each tracker named can be imported, checked before any work; else one line saying what to install."""
    from reasonkit.errors import UserError

    missing = [t for t in trackers if importlib.util.find_spec(TRACKERS[t][0]) is None]
    if missing:
        extras = ",".join(TRACKERS[t][1] for t in missing)
        raise UserError(f"--report-to {','.join(missing)}: not installed; pip install 'reasonkit[{extras}]'")


def training_arguments(trackers: tuple[str, ...], out: str | Path) -> dict:
    """TrainingArguments' say in it: the trackers (transformers' own callbacks) and the run's name (OUT's)."""
    return {"report_to": list(trackers) or "none", "run_name": Path(out).name or str(out)}


def attach(trainer, trackers: tuple[str, ...], protocol: dict, out: Path) -> None:
    """Point TensorBoard at OUT/tensorboard and log the protocol as each tracker's config when training starts."""
    if not trackers:
        return
    from transformers import TrainerCallback
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = str(out / TENSORBOARD_DIR)

    class Protocol(TrainerCallback):
        # after transformers' own callbacks (they come first in the handler): each tracker's run exists by then
        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                log_config(trackers, protocol, trainer.callback_handler.callbacks)

    trainer.add_callback(Protocol())


def log_config(trackers: tuple[str, ...], protocol: dict, callbacks=()) -> None:
    """The protocol as the open run's config, in each tracker (under ``reasonkit``, apart from the trainer's own)."""
    config = {"reasonkit": _plain(protocol)}
    if "tensorboard" in trackers:
        from transformers.integrations import TensorBoardCallback

        for callback in callbacks:
            if isinstance(callback, TensorBoardCallback) and callback.tb_writer is not None:
                callback.tb_writer.add_text("reasonkit/protocol", _markdown_json(protocol))
    if "wandb" in trackers:
        import wandb

        if wandb.run is not None:
            wandb.run.config.update(config, allow_val_change=True)
    if "trackio" in trackers:
        import trackio

        trackio.config.update(config, allow_val_change=True)
    if "mlflow" in trackers:
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.log_dict(config, "reasonkit_protocol.json")
            mlflow.log_params({k: str(v)[:500] for k, v in _flat(config).items()})


def log_eval(trackers: tuple[str, ...], summary: dict, *, name: str, out: Path) -> None:
    """An evaluation's summary as a run of its own in each tracker: its scores as figures, its protocol as config."""
    if not trackers:
        return
    scores = {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    scores.update(
        {f"counts/{k}": float(v) for k, v in (summary.get("counts") or {}).items() if isinstance(v, (int, float))}
    )
    config = {"reasonkit": _plain(summary.get("protocol") or {})}
    if "tensorboard" in trackers:
        _tensorboard_eval(scores, summary, out)
    if "wandb" in trackers:
        import wandb

        run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", PROJECT),
            name=name,
            job_type="eval",
            config=config,
            reinit="create_new",
        )
        run.log(scores)
        run.summary.update(scores)
        run.finish()
    if "trackio" in trackers:
        import trackio

        trackio.init(project=os.environ.get("TRACKIO_PROJECT", PROJECT), name=name, config=config)
        trackio.log(scores)
        trackio.finish()
    if "mlflow" in trackers:
        import mlflow

        with mlflow.start_run(run_name=name):
            mlflow.set_tag("reasonkit.kind", "eval")
            mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in scores.items()})
            mlflow.log_dict(_plain(summary), "summary.json")


def _tensorboard_eval(scores: dict, summary: dict, out: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    where = os.environ.get("TENSORBOARD_LOGGING_DIR") or str(out / TENSORBOARD_DIR)
    writer = SummaryWriter(log_dir=where)
    try:
        for key, value in scores.items():
            writer.add_scalar(f"eval/{key}", value, 0)
        writer.add_text("reasonkit/protocol", _markdown_json(summary.get("protocol") or {}))
    finally:
        writer.close()


def _plain(value) -> dict:
    """JSON's types only (a tracker's config rejects paths, tuples, numpy scalars)."""
    return json.loads(json.dumps(value, default=str))


def _markdown_json(value) -> str:
    return "```json\n" + json.dumps(value, indent=2, default=str) + "\n```"  # TensorBoard shows text as Markdown


def _flat(value: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: mlflow's parameters are flat."""
    flat = {}
    for k, v in value.items():
        if isinstance(v, dict) and v:
            flat.update(_flat(v, f"{prefix}{k}."))
        else:
            flat[f"{prefix}{k}"] = v
    return flat
