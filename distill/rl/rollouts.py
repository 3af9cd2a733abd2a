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

Rows are buffered and committed every ``rollouts_every`` steps, at every checkpoint and at the end, and a
resumed run drops the rows of the steps it retrains: distill/rollout_log.py, the log on-policy distillation
keeps its rollouts in too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from reasonkit.distill import rollout_log
from reasonkit.distill.rollout_log import DIRNAME
from reasonkit.schema import schema


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
    # The generated columns are the contract's own (schema.py), every one nullable as the shard is written.
    generated = schema("trajectories" if tools else "traces")
    return pa.schema([*(pa.field(f.name, f.type) for f in generated), *scored])


class RolloutLog(rollout_log.RolloutLog):
    """GRPO's rollouts: the log of distill/rollout_log.py with reward columns (``names``: the reward functions) and,
    with tools, trajectories rows; main process only.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "rollouts"
    >>> log = RolloutLog(d, names=["accuracy"], run={"fingerprint": "f"}, input_fingerprint="i", data="p.parquet")
    >>> row = dict(id="a", sample=0, messages=[{"role": "user", "content": "1+1?"}], completion="2", reasoning=None,
    ...            response="2", finish_reason="stop", prompt_tokens=5, completion_tokens=2, teacher="m",
    ...            gen_config="g", answer="2", source=None, step=1, reward=1.0, reward_accuracy=1.0, advantage=0.0)
    >>> log.add([row, {**row, "step": 2}]); log.commit(); log.rows
    2
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
        self.names = list(names)
        # kind traces (trajectories with tools): the filter, pairs and push read it as they read a teacher's output
        super().__init__(
            directory,
            schema=rollout_schema(self.names, tools),
            stage="grpo",
            kind="trajectories" if tools else "traces",
            run=run,
            input_fingerprint=input_fingerprint,
            data=data,
        )


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
    return rollout_log.reopen(log, out, checkpoint, say, stage="grpo")


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
