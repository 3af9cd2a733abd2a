"""`distill train --method prm`: token classification at the last token of each step (TRL's former
PRMTrainer layout) on the embedded teacher (CPU). It learns a bad step it can see, on held-out
solutions, beyond what answering "good" everywhere scores; the saved model is a plain token-classification
model carrying its step separator; bad input is one line."""

import json
import random
import re
from statistics import mean

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from reasonkit.cli import cli
from reasonkit.distill.config import TrainConfig
from reasonkit.distill.reward import heads
from reasonkit.distill.reward.prm import IGNORE, encode_table, read
from reasonkit.distill.train import train
from reasonkit.recipes.tasks import math as task
from reasonkit.reward.steps import encode_steps, first_error


def steps_table(n: int, seed: int = 0) -> pa.Table:
    """The task's worked solutions, one step a line of the reasoning. Half of them go wrong at a random
    step, which leaves its digit unwritten ("units ?") and ends the solution there: labels
    [True, ..., True, False]. A bad step the model can see in the step itself; a wrong digit needs the
    arithmetic checked, which the 1.1M teacher did not learn to do in 150 steps (measured: it stayed at
    always "good")."""
    rng = random.Random(seed)
    rows = []
    for p in task.make_problems(n, seed):
        lines = task.solution(p).split("<think>\n")[1].split("\n</think>")[0].split("\n")
        labels = [True] * len(lines)
        if rng.random() < 0.5:
            k = rng.choice([i for i, line in enumerate(lines) if re.search(r"(units|tens|hundreds) \d", line)])
            lines = lines[:k] + [re.sub(r"(units|tens|hundreds) \d", r"\1 ?", lines[k], count=1)]
            labels = [True] * k + [False]
        rows.append(
            {
                "id": p["id"],
                "prompt": task.user_content(p["problem"]) + "\n",
                "completions": lines,
                "labels": labels,
                "soft": [float(g) for g in labels],
            }
        )
    return pa.Table.from_pylist(rows)


def config(student, data, out, **kw):
    base = dict(
        method="prm",
        student=str(student),
        data=str(data),
        out=str(out),
        threads=1,
        batch_size=8,
        save_steps=1000,
        lr_scheduler="constant",
        warmup=0.0,
        eval_share=0.25,
    )
    return TrainConfig(**{**base, **kw})


@pytest.mark.slow
def test_prm_learns_the_bad_step_on_held_out_solutions(teacher_dir, tmp_path):
    # Measured (the head's init is seeded): step accuracy 0.59 (random head) -> 1.00 (always "good": 0.87),
    # first-error accuracy 0.16 -> 1.00 (always "good": 0.53) on 32 held-out solutions after 80 steps; after 40
    # steps it still answered "good" everywhere; LoRA at lr 3e-3, 60 steps: 0.99 and 0.97.
    data = tmp_path / "steps.parquet"
    pq.write_table(steps_table(128), data)
    report = train(config(teacher_dir, data, tmp_path / "prm", full=True, lr=5e-4, max_steps=80))
    losses = [r["loss"] for r in report["history"]]
    assert mean(losses[-10:]) < mean(losses[:5]) / 2, losses
    held = report["heldout"]
    assert held["rows"] == 32 and held["steps"] > 32
    assert held["step_accuracy"] >= held["all_good_step_accuracy"] + 0.05, held
    assert held["first_error_accuracy"] >= held["all_good_first_error_accuracy"] + 0.25, held
    assert held["first_error_accuracy"] > report["heldout_before"]["first_error_accuracy"]
    assert (
        f"| after training | {held['step_accuracy']:.3f} | {held['first_error_accuracy']:.3f} |"
        in (tmp_path / "prm" / "report.md").read_text()
    )
    model_dir = tmp_path / "prm" / "model"
    assert json.loads((model_dir / heads.PRM_FILE).read_text())["step_separator"] == "\n"
    assert json.loads((model_dir / "config.json").read_text())["architectures"] == ["LlamaForTokenClassification"]


