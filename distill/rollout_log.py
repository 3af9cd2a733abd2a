"""A training run's rollouts as data: every completion the policy sampled, buffered and committed to OUT/rollouts/.

A stage directory (store.py) of one row per sampled completion, keyed ``(step, id, sample)``: GRPO's rollouts
(distill/rl/rollouts.py: rewards and advantage) and on-policy distillation's (distill/onpolicy/rollouts.py: the
teacher's log-probs) are both this log with their own columns. ``sample`` counts a prompt's completions over the
whole run (its first group is 0..G-1, the next time the prompt is drawn G..2G-1), so ``(id, sample)`` is unique,
as the traces contract keys a row.

Rows are buffered in memory and committed as one shard every so many steps, at every checkpoint (before the
checkpoint is written) and at the end, so a SIGKILL loses only rows the resumed run samples again. A resumed run
first drops the committed rows of steps after the checkpoint it resumes from (:func:`reopen`): those steps are
retrained, and their rollouts written anew, so no ``(step, id, sample)`` appears twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DIRNAME = "rollouts"
KEYS = ("step", "id", "sample")


class RolloutLog:
    """Buffers rollout rows and commits them to ``directory``, a stage directory of ``kind`` rows written by
    ``stage`` with columns ``schema``; main process only.

    >>> import tempfile
    >>> from reasonkit.schema import schema
    >>> d = Path(tempfile.mkdtemp()) / "rollouts"
    >>> columns = schema("traces").append(pa.field("step", pa.int32()))
    >>> log = RolloutLog(d, schema=columns, stage="s", kind="traces", run={}, input_fingerprint="i", data="p")
    >>> row = dict(id="a", messages=[{"role": "user", "content": "1+1?"}], completion="2", response="2",
    ...            finish_reason="stop", prompt_tokens=5, completion_tokens=2, teacher="m", gen_config="g", step=1)
    >>> log.add([row, {**row, "step": 2}]); log.commit(); log.rows
    2
    >>> log.drop_after(1), log.rows   # a resume from step 1 retrains step 2
    (1, 1)
    >>> log.add([{**row, "step": 2}]); [r["sample"] for r in log.buffer]   # the prompt's second completion
    [1]
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        schema: pa.Schema,
        stage: str,
        kind: str,
        run: dict,
        input_fingerprint: str,
        data: str,
    ):
        from reasonkit.store import StageWriter

        self.dir = Path(directory)
        self.schema = schema
        self.writer = StageWriter(
            self.dir,
            stage=stage,
            kind=kind,
            config=run,
            keys=KEYS,
            input_fingerprint=input_fingerprint,
            input_path=data,
        )
        self.buffer: list[dict] = []
        self._next: dict[str, int] | None = None  # per prompt id: the next sample number (from committed rows)

    @property
    def rows(self) -> int:
        return int(self.writer.manifest["rows"])

    def add(self, rows: list[dict]) -> None:
        """Buffer ``rows`` (one generation, each group's completions in order), numbering their ``sample``."""
        if self._next is None:
            self._next = self._committed_counts()
        for row in rows:
            row["sample"] = self._next.get(row["id"], 0)
            self._next[row["id"]] = row["sample"] + 1
        self.buffer.extend(rows)

    def _committed_counts(self) -> dict[str, int]:
        from reasonkit.store import read_shard

        counts: dict[str, int] = {}
        for entry in self.writer.manifest["shards"]:
            table = read_shard(self.dir / entry["file"], columns=["id", "sample"])
            for key, sample in zip(table.column("id").to_pylist(), table.column("sample").to_pylist()):
                counts[key] = max(counts.get(key, 0), sample + 1)
        return counts

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
        self._next = None  # recounted from what is left
        if dropped or empty:
            manifest["shards"] = kept_shards
            manifest["rows"] = sum(s["rows"] for s in kept_shards)
            manifest["tokens"] = sum(s.get("tokens", 0) for s in kept_shards)
            manifest["complete"] = False
            self.writer._save_manifest()  # listed shards first, then the unlisted ones go
            for path in empty:
                path.unlink(missing_ok=True)
        return dropped


def reopen(log: RolloutLog, out: Path, checkpoint: Path | None, say, stage: str) -> RolloutLog:
    """``log`` (OUT/rollouts) ready to append: OUT's dataset card names it, and a resumed run's rows of the steps
    after ``checkpoint`` (which it trains again) are dropped."""
    from reasonkit.store import write_card

    write_card(out, layout=[DIRNAME], stage=stage)  # load_dataset(OUT) reads the rollouts; each commit updates it
    step = int(checkpoint.name.split("-")[1]) if checkpoint else 0
    dropped = log.drop_after(step)
    if dropped:
        say(f"rollouts: dropped {dropped} rows of steps after {step}, which this run trains again")
    return log
