"""``--method prm``: a process reward model, good/bad per step, as token classification.

TRL removed its PRMTrainer after 1.13; this is the same model trained with plain transformers
``Trainer``: ``AutoModelForTokenClassification`` with two labels reads
``[bos] prompt step_1 sep step_2 sep ...`` (every piece tokenised on its own, as PRMTrainer did) and
is trained only at the last token of each step (its separator), label 1 for a good step and 0 for a
bad one, -100 everywhere else. Its input is a ``steps`` table (TRL's stepwise supervision:
``prompt``, ``completions`` the steps, ``labels`` one bool per step), as ``distill label-steps`` writes it.

:func:`~reasonkit.reward.steps.encode_steps` (reward/steps.py) is the one place that layout is defined; the
scorer (reward/scorer.py) scores with it, and the separator travels in the saved model directory
(``reasonkit_prm.json``, distill/reward/heads.py).

The report's held-out figures: step accuracy (P(good) > 0.5 against the label, every step), and
first-error accuracy (the first step predicted bad is the first step labelled bad, or both say the
solution has none), beside what always answering "good" would score.

>>> first_error([True, True, False, True]), first_error([True, True])
(2, None)
"""

from __future__ import annotations

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.reward.steps import encode_steps, first_error

IGNORE = -100


def read(cfg) -> pa.Table:
    """The validated steps rows; a row whose labels and steps differ in number is an error naming it."""
    from reasonkit.distill.data import emptied_by
    from reasonkit.readers import read_table
    from reasonkit.schema import validate

    table, name = read_table(cfg.data, allow_incomplete=cfg.allow_incomplete)
    if table.num_rows == 0:
        raise UserError(f"{name}: 0 rows to train on{emptied_by(cfg.data)}")
    missing = [c for c in ("prompt", "completions", "labels") if c not in table.column_names]
    if missing:
        raise UserError(
            f"{name}: --method prm needs a steps table with columns prompt, completions (the steps) and labels "
            f"(one bool per step), as distill label-steps writes it; missing {', '.join(missing)}; found "
            f"{table.column_names}"
        )
    if "id" not in table.column_names:  # TRL's stepwise datasets carry none; the row number names a row
        table = table.append_column("id", pa.array([str(i) for i in range(table.num_rows)]))
    if "soft" not in table.column_names:  # nor a soft estimate, which training does not read: the hard one stands in
        try:
            soft = [[float(v) for v in row] if row is not None else None for row in table.column("labels").to_pylist()]
        except (TypeError, ValueError):
            soft = [None] * table.num_rows  # labels that are not booleans: validate names the column
        table = table.append_column("soft", pa.array(soft, pa.list_(pa.float32())))
    table = validate(table, "steps", name)
    ids, steps, labels = (table.column(c).to_pylist() for c in ("id", "completions", "labels"))
    for i, (row_id, s, lab) in enumerate(zip(ids, steps, labels, strict=True)):
        if len(s) != len(lab) or not s:
            what = "no steps" if not s else f"{len(lab)} labels for {len(s)} completions (steps)"
            raise UserError(f"{name}: row {i} (id {row_id!r}) has {what}; each step needs exactly one label")
        if any(v is None for v in lab) or any(v is None for v in s):
            raise UserError(f"{name}: row {i} (id {row_id!r}) has a null step or label")
    return table


def encode_table(tok, table: pa.Table, separator: str, max_length: int) -> list[dict]:
    """Per row: input_ids and labels (1/0 at each step's last token, -100 elsewhere), cut at ``max_length``."""
    rows = []
    for prompt, steps, labels in zip(
        *(table.column(c).to_pylist() for c in ("prompt", "completions", "labels")), strict=True
    ):
        ids, ends = encode_steps(tok, prompt, steps, separator)
        target = [IGNORE] * len(ids)
        for end, good in zip(ends, labels, strict=True):
            target[end] = int(good)
        rows.append({"input_ids": ids[:max_length], "labels": target[:max_length]})
    return rows


