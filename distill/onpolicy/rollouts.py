"""On-policy distillation's rollouts: every completion the student sampled, with what the teacher thought of it.

OUT/rollouts/ is a ``traces`` stage directory (distill/rollout_log.py, as GRPO keeps its rollouts), so
``distill filter``, ``pairs``, ``inspect``, ``view`` and ``push`` read it like a teacher's traces. The columns
are the traces contract (``teacher`` is the model that sampled: the student) plus:

- ``step``: the optimizer step that trained on the completion (a generation made at global step ``s``
  feeds step ``s + 1``);
- ``teacher_logprob``: the teacher's log-probability of the whole completion, the sum over its tokens of
  log p_teacher(token | prompt, tokens before), at temperature 1 (a local teacher; vLLM's prompt_logprobs
  for a served one): how likely the teacher finds what the student wrote;
- ``teacher_tokens``: the completion tokens the teacher scored (all of them but those a served teacher's
  window cut off).

>>> rollout_schema().names[-5:]
['answer', 'source', 'step', 'teacher_logprob', 'teacher_tokens']
>>> r = rollout_row({"id": "p", "prompt": [], "answer": "4"}, "2+2 is 4", [1, 2], [7, 8, 1], {1}, prefilled=False)
>>> r["finish_reason"], r["completion_tokens"], r["response"]
('stop', 3, '2+2 is 4')
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from reasonkit.distill import rollout_log
from reasonkit.distill.rollout_log import DIRNAME, RolloutLog

STAGE = "distill"


def rollout_schema() -> pa.Schema:
    """The columns of a rollouts shard, in order."""
    from reasonkit.schema import schema

    traces = schema("traces")  # its answer and source columns included
    return pa.schema(
        [*traces, ("step", pa.int32()), ("teacher_logprob", pa.float32()), ("teacher_tokens", pa.int32())]
    )


def open_rollouts(cfg, out: Path, checkpoint: Path | None, extra: dict, say) -> RolloutLog:
    """OUT/rollouts, opened to append; a resumed run first drops the rows of the steps it retrains."""
    log = RolloutLog(
        out / DIRNAME,
        schema=rollout_schema(),
        stage=STAGE,
        kind="traces",
        run={"fingerprint": extra["fingerprint"]},
        input_fingerprint=extra["data_fingerprint"],
        data=cfg.data,
    )
    return rollout_log.reopen(log, out, checkpoint, say, stage=STAGE)


def rollout_stamp(cfg, extra: dict) -> dict:
    """The ``teacher`` (the student that sampled, named as generate names a teacher) and ``gen_config`` (the
    sampling settings' fingerprint) of every row."""
    from reasonkit.hub.public import public_model
    from reasonkit.store import fingerprint

    sampling = {k: getattr(cfg, k) for k in ("temperature", "top_p", "max_completion_length", "instruction", "system")}
    return {
        "teacher": public_model(cfg.student, extra["student_identity"]),
        "gen_config": fingerprint({"student": extra["student_identity"], **sampling}),
    }


def rollout_row(example: dict, text: str, prompt_ids, completion_ids, stops: set, *, prefilled: bool) -> dict:
    """A rollout's row before the teacher has scored it: the completion's text split as the filter splits it
    (``prefilled``: the template opens ``<think>`` in the generation prompt)."""
    from reasonkit.think import split

    reasoning, response = split(text, prefilled=prefilled)
    return {
        "id": example["id"],
        "messages": example["prompt"],
        "answer": example.get("answer"),
        "source": example.get("source"),
        "completion": text,
        "reasoning": reasoning,
        "response": response,
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": len(completion_ids),
        "finish_reason": "stop" if completion_ids and completion_ids[-1] in stops else "length",
        "teacher_logprob": None,
        "teacher_tokens": 0,
    }
