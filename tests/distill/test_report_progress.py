"""A training run with stderr in a file (a Slurm job's output, nohup): plain progress lines with steps done of the
total, steps/s, loss and tokens/s and time left, from the main process alone, marked for the launcher when
distill/launch.py started it (issue 36, item 4: an SFT step ran 11 minutes without a line in its log)."""

import os
import sys

import pytest
from transformers import TrainerState

from reasonkit.distill.config import TrainConfig
from reasonkit.distill.launch import LAUNCHED, MARK, PROGRESS_MARK, run_logged
from reasonkit.distill.report import Monitor
from reasonkit.recipes.tasks.train_sets import write_sft
from reasonkit.ticker import EVERY_ENV


def run_monitor(progress: bool = False, **state_fields) -> None:
    state = TrainerState(max_steps=3, **state_fields)
    monitor = Monitor("sft", progress)
    monitor.on_train_begin(None, state, None)
    for step in (1, 2, 3):
        state.global_step = step
        monitor.on_log(None, state, None, logs={"loss": 1.0 / step, "num_tokens": 100.0 * step})
    monitor.on_train_end(None, state, None)


def test_the_main_process_prints_steps_loss_and_tokens_per_second(monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "0")
    monkeypatch.delenv(LAUNCHED, raising=False)
    run_monitor(progress=True)  # `distill train`'s main process, its stderr a file: lines, not a bar
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "[sft] 0/3 steps (0%), starting"
    assert lines[1].startswith("[sft] 1/3 steps (33%), ") and "steps/s, loss 1.0000, " in lines[1]
    assert " tok/s, ~" in lines[1] and lines[1].endswith(" left")
    assert lines[3].startswith("[sft] 3/3 steps (100%), ") and "loss 0.3333" in lines[3]
    assert lines[4].startswith("[sft] done: 3/3 steps (100%), ") and len(lines) == 5


def test_other_ranks_stay_silent_and_a_launched_main_process_marks_its_lines(monkeypatch, capsys):
    monkeypatch.setenv(EVERY_ENV, "0")
    run_monitor(is_world_process_zero=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(LAUNCHED, "1")  # distill/launch.py passes on the marked lines of its processes' output
    run_monitor()
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith(PROGRESS_MARK + "[sft] ") for line in lines)


def test_the_launcher_passes_progress_lines_on_even_with_nothing_to_say_to(tmp_path, capfd):
    """A train step inside ``distill run`` launches its processes with a ``say`` that drops what it is told."""
    child = f"print({PROGRESS_MARK + '[sft] 2/3 steps (66%)'!r}); print({MARK + 'note: a note'!r})"
    said = []
    code, error, _ = run_logged([sys.executable, "-c", child], dict(os.environ), tmp_path / "launch.log", said.append)
    assert code == 0 and error is None and said == ["note: a note"]
    assert capfd.readouterr().err == "[sft] 2/3 steps (66%)\n"
    assert PROGRESS_MARK + "[sft] 2/3 steps (66%)" in (tmp_path / "launch.log").read_text()  # the log keeps all


def test_a_train_step_in_a_log_prints_its_progress(tiny_model_dir, tmp_path, monkeypatch, capfd):
    """What ``distill run`` calls (train with progress off), its stderr captured: the lines come all the same."""
    from reasonkit.distill.train import train

    monkeypatch.setenv(EVERY_ENV, "0")
    data = write_sft(tmp_path / "sft", n=16)
    cfg = TrainConfig(
        method="sft",
        student=tiny_model_dir,
        data=str(data),
        out=str(tmp_path / "run"),
        batch_size=8,
        threads=1,
        max_steps=3,
        save_steps=1000,
    )
    train(cfg)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[sft]")]
    assert lines[0] == "[sft] 0/3 steps (0%), starting"
    second = [line for line in lines if line.startswith("[sft] 2/3 steps (66%), ")]
    assert second and ", loss " in second[0] and " tok/s, ~" in second[0]
    assert lines[-1].startswith("[sft] done: 3/3 steps (100%), ")


@pytest.mark.slow
def test_a_launched_train_step_inside_distill_run_prints_its_progress_once(
    tiny_model_dir, tmp_path, monkeypatch, capfd
):
    """Two processes under accelerate launch, started as ``distill run`` starts a train step (no log function):
    the main process's lines reach this process's stderr, once each, the other rank's never."""
    from reasonkit.distill.train import train

    monkeypatch.setenv(EVERY_ENV, "0")
    data = write_sft(tmp_path / "sft", n=16)
    cfg = TrainConfig(
        method="sft",
        student=tiny_model_dir,
        data=str(data),
        out=str(tmp_path / "run"),
        batch_size=4,
        threads=1,
        max_steps=3,
        save_steps=1000,
        launcher="accelerate",
        num_processes=2,
        accelerate_config="ddp",
    )
    assert train(cfg)["device"]["world_size"] == 2
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[sft]")]
    assert lines[0] == "[sft] 0/3 steps (0%), starting" and lines[-1].startswith("[sft] done: 3/3 steps (100%), ")
    assert [line.split(" ")[1] for line in lines[1:-1]] == ["1/3", "2/3", "3/3"]
