"""The ``synth`` stage: write a synthetic AIME-style prompts set, so an offline recipe needs no data.

``task: code`` writes the code task instead (recipes/tasks/code.py: programs computing the same
arithmetic, read from stdin, with a ``tests`` column for ``--verifier code``). ``task: agent`` writes the
tool-use task's questions (recipes/tasks/agent.py) and, beside the shard, the corpus the ``search`` tool
reads, ``OUT/corpus.jsonl``: the world is the seed's, so a train and a test step with one seed share it
(their questions are disjoint by book).

>>> import tempfile
>>> cfg = SynthConfig(out=tempfile.mkdtemp(), n=3, split="test")
>>> run_synth(cfg)["rows"]
3
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from reasonkit.config import Checks


@dataclass(frozen=True)
class SynthConfig:
    out: str = "prompts"
    n: int = 200
    seed: int = 0
    variant: Literal["mul", "aime"] = "mul"
    split: Literal["train", "test"] = "train"  # test problems are held out from every train split
    task: Literal["math", "code", "agent"] = "math"  # code: recipes/tasks/code.py's programs, with their tests;
    # agent: recipes/tasks/agent.py's questions, and OUT/corpus.jsonl for the search tool
    overwrite: bool = False

    def __post_init__(self) -> None:
        check = Checks()
        check(self.n > 0, "n", f"expected a positive number of problems, found {self.n}")
        check.done()


def run_synth(config: SynthConfig, *, log: Callable[[str], None] | None = None) -> dict:
    """Write ``config.n`` problems as a one-shard ``prompts`` stage directory."""
    from reasonkit.readers import read_prompts
    from reasonkit.store import StageWriter

    out = Path(config.out)
    writer = StageWriter(out, stage="synth", kind="prompts", config=config, keys=("id",), overwrite=config.overwrite)
    if writer.manifest["complete"]:
        return writer.manifest
    tmp = out / ".synth.parquet"
    if config.task == "agent":
        from reasonkit.recipes.tasks import agent as agent_task

        world = agent_task.make_world(config.seed)
        agent_task.write_corpus(out / "corpus.jsonl", world)
        agent_task.write_prompts(tmp, config.n, config.seed, split=config.split, world=world)
    else:
        if config.task == "code":
            from reasonkit.recipes.tasks.code import write_prompts
        else:
            from reasonkit.recipes.tasks.math import write_prompts
        write_prompts(tmp, config.n, config.seed, config.variant, split=config.split)
    table = read_prompts(tmp)
    tmp.unlink()
    done = writer.done_keys()
    if not done:
        writer.commit(table)
    return writer.finish()
