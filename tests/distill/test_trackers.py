"""--report-to: a real training run's curves and protocol, and an evaluation's summary, read back from each tracker's
own offline store (TensorBoard event files, a WANDB_MODE=offline run, trackio's local SQLite store, an mlflow file
store). Each tracker is an extra: a test needing one that is not installed is skipped, saying which."""

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from reasonkit.distill import trackers
from reasonkit.distill.config import TrainConfig
from reasonkit.errors import UserError

DISTILL = Path(sys.executable).parent / "distill"
INSTALLED = [t for t, (module, _) in trackers.TRACKERS.items() if importlib.util.find_spec(module)]


def offline_env(tmp: Path) -> dict:
    """Every tracker writing under ``tmp`` and nowhere else."""
    import os

    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp / "wandb"),
        "WANDB_SILENT": "true",
        "TRACKIO_DIR": str(tmp / "trackio"),
        "MLFLOW_TRACKING_URI": (tmp / "mlruns").as_uri(),
        "MLFLOW_ALLOW_FILE_STORE": "true",
    }  # mlflow 3 keeps its file store for whoever asks for it


def needs(name: str) -> None:
    if name not in INSTALLED:
        pytest.skip(f"{name} is not installed (pip install 'reasonkit[{trackers.TRACKERS[name][1]}]')")


