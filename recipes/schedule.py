"""A train step's schedule for ``--plan``: rows a step, tokens a step, optimizer steps.

"128 sequences a step" means 128 rows; whether a row is one trace or a packed 32k-token row of several
changes the tokens a step and the optimizer steps an epoch by several times at the same lr x epochs, so
the plan says which it is. Rows come from the data's manifest when it is already on disk, else the
count is left as a formula of the rows the earlier step will write.

>>> from types import SimpleNamespace as C
>>> c = C(method="sft", batch_size=2, grad_accum=8, num_processes=8, max_length=32768, packing=False, epochs=5,
...       max_steps=None, data="absent", launcher="accelerate", num_machines=1)
>>> schedule_note(c)
['128 rows a step (2 x 8 processes x 8 accumulation), one trace a row (no packing): at most 4,194,304 tokens a step (128 x 32,768); optimizer steps: 5 x rows / 128 (rows: what absent holds once written)']
"""  # noqa: E501

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def schedule_note(config: Any, recipe=None, step=None) -> list[str]:
    """One line for a train step (empty for methods without a token budget a row)."""
    method = config.method
    processes = (config.num_processes or 1) if config.launcher == "accelerate" else 1
    rows = config.batch_size * processes * config.grad_accum
    split = f"{config.batch_size} x {processes} processes x {config.grad_accum} accumulation"
    if method in ("grpo", "distill"):
        length = (config.max_prompt_length or 1024) + config.max_completion_length
        group = config.num_generations if method == "grpo" else 1  # distill: one completion a prompt
        what = f"{rows} completions a step ({split}; {rows // group} prompts)"
        tokens = f"at most {rows * length:,} tokens a step ({rows} x {length:,})"
    else:
        length = config.max_length or 4096
        per_row = 2 if method in ("dpo", "rm") else 1
        if method == "sft" and config.packing:
            what = f"{rows} rows a step ({split}), each packed to {length:,} tokens (several traces a row)"
            tokens = f"{rows * length:,} tokens a step ({rows} x {length:,})"
        else:
            kind = "one pair a row (chosen + rejected)" if per_row == 2 else "one trace a row (no packing)"
            what = f"{rows} rows a step ({split}), {kind}"
            tokens = f"at most {rows * per_row * length:,} tokens a step ({rows}{' x 2' if per_row == 2 else ''} x {length:,})"  # noqa: E501
    if config.max_steps:
        steps = f"optimizer steps: {config.max_steps} (max_steps)"
    elif method in ("grpo", "distill"):
        group = config.num_generations if method == "grpo" else 1
        steps = f"optimizer steps: {config.epochs:g} x prompts x {group} / {rows}"
    else:
        known = _rows(config.data)
        epochs = f"{config.epochs:g} x " if config.epochs != 1 else ""
        if known is not None and not (method == "sft" and config.packing):
            steps = f"optimizer steps: {math.ceil(known / rows) * config.epochs:,.0f} ({epochs}ceil({known:,} rows / {rows}))"  # noqa: E501
        else:
            unit = "packed rows" if method == "sft" and config.packing else "rows"
            steps = f"optimizer steps: {epochs}{unit} / {rows} ({unit}: what {config.data} holds once written)"
    return [f"{what}: {tokens}; {steps}"]


def _rows(data: str) -> int | None:
    """Rows of a stage directory already written (its manifest's count), else None."""
    manifest = Path(str(data)) / "_manifest.json"
    try:
        record = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return None
    return record.get("rows") if record.get("complete") else None
