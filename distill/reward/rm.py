"""``--method rm``: an outcome reward model on preference pairs with TRL's RewardTrainer.

The student gets a one-output head (distill/reward/heads.py) and learns ``r(prompt, completion)`` from the
Bradley-Terry loss ``-log sigmoid(r_chosen - r_rejected - margin)``, plus TRL's
``center_rewards_coefficient * mean(r^2)`` when set (rewards near zero, so a score means the same thing
across prompts). The data is a prefs table as ``pairs``, ``judge`` and ``critique`` write it (prompt,
chosen, rejected as messages, rendered with the student's chat template), or TRL's standard format
(the three as plain strings; TRL appends EOS to each completion), which the Step-DPO pairs use since
a partial assistant turn has no conversational form.

Margin: ``margin_scale x (chosen_score - rejected_score)`` where a row has both scores, 0 where it does
not (Llama 2's margin loss); ``--set margin_scale=0`` turns it off. A share of the prompts
(``eval_share``, seeded, all pairs of a prompt on one side) is held out: the report gives the share of
held-out pairs the model ranks right (chosen reward above rejected) and their mean margin, before and
after training.

>>> margins([1.0, None, 7.0], [0.0, 0.0, 3.0], scale=0.5)
[0.5, 0.0, 2.0]
"""

from __future__ import annotations

import pyarrow as pa

from reasonkit.errors import UserError

NEEDS = ("prompt", "chosen", "rejected")


def read(cfg) -> pa.Table:
    """The validated prefs rows: conversational (schema "prefs") or TRL's standard strings ("prefs_text"), never mixed.

    String pairs without ``id`` or ``strategy`` (a dataset made outside reasonkit) get the row number and "unknown".
    """
    from reasonkit.distill.data import emptied_by, prefs_kind
    from reasonkit.readers import read_table
    from reasonkit.schema import validate

    table, name = read_table(cfg.data, allow_incomplete=cfg.allow_incomplete)
    if table.num_rows == 0:
        raise UserError(f"{name}: 0 rows to train on{emptied_by(cfg.data)}")
    missing = [c for c in NEEDS if c not in table.column_names]
    if missing:
        raise UserError(
            f"{name}: --method rm needs a prefs table with columns prompt, chosen, rejected (messages, as "
            f"pairs/judge/critique write them, or strings: TRL's standard format); missing {', '.join(missing)}; "
            f"found {table.column_names}"
        )
    kind = prefs_kind(table)
    if kind == "prefs_text":
        for column, value in (("id", lambda i: str(i)), ("strategy", lambda i: "unknown")):
            if column not in table.column_names:
                table = table.append_column(column, pa.array([value(i) for i in range(table.num_rows)], pa.string()))
    return validate(table, kind, name)


def needs_template(table: pa.Table) -> bool:
    """Conversational pairs are rendered with the student's chat template; string pairs are tokenised as they are."""
    return not pa.types.is_string(table.schema.field("prompt").type)


def margins(chosen: list, rejected: list, scale: float) -> list[float]:
    """Per pair: ``scale x (chosen - rejected)`` where both scores are there, else 0."""
    return [scale * (c - r) if c is not None and r is not None else 0.0 for c, r in zip(chosen, rejected, strict=True)]


def dataset(table: pa.Table, cfg, tok=None, max_length=None):
    """prompt/chosen/rejected (+ margin when any pair has both scores and margin_scale > 0) for TRL."""
    import datasets

    columns = {c: table.column(c) for c in NEEDS}
    scores = [
        table.column(c).to_pylist() if c in table.column_names else [None] * table.num_rows
        for c in ("chosen_score", "rejected_score")
    ]
    m = margins(*scores, cfg.margin_scale)
    if cfg.margin_scale > 0 and any(m):
        columns["margin"] = pa.array(m, pa.float32())
    return datasets.Dataset(pa.table(columns))


def lengths(tok, table: pa.Table, cfg=None) -> list[int]:
    """Token count of every prompt + completion TRL will score (chosen and rejected)."""
    rows = table.select(list(NEEDS)).to_pylist()
    if needs_template(table):

        def ids(p, c):
            return tok.apply_chat_template(p + c, tokenize=True, return_dict=True)["input_ids"]
    else:

        def ids(p, c):
            return tok(p + c + (tok.eos_token or ""), add_special_tokens=False)["input_ids"]

    return [len(ids(r["prompt"], r[side])) for r in rows for side in ("chosen", "rejected")]


def arguments(cfg, args: dict):
    from trl import RewardConfig

    from reasonkit.distill.levers import trl_levers

    return RewardConfig(**args, **trl_levers(cfg), center_rewards_coefficient=cfg.center_rewards_coefficient)


def build(cfg, model, tok, dataset, args, peft_config, callbacks):
    from trl import RewardTrainer

    return RewardTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=callbacks,
    )


def held_out(trainer, table: pa.Table, cfg, batch_size: int, max_length: int | None = None) -> dict | None:
    """Pair accuracy (chosen reward above rejected) and mean margin (r_chosen - r_rejected) on ``table``.

    Through TRL's own preprocessing (``_prepare_dataset``: the chat template, EOS, and the max_length
    filter, so pairs too long to train are not scored either) and collator, so held-out pairs are read
    exactly as training pairs are.
    """
    import torch

    if table.num_rows == 0:
        return None
    prepared = trainer._prepare_dataset(dataset(table, cfg), trainer.processing_class, trainer.args, "held-out")
    model = trainer.model
    was_training = model.training
    model.eval()
    chosen, rejected = [], []
    with torch.no_grad():
        for start in range(0, len(prepared), batch_size):
            rows = [prepared[i] for i in range(start, min(start + batch_size, len(prepared)))]
            batch = trainer.data_collator(
                [{"chosen_ids": r["chosen_ids"], "rejected_ids": r["rejected_ids"]} for r in rows]
            )
            logits = (
                model(
                    input_ids=batch["input_ids"].to(model.device),
                    attention_mask=batch["attention_mask"].to(model.device),
                    use_cache=False,
                )
                .logits.squeeze(-1)
                .float()
            )
            c, r = logits.chunk(2)
            chosen += c.tolist()
            rejected += r.tolist()
    model.train(was_training)
    if not chosen:
        return {"pairs": 0, "pairs_too_long": table.num_rows}
    diffs = [c - r for c, r in zip(chosen, rejected, strict=True)]
    return {
        "pairs": len(diffs),
        "pairs_too_long": table.num_rows - len(diffs),
        "pair_accuracy": round(sum(d > 0 for d in diffs) / len(diffs), 4),
        "mean_margin": round(sum(diffs) / len(diffs), 4),
        "mean_reward": round(sum(chosen + rejected) / (2 * len(diffs)), 4),
    }


def markdown(report: dict) -> list[str]:
    """report.md's lines for a reward model."""
    h = report.get("heldout") or {}
    before = report.get("heldout_before") or {}
    lines = [
        f"Held-out pairs: {h.get('pairs', 0)} (eval_share {report['config']['eval_share']}, seed "
        f"{report['config']['seed']})",
        "",
    ]
    if h.get("pairs"):
        lines += [
            "| | pair accuracy | mean margin |",
            "|---|---|---|",
            f"| before training | {before.get('pair_accuracy', float('nan')):.3f} | "
            f"{before.get('mean_margin', float('nan')):.4f} |",
            f"| after training | {h['pair_accuracy']:.3f} | {h['mean_margin']:.4f} |",
            "",
        ]
    return lines