def test_lora_prm_merges_with_its_head_and_scores_as_trained(teacher_dir, tmp_path):
    """The merged model, loaded as a scorer loads it (AutoModelForTokenClassification + reasonkit_prm.json +
    encode_steps), predicts the held-out steps as the report counted them."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    data = tmp_path / "steps.parquet"
    pq.write_table(steps_table(32), data)
    cfg = config(teacher_dir, data, tmp_path / "prm", lr=3e-3, max_steps=6, merge=True)
    report = train(cfg)
    merged = tmp_path / "prm" / "merged"
    model = AutoModelForTokenClassification.from_pretrained(merged).eval()
    tok = AutoTokenizer.from_pretrained(merged)
    assert model.config.num_labels == 2 and model.config.pad_token_id == tok.pad_token_id
    separator = json.loads((merged / heads.PRM_FILE).read_text())["step_separator"]
    _, heldout = heads.split(read(cfg), cfg)
    right = steps = 0
    for row in heldout.to_pylist():
        ids, ends = encode_steps(tok, row["prompt"], row["completions"], separator)
        with torch.no_grad():
            good = model(input_ids=torch.tensor([ids])).logits[0, ends].argmax(-1).bool().tolist()
        right += sum(g == t for g, t in zip(good, row["labels"]))
        steps += len(ends)
    assert steps == report["heldout"]["steps"]
    assert right / steps == pytest.approx(report["heldout"]["step_accuracy"], abs=1e-4)


def test_labels_sit_on_the_last_token_of_each_step(teacher_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(teacher_dir)
    table = pa.Table.from_pylist(
        [{"prompt": "What is 2 * 3?\n", "completions": ["2 * 3 = 6", "units ?"], "labels": [True, False]}]
    )
    row = encode_table(tok, table, "\n", max_length=1000)[0]
    marked = [i for i, label in enumerate(row["labels"]) if label != IGNORE]
    assert [row["labels"][i] for i in marked] == [1, 0]
    assert [tok.decode(row["input_ids"][i]) for i in marked] == ["\n", "\n"]  # the separator closing each step
    assert tok.decode(row["input_ids"][: marked[0] + 1]) == "What is 2 * 3?\n2 * 3 = 6\n"
    cut = encode_table(tok, table, "\n", max_length=marked[0] + 1)[0]  # max_length drops the second step's label
    assert [label for label in cut["labels"] if label != IGNORE] == [1]
    assert first_error([True, False, False]) == 1 and first_error([True]) is None


def test_labels_and_steps_that_differ_in_number_are_one_line_naming_the_row(teacher_dir, tmp_path):
    table = steps_table(4)
    labels = table.column("labels").to_pylist()
    labels[2] = labels[2] + [True]
    data = tmp_path / "steps.parquet"
    pq.write_table(table.set_column(table.column_names.index("labels"), "labels", pa.array(labels)), data)
    result = CliRunner().invoke(
        cli,
        ["train", "--method", "prm", "--student", teacher_dir, "--data", str(data), "--out", str(tmp_path / "out")],
    )
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    row_id = table.column("id")[2].as_py()
    n = len(table.column("completions")[2].as_py())
    assert "\n" not in line and line == (
        f"error: {data}: row 2 (id {row_id!r}) has {n + 1} labels for {n} completions (steps); "
        "each step needs exactly one label"
    ), line
    assert not (tmp_path / "out").exists()


def test_cli_reads_a_typed_newline_separator_and_records_it_beside_the_weights(teacher_dir, tmp_path):
    data = tmp_path / "steps.parquet"
    pq.write_table(steps_table(8), data)
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--method",
            "prm",
            "--student",
            teacher_dir,
            "--data",
            str(data),
            "--out",
            str(tmp_path / "out"),
            "--max-steps",
            "1",
            "--step-separator",
            "\\n",
            "--set",
            "threads=1",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "adapter" / heads.PRM_FILE).read_text())["step_separator"] == "\n"


def test_trl_stepwise_rows_without_id_or_soft_are_read(tmp_path):
    data = tmp_path / "steps.jsonl"
    data.write_text(json.dumps({"prompt": "Q\n", "completions": ["a", "b"], "labels": [True, False]}) + "\n")
    table = read(TrainConfig(method="prm", student="m", data=str(data), out="o"))
    assert table.select(["id", "soft"]).to_pylist() == [{"id": "0", "soft": [1.0, 0.0]}]


def test_held_out_split_keeps_prompts_whole_and_may_be_empty():
    table = steps_table(8)
    ids = table.column("id").to_pylist()
    table = pa.concat_tables([table, table.slice(0, 2)])  # a second solution of the first two prompts
    train_rows, held = heads.split(
        table, TrainConfig(method="prm", student="m", data="d", out="o", eval_share=0.25, seed=1)
    )
    assert held.num_rows >= 2 and not set(held.column("id").to_pylist()) & set(train_rows.column("id").to_pylist())
    train_rows, held = heads.split(table, TrainConfig(method="prm", student="m", data="d", out="o", eval_share=0))
    assert held.num_rows == 0 and train_rows.column("id").to_pylist() == ids + ids[:2]


@pytest.mark.parametrize("method", ["rm", "prm"])
@pytest.mark.slow
def test_a_run_resumed_from_its_checkpoint_ends_as_the_whole_run_and_merges_later(teacher_dir, tmp_path, method):
    """Killed after its step-4 checkpoint (the later outputs gone), --resume trains steps 5-8 to the same losses
    and held-out figures; --merge on the finished run then folds the adapter and its head in."""
    import shutil

    from reasonkit.recipes.tasks.train_sets import write_prefs

    if method == "rm":
        data = write_prefs(tmp_path / "prefs", n=16)
    else:
        data = tmp_path / "steps.parquet"
        pq.write_table(steps_table(16), data)
    cfg = dict(method=method, lr=3e-3, max_steps=8, save_steps=4)
    out = tmp_path / "run"
    whole = train(config(teacher_dir, data, out, **cfg))
    for name in ("adapter", "checkpoints/checkpoint-8", "report.json"):
        (shutil.rmtree if (out / name).is_dir() else (out / name).unlink)(out / name)
    resumed = train(config(teacher_dir, data, out, resume=True, **cfg))
    assert resumed["resumed_from_step"] == 4
    assert [r["loss"] for r in resumed["history"]] == pytest.approx([r["loss"] for r in whole["history"]], abs=1e-5)
    assert resumed["heldout"] == whole["heldout"]
    merged = train(config(teacher_dir, data, out, resume=True, merge=True, **cfg))["merged"]
    assert json.loads((out / "merged" / "config.json").read_text())["architectures"][0].endswith(
        "ForSequenceClassification" if method == "rm" else "ForTokenClassification"
    ) and merged == str(out / "merged")
