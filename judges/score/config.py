"""``distill score``'s config: a light frozen dataclass (no pyarrow, torch or the model at import), so a recipe
can be validated without loading anything; the stage itself is judges/score/run.py.

>>> ScoreConfig(input="t", out="o", model="m", batch_size=0)
Traceback (most recent call last):
...
reasonkit.errors.UserError: batch_size must be >= 1, found 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from reasonkit.config import setting
from reasonkit.errors import UserError
from reasonkit.judges.config import StageRun

#: Settings that change how a run goes, not what it writes (left out of the fingerprint: a run resumed with
#: another batch size continues the same output).
RUN_ONLY = ("input", "out", "batch_size", "shard_size", "allow_incomplete", "overwrite", "device")


@dataclass(frozen=True, kw_only=True)
class ScoreConfig(StageRun):
    input: str = setting(cli=False)  # the command's argument
    # a reward model directory (rm or prm) or a LoRA adapter of one
    model: str = setting(help="Reward model directory (distill train --method rm / prm) or its LoRA adapter.")
    batch_size: int = setting(16, "Rows per forward, sorted by length.")
    shard_size: int = setting(1024, "Input rows per committed shard.")
    max_length: int | None = setting(None, "Tokens kept per row. [default: all]")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = setting("float32", "")
    device: str | None = None  # None: cuda when there is one, else cpu
    # score the think block with the response (False: the response alone)
    include_reasoning: bool = setting(
        True, "Score the response after </think> only, not the reasoning.", flag="--response-only", flag_value=False
    )

    def __post_init__(self) -> None:
        for name in ("batch_size", "shard_size"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be >= 1, found {getattr(self, name)}")
        if self.max_length is not None and self.max_length < 1:
            raise UserError(f"max_length must be >= 1 when given, found {self.max_length}")

    def fingerprinted(self) -> dict:
        """What decides the rows: the settings, and the model by its content (a model retrained at the same
        path cannot extend a directory the old one started)."""
        from reasonkit.identity import model_identity
        from reasonkit.reward.scorer import inspect_model

        data = {k: v for k, v in dataclasses.asdict(self).items() if k not in RUN_ONLY}
        spec = inspect_model(self.model)
        data["model_identity"] = [model_identity(spec.base)] + ([model_identity(spec.adapter)] if spec.adapter else [])
        return data