def needs_template(table: pa.Table) -> bool:
    return False  # the prompt is a string, tokenised as it is


def lengths(tok, table: pa.Table, cfg) -> list[int]:
    separator = cfg.step_separator
    return [
        len(encode_steps(tok, p, s, separator)[0])
        for p, s in zip(table.column("prompt").to_pylist(), table.column("completions").to_pylist(), strict=True)
    ]


def dataset(table: pa.Table, cfg, tok, max_length: int):
    import datasets

    return datasets.Dataset.from_list(encode_table(tok, table, cfg.step_separator, max_length))


def arguments(cfg, args: dict):
    from transformers import TrainingArguments

    args = {k: v for k, v in args.items() if k != "max_length"}  # a tokenisation setting; encode_table applies it
    return TrainingArguments(**args, include_num_input_tokens_seen=True, **_levers(cfg))


def _levers(cfg) -> dict:
    from reasonkit.distill.levers import trl_levers

    levers = trl_levers(cfg)
    levers.pop("dataset_num_proc", None)  # TRL's name; the steps are encoded here, in one process
    return levers


def build(cfg, model, tok, dataset, args, peft_config, callbacks):
    from peft import get_peft_model
    from transformers import DataCollatorForTokenClassification, Trainer

    if peft_config is not None:
        model = get_peft_model(model, peft_config)
    return Trainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        callbacks=callbacks,
        data_collator=DataCollatorForTokenClassification(tok, label_pad_token_id=IGNORE),
    )


def held_out(trainer, table: pa.Table, cfg, batch_size: int, max_length: int) -> dict | None:
    """Step accuracy and first-error accuracy on ``table`` (steps cut off by ``max_length`` are not scored)."""
    import torch

    if table.num_rows == 0:
        return None
    rows = encode_table(trainer.processing_class, table, cfg.step_separator, max_length)
    model = trainer.model
    was_training = model.training
    model.eval()
    right = steps = good = first_right = no_error = 0
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            batch = trainer.data_collator(chunk)
            logits = model(
                input_ids=batch["input_ids"].to(model.device), attention_mask=batch["attention_mask"].to(model.device)
            ).logits
            predicted = logits.argmax(-1).cpu()
            for row, pred, labels in zip(chunk, predicted, batch["labels"], strict=True):
                at = labels != IGNORE
                truth, guess = labels[at].bool().tolist(), pred[at].bool().tolist()
                right += sum(t == g for t, g in zip(truth, guess, strict=True))
                steps += len(truth)
                good += sum(truth)
                first_right += first_error(truth) == first_error(guess)
                no_error += first_error(truth) is None
    model.train(was_training)
    n = len(rows)
    return {
        "rows": n,
        "steps": steps,
        "step_accuracy": round(right / steps, 4) if steps else None,
        "first_error_accuracy": round(first_right / n, 4),
        # what answering "good" everywhere scores: the bar both figures must clear
        "all_good_step_accuracy": round(good / steps, 4) if steps else None,
        "all_good_first_error_accuracy": round(no_error / n, 4),
    }


def markdown(report: dict) -> list[str]:
    """report.md's lines for a process reward model."""
    h = report.get("heldout") or {}
    before = report.get("heldout_before") or {}
    lines = [
        f"Held-out solutions: {h.get('rows', 0)}, steps {h.get('steps', 0)} (eval_share "
        f"{report['config']['eval_share']}, "
        f"seed {report['config']['seed']}); step separator {report['config']['step_separator']!r}",
        "",
    ]
    if h.get("steps"):

        def row(name, d):
            return f"| {name} | {d.get('step_accuracy', float('nan')):.3f} | {d.get('first_error_accuracy', float('nan')):.3f} |"  # noqa: E501

        lines += [
            "| | step accuracy | first-error accuracy |",
            "|---|---|---|",
            row("before training", before),
            row("after training", h),
            f'| always "good" | {h["all_good_step_accuracy"]:.3f} | {h["all_good_first_error_accuracy"]:.3f} |',
            "",
        ]
    return lines
