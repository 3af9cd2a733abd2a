"""The ``synth`` stage: write a synthetic AIME-style prompts set, so an offline recipe needs no data.

>>> import tempfile
>>> cfg = SynthConfig(out=tempfile.mkdtemp(), n=3, split="test")
>>> run_synth(cfg)["rows"]
3
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class SynthConfig:
    out: str = "prompts"
    n: int = 200
    seed: int = 0
    variant: Literal["mul", "aime"] = "mul"
    split: Literal["train", "test"] = "train"  # test problems are held out from every train split
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError(f"n: expected a positive number of problems, found {self.n}")


def run_synth(config: SynthConfig) -> dict:
    """Write ``config.n`` problems as a one-shard ``prompts`` stage directory."""
    from reasonkit.readers import read_prompts
    from reasonkit.recipes.task import write_prompts
    from reasonkit.store import StageWriter

    out = Path(config.out)
    writer = StageWriter(out, stage="synth", kind="prompts", config=config, keys=("id",), overwrite=config.overwrite)
    if writer.manifest["complete"]:
        return writer.manifest
    tmp = out / ".synth.parquet"
    write_prompts(tmp, config.n, config.seed, config.variant, split=config.split)
    table = read_prompts(tmp)
    tmp.unlink()
    done = writer.done_keys()
    if not done:
        writer.commit(table)
    return writer.finish()