# -- reading each tracker's store back ------------------------------------------------------------------------------
def tensorboard_events(folder: Path) -> tuple[dict[str, list[float]], dict[str, str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in acc.Tags()["tensors"]}
    return scalars, texts


def wandb_records(folder: Path) -> tuple[dict, list[dict], dict]:
    """(config, history rows, summary) of the one offline run under ``folder``: its .wandb file is a LevelDB-style
    log (32 KiB blocks, 7-byte record headers) of wandb's protobuf records."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    data, pos, pending, records = path.read_bytes(), 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    config, history, summary = {}, [], {}
    for r in records:
        kind = r.WhichOneof("record_type")
        if kind in ("config", "run"):  # a config given to wandb.init travels in the run record
            items = r.config.update if kind == "config" else r.run.config.update
            config.update({i.key: json.loads(i.value_json) for i in items})
        elif kind == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
        elif kind == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update})
    return config, history, summary


def trackio_store(folder: Path, run: str) -> tuple[dict, list[dict]]:
    con = sqlite3.connect(folder / f"{trackers.PROJECT}.db")
    config = json.loads(con.execute("select config from configs where run_name = ?", (run,)).fetchone()[0])
    metrics = [
        json.loads(m) for (m,) in con.execute("select metrics from metrics where run_name = ? order by step", (run,))
    ]
    return config, metrics


def mlflow_run(folder: Path, name: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(folder.as_uri())
    (run,) = [r for r in client.search_runs(["0"]) if r.info.run_name == name]
    return run, client


# -- a real training run ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tiny_model_dir, tmp_path_factory):
    from reasonkit.recipes.tasks.train_sets import write_sft

    if not INSTALLED:
        pytest.skip("no tracker installed (pip install 'reasonkit[trackers]')")
    tmp = tmp_path_factory.mktemp("trackers")
    data = write_sft(tmp / "sft", n=16)
    out = tmp / "sft_run"
    args = [
        str(DISTILL),
        "train",
        "--method",
        "sft",
        "--student",
        tiny_model_dir,
        "--data",
        str(data),
        "--out",
        str(out),
        "--max-steps",
        "3",
        "--batch-size",
        "4",
        "--set",
        "threads=1",
    ] + [f"--report-to={t}" for t in INSTALLED]
    done = subprocess.run(args, capture_output=True, text=True, env=offline_env(tmp), cwd=tmp, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, json.loads((out / "report.json").read_text())


@pytest.mark.slow
def test_tensorboard_holds_the_loss_curve_and_the_protocol(trained):
    needs("tensorboard")
    tmp, report = trained
    scalars, texts = tensorboard_events(tmp / "sft_run" / trackers.TENSORBOARD_DIR)
    assert scalars["train/loss"] == pytest.approx([r["loss"] for r in report["history"]])
    protocol = json.loads(texts["reasonkit/protocol/text_summary"].removeprefix("```json\n").removesuffix("\n```"))
    assert (
        protocol["student_identity"] == report["student_identity"]
        and protocol["data_fingerprint"] == report["data_fingerprint"]
    )
    assert protocol["config"]["method"] == "sft" and "report_to" not in protocol["config"]


@pytest.mark.slow
def test_wandb_offline_run_holds_the_curve_and_the_protocol_as_config(trained):
    needs("wandb")
    tmp, report = trained
    config, history, _ = wandb_records(tmp / "wandb")
    assert config["reasonkit"]["student_identity"] == report["student_identity"]
    assert config["reasonkit"]["fingerprint"] == report["fingerprint"]
    losses = [h["train/loss"] for h in history if "train/loss" in h]
    assert losses == pytest.approx([r["loss"] for r in report["history"]])


@pytest.mark.slow
def test_trackio_local_store_holds_the_curve_and_the_protocol(trained):
    needs("trackio")
    tmp, report = trained
    config, metrics = trackio_store(tmp / "trackio", "sft_run")  # the run is named after OUT
    assert config["reasonkit"]["data_fingerprint"] == report["data_fingerprint"]
    assert [m["train/loss"] for m in metrics if "train/loss" in m] == pytest.approx(
        [r["loss"] for r in report["history"]]
    )


@pytest.mark.slow
def test_mlflow_file_store_holds_the_curve_and_the_protocol(trained, monkeypatch):
    needs("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    tmp, report = trained
    run, client = mlflow_run(tmp / "mlruns", "sft_run")
    assert run.data.params["reasonkit.student_identity"] == report["student_identity"]
    assert run.data.params["reasonkit.config.method"] == "sft"
    curve = [m.value for m in client.get_metric_history(run.info.run_id, "loss")]
    assert curve == pytest.approx([r["loss"] for r in report["history"]])


# -- an evaluation's summary ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """An evaluation scored by the eval stage's own score(), its summary logged by log_eval in a process of its own."""
    from ..helpers.view import write_eval

    if not INSTALLED:
        pytest.skip("no tracker installed (pip install 'reasonkit[trackers]')")
    tmp = tmp_path_factory.mktemp("eval_trackers")
    out = write_eval(tmp / "eval_sft", {f"e{i}": [j < i % 5 for j in range(4)] for i in range(10)})
    code = (
        "import json, sys; from pathlib import Path; from reasonkit.distill.trackers import log_eval; "
        f"out = Path({str(out)!r}); log_eval(tuple(sys.argv[1:]), json.loads((out / 'summary.json').read_text()), "
        "name='eval_sft', out=out)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *INSTALLED],
        capture_output=True,
        text=True,
        env=offline_env(tmp),
        cwd=tmp,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_an_evaluations_summary_reaches_every_tracker(evaluated, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    tmp, summary = evaluated
    pass1 = summary["pass@1"]
    if "tensorboard" in INSTALLED:
        scalars, texts = tensorboard_events(tmp / "eval_sft" / trackers.TENSORBOARD_DIR)
        assert scalars["eval/pass@1"] == pytest.approx([pass1]) and scalars["eval/cons@4"] == pytest.approx(
            [summary["cons@4"]]
        )
        assert '"temperature": 0.6' in texts["reasonkit/protocol/text_summary"]
    if "wandb" in INSTALLED:
        config, _, logged = wandb_records(tmp / "wandb")
        assert logged["pass@1"] == pytest.approx(pass1) and config["reasonkit"]["k"] == 4
    if "trackio" in INSTALLED:
        config, metrics = trackio_store(tmp / "trackio", "eval_sft")
        assert metrics[0]["pass@1"] == pytest.approx(pass1) and config["reasonkit"]["temperature"] == 0.6
    if "mlflow" in INSTALLED:
        run, _ = mlflow_run(tmp / "mlruns", "eval_sft")
        assert run.data.metrics["pass_at_1"] == pytest.approx(pass1) and run.data.tags["reasonkit.kind"] == "eval"


# -- the settings ------------------------------------------------------------------------------------------------------  # noqa: E501
def test_names_are_checked_and_a_missing_tracker_names_its_extra(monkeypatch):
    assert TrainConfig(method="sft", student="m", data="d", out="o", report_to="tensorboard, wandb").trackers == (
        "tensorboard",
        "wandb",
    )
    with pytest.raises(ValueError, match="comet is not a tracker"):
        TrainConfig(method="sft", student="m", data="d", out="o", report_to=["comet"])
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UserError) as e:
        trackers.require(("wandb", "mlflow"))
    assert str(e.value) == "--report-to wandb,mlflow: not installed; pip install 'reasonkit[wandb,mlflow]'"


def test_a_tracker_reruns_nothing(tmp_path):
    """Where the curves go is no part of what a step computes: a finished run stays finished with --report-to."""
    from reasonkit.config import load_yaml
    from reasonkit.recipes.command import QUICKSTART, with_trackers
    from reasonkit.recipes.recipe import parse_recipe
    from reasonkit.recipes.runner import validate

    a = TrainConfig(method="sft", student="m", data="d", out="o")
    assert (
        a.fingerprinted()
        == TrainConfig(method="sft", student="m", data="d", out="o", report_to="wandb").fingerprinted()
    )
    recipe = parse_recipe(load_yaml(QUICKSTART), str(QUICKSTART), [], out=str(tmp_path / "qs"))
    tracked = with_trackers(recipe, tuple(INSTALLED[:1] or ["none"]))
    if INSTALLED:
        assert all(s.config.get("report_to") == INSTALLED[:1] for s in tracked.steps if s.stage in ("train", "eval"))
    assert [p.fingerprint for p in validate(recipe)] == [p.fingerprint for p in validate(tracked)]
