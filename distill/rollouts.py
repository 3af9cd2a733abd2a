"""GRPO's rollouts as data: every completion the policy sampled, with its rewards and advantage, in OUT/rollouts/.

A ``traces`` stage directory (store.py; the manifest's kind is ``traces``), so ``distill filter``,
``distill pairs``, ``distill inspect`` and ``distill push`` read it like any teacher's traces. The
columns are the traces contract (``id``, ``sample``, ``messages`` = the prompt, ``completion``,
``reasoning``, ``response``, ``finish_reason``, token counts, ``teacher`` = the student that sampled
it, ``gen_config``, ``answer``, ``source``) plus:

- ``step``: the optimizer step that first trained on the completion (a generation made at global
  step ``s`` feeds step ``s + 1``, and the ones after it when ``steps_per_generation`` > 1);
- ``reward``: the weighted sum TRL computes (null when every reward function said None);
- ``reward_<name>``: each reward function's value (null: it could not score the completion);
- ``advantage``: the advantage the policy gradient used.

Rows are keyed ``(step, id, sample)``, ``sample`` the completion's place in its group of G. Rows are
buffered in memory and committed as one shard at every checkpoint (before the checkpoint is written)
and at the end, so a SIGKILL loses only rows the resumed run samples again. A resumed run first drops
the committed rows of steps after the checkpoint it resumes from: those steps are retrained, and their
rollouts written anew, so no ``(step, id, sample)`` appears twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.schema import MESSAGES

DIRNAME = "rollouts"
KEYS = ("step", "id", "sample")


def rollout_schema(names: list[str]) -> pa.Schema:
    """The columns a rollouts shard holds, in order (``names``: the reward functions)."""
    return pa.schema([
        ("id", pa.string()), ("sample", pa.int32()), ("messages", MESSAGES), ("completion", pa.string()),
        ("reasoning", pa.string()), ("response", pa.string()), ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32()), ("teacher", pa.string()),
        ("gen_config", pa.string()), ("answer", pa.string()), ("source", pa.string()), ("step", pa.int32()), ("reward", pa.float32()),
        *[(f"reward_{n}", pa.float32()) for n in names], ("advantage", pa.float32()),
    ])


class RolloutLog:
    """Buffers rollout rows and commits them to ``directory`` (a traces stage directory); main process only.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "rollouts"
    >>> log = RolloutLog(d, names=["accuracy"], run={"fingerprint": "f"}, input_fingerprint="i", data="p.parquet")
    >>> row = dict(id="a", sample=0, messages=[{"role": "user", "content": "1+1?"}], completion="2", reasoning=None,
    ...            response="2", finish_reason="stop", prompt_tokens=5, completion_tokens=2, teacher="m",
    ...            gen_config="g", answer="2", source=None, step=1, reward=1.0, reward_accuracy=1.0, advantage=0.0)
    >>> log.add([row, {**row, "step": 2}]); log.commit(); log.rows
    2
    >>> log.drop_after(1), log.rows   # a resume from step 1 retrains step 2
    (1, 1)
    """

    def __init__(self, directory: str | os.PathLike, *, names: list[str], run: dict, input_fingerprint: str, data: str):
        from reasonkit.store import StageWriter

        self.dir = Path(directory)
        self.names = list(names)
        self.schema = rollout_schema(self.names)
        # kind traces: the filter, pairs and push read it as they read a teacher's traces
        self.writer = StageWriter(self.dir, stage="grpo", kind="traces", config=run, keys=KEYS,
                                  input_fingerprint=input_fingerprint, input_path=data)
        self.buffer: list[dict] = []

    @property
    def rows(self) -> int:
        return int(self.writer.manifest["rows"])

    def add(self, rows: list[dict]) -> None:
        self.buffer.extend(rows)

    def commit(self) -> None:
        """Write the buffered rows as one shard (atomically: store.StageWriter.commit)."""
        if self.buffer:
            self.writer.commit(pa.Table.from_pylist(self.buffer, schema=self.schema))
            self.buffer = []

    def finish(self, **extra) -> dict:
        self.commit()
        return self.writer.finish(**extra)

    def drop_after(self, step: int) -> int:
        """Remove committed rows of steps after ``step`` (a resume retrains them); returns how many went.

        Each shard holding such rows is rewritten without them (a temp file renamed over it), or, left
        empty, taken out of the manifest and then deleted. Interrupted anywhere, the next resume repeats
        it: a stale row count is recounted, and an unlisted shard is adopted by the writer and trimmed.
        """
        from reasonkit.store import read_shard

        manifest = self.writer.manifest
        dropped, kept_shards, empty = 0, [], []
        for entry in manifest["shards"]:
            path = self.dir / entry["file"]
            table = read_shard(path)
            keep = pc.less_equal(table.column("step"), step)
            left = table.filter(keep)
            dropped += table.num_rows - left.num_rows
            if left.num_rows == table.num_rows:
                kept_shards.append(entry)
            elif left.num_rows:
                tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
                pq.write_table(left, tmp)
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(tmp, path)
                tokens = int(pc.sum(left.column("completion_tokens")).as_py() or 0)
                kept_shards.append({**entry, "rows": left.num_rows, "tokens": tokens})
            else:
                empty.append(path)
        if dropped or empty:
            manifest["shards"] = kept_shards
            manifest["rows"] = sum(s["rows"] for s in kept_shards)
            manifest["tokens"] = sum(s.get("tokens", 0) for s in kept_shards)
            manifest["complete"] = False
            self.writer._save_manifest()  # listed shards first, then the unlisted ones go
            for path in empty:
                path.unlink(missing_ok=True)
        return dropped
