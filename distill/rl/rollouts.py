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

A run with tools (distill/rl/tools.py) writes ``trajectories`` rows instead (the table ``distill generate
--tools`` writes: the whole conversation, its calls and observations, ``turns``, ``tool_calls``,
``tool_errors``) with the same four columns added.

``sample`` counts a prompt's completions over the whole run (its first group is 0..G-1, the next time
the prompt is drawn G..2G-1), so ``(id, sample)`` is unique, as the traces contract keys a row, and a
multi-epoch run filters, pairs and resumes like any traces; a group is ``(step, id)``, and a
completion's place in it is ``sample % G``.

Rows are buffered in memory and committed as one shard every ``rollouts_every`` steps, at every
checkpoint (before the checkpoint is written) and at the end, so a SIGKILL loses only rows the resumed
run samples again. A resumed run first drops
the committed rows of steps after the checkpoint it resumes from: those steps are retrained, and their
rollouts written anew, so no ``(step, id, sample)`` appears twice.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.schema import MESSAGES, TOOL_MESSAGES

DIRNAME = "rollouts"
KEYS = ("step", "id", "sample")


def rollout_schema(names: list[str], tools: bool = False) -> pa.Schema:
    """The columns a rollouts shard holds, in order (``names``: the reward functions). ``tools``: a run with
    tools, whose rows are the ``trajectories`` table's (schema.py: the whole conversation in ``messages``,
    ``turns``, ``tool_calls``, ``tool_errors``, the ``tools`` schemas; no ``completion``: distill/rl/tools.py)."""
    scored = [
        ("step", pa.int32()),
        ("reward", pa.float32()),
        *[(f"reward_{n}", pa.float32()) for n in names],
        ("advantage", pa.float32()),
    ]
    if tools:
        return pa.schema(
            [
                ("id", pa.string()),
                ("sample", pa.int32()),
                ("messages", TOOL_MESSAGES),
                ("response", pa.string()),
                ("turns", pa.int32()),
                ("tool_calls", pa.int32()),
                ("tool_errors", pa.int32()),
                ("finish_reason", pa.string()),
                ("prompt_tokens", pa.int32()),
                ("completion_tokens", pa.int32()),
                ("teacher", pa.string()),
                ("gen_config", pa.string()),
                ("answer", pa.string()),
                ("source", pa.string()),
                ("tools", pa.string()),
                *scored,
            ]
        )
    return pa.schema(
        [
            ("id", pa.string()),
            ("sample", pa.int32()),
            ("messages", MESSAGES),
            ("completion", pa.string()),
            ("reasoning", pa.string()),
            ("response", pa.string()),
            ("finish_reason", pa.string()),
            ("prompt_tokens", pa.int32()),
            ("completion_tokens", pa.int32()),
            ("teacher", pa.string()),
            ("gen_config", pa.string()),
            ("answer", pa.string()),
            ("source", pa.string()),
            *scored,
        ]
    )


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
    >>> log.add([{**row, "step": 2}]); [r["sample"] for r in log.buffer]   # the prompt's second completion
    [1]
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        names: list[str],
        run: dict,
        input_fingerprint: str,
        data: str,
        tools: bool = False,
    ):
        from reasonkit.store import StageWriter

        self.dir = Path(directory)
        self.names = list(names)
        self.schema = rollout_schema(self.names, tools)
        # kind traces (trajectories with tools): the filter, pairs and push read it as they read a teacher's output
        self.writer = StageWriter(
            self.dir,
            stage="grpo",
            kind="trajectories" if tools else "traces",
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


# -- a GRPO run's rollouts: opened by distill/train.py ---------------------------------------------
def open_rollouts(cfg, out: Path, checkpoint: Path | None, extra: dict, say):
    """OUT/rollouts, opened to append; a resumed run first drops the rows of the steps it retrains."""
    log = RolloutLog(
        out / DIRNAME,
        names=list(cfg.rewards),
        run={"fingerprint": extra["fingerprint"]},
        input_fingerprint=extra["data_fingerprint"],
        data=cfg.data,
        tools=bool(cfg.tools),
    )
    from reasonkit.store import write_card

    write_card(out, layout=[DIRNAME], stage="grpo")  # load_dataset(OUT) reads the rollouts; each commit updates it
    step = int(checkpoint.name.split("-")[1]) if checkpoint else 0
    dropped = log.drop_after(step)
    if dropped:
        say(f"rollouts: dropped {dropped} rows of steps after {step}, which this run trains again")
    return log


def rollout_stamp(cfg, extra: dict) -> dict:
    """The ``teacher`` (the student that sampled, named as generate names a teacher) and ``gen_config``
    (the sampling settings' fingerprint) columns of every rollout row."""
    from reasonkit.hub.public import public_model
    from reasonkit.store import fingerprint, fingerprint_path

    sampling = {
        k: getattr(cfg, k)
        for k in ("num_generations", "temperature", "top_p", "max_completion_length", "instruction", "system")
    }
    if cfg.tools:  # what the policy could call, and for how many turns, is part of how it sampled
        sampling.update(
            tools=cfg.tool_names,
            max_turns=cfg.max_turns,
            corpus=cfg.corpus and fingerprint_path(cfg.corpus),
            search_k=cfg.search_k,
        )
    return {
        "teacher": public_model(cfg.student, extra["student_identity"]),
        "gen_config": fingerprint({"student": extra["student_identity"], **sampling}),
    }
