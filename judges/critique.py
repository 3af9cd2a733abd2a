"""``distill critique``: Constitutional AI's supervised stage -- critique, then revise.

Per row, a principle is drawn from the constitution (seeded by ``(seed, id/sample, round)``); the
model sees the prompt and its response, is asked the principle's critique request, answers, and is
then asked the revision request in the same conversation. With ``--rounds R`` the revision is
critiqued again under a newly drawn principle, R times. The record (``OUT/record/``) holds the
columns the published Constitutional AI datasets use -- ``init_prompt``, ``init_response``,
``critic_prompt``, ``critic_response``, ``revision_prompt``, ``revision_response`` (those of the
last round), ``principle`` (of that round, or of the round that failed when none completed) --
with every completed round in ``rounds`` and the reason a row failed.

Derived from it: ``OUT`` is a prefs table (chosen = the revision, rejected = the initial response;
rows whose revision is identical to the response are not pairs) and ``OUT/sft`` an sft table
(prompt + revision). A critique is read after the model's ``</think>``; a revision is kept whole,
since for a reasoning model the revised turn is itself ``<think>...</think>`` and an answer.
A failed call or truncated reply ends a row's rounds: the last good revision stands, if any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.errors import UserError
from reasonkit.judges import stage
from reasonkit.judges.backends import Answer, ask, make_backend
from reasonkit.judges.config import CritiqueConfig, fingerprinted
from reasonkit.judges.constitution import Constitution, choose, load_constitution
from reasonkit.judges.inputs import PASS_THROUGH, read_groups, render_prompt
from reasonkit.judges.parse import answer_part
from reasonkit.schema import MESSAGES
from reasonkit.store import StageWriter, fingerprint_path

_ROUND = pa.struct(
    [
        ("principle", pa.string()),
        ("critic_prompt", pa.string()),
        ("critic_response", pa.string()),
        ("revision_prompt", pa.string()),
        ("revision_response", pa.string()),
    ]
)
RECORD = stage.with_extras(
    stage.prompt_fields()
    + [
        ("sample", pa.int32()),
        ("init_prompt", pa.string()),
        ("init_response", pa.string()),
        ("critic_prompt", pa.string()),
        ("critic_response", pa.string()),
        ("revision_prompt", pa.string()),
        ("revision_response", pa.string()),
        ("principle", pa.string()),
        ("rounds", pa.list_(_ROUND)),
        ("reason", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
    ],
    PASS_THROUGH,
)
PREFS = stage.with_extras(
    stage.prompt_fields()
    + [
        ("chosen", MESSAGES),
        ("rejected", MESSAGES),
        ("chosen_score", pa.float32()),
        ("rejected_score", pa.float32()),
        ("strategy", pa.string()),
        ("sample", pa.int32()),
        ("principle", pa.string()),
    ],
    PASS_THROUGH,
)
SFT = stage.with_extras([("id", pa.string()), ("messages", MESSAGES), ("sample", pa.int32())], ("source",))


def derive_prefs(rows: list[dict]) -> list[dict]:
    return [
        {
            "id": r["id"],
            "prompt": r["prompt"],
            "chosen": stage.assistant(r["revision_response"]),
            "rejected": stage.assistant(r["init_response"]),
            "strategy": "critique",
            "sample": r["sample"],
            "principle": r["principle"],
            **{c: r.get(c) for c in PASS_THROUGH},
        }
        for r in rows
        if r["revision_response"] and r["revision_response"] != r["init_response"]
    ]


def derive_sft(rows: list[dict]) -> list[dict]:
    return [
        {
            "id": r["id"],
            "messages": r["prompt"] + stage.assistant(r["revision_response"]),
            "sample": r["sample"],
            "source": r.get("source"),
        }
        for r in rows
        if r["revision_response"]
    ]


def _failure(a: Answer, what: str) -> str | None:
    if a.failure:
        return f"{what}: {a.failure}"
    if a.finish_reason == "length":
        return f"{what} truncated (finish_reason=length)"
    return None


# long: every critique round of a chunk in one pass: the rounds share the chunk's requests and costs
def critique_chunk(
    items: list[dict], cfg: CritiqueConfig, constitution: Constitution, backend
) -> tuple[list[dict], Counter]:
    """Run every round for ``items`` (dicts with id, sample, prompt, init_response); record rows and cost."""
    spent = Counter()
    state = {
        (it["id"], it["sample"]): {
            **it,
            "current": it["init_response"],
            "rounds": [],
            "reason": None,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        for it in items
    }

    def call(prompts: dict, keys: dict, what: str) -> dict[tuple, str]:
        answers = ask(backend, prompts, cfg, cfg.seed)
        replies = {}
        for k, a in answers.items():
            row = state[keys[k]]
            row["prompt_tokens"] += a.prompt_tokens
            row["completion_tokens"] += a.completion_tokens
            spent.update(calls=1, prompt_tokens=a.prompt_tokens, completion_tokens=a.completion_tokens)
            why = _failure(a, what)
            text = None
            if why is None:
                text, reason = answer_part(a.text) if what == "critique" else ((a.text or "").strip() or None, "empty")
                why = None if text else f"{what}: {reason.replace('judge output', 'reply')}"
            if why:
                row["reason"] = f"round {len(row['rounds']) + 1} {why}"
            else:
                replies[keys[k]] = text
        return replies

    for r in range(1, cfg.rounds + 1):
        live = [key for key, row in state.items() if row["reason"] is None]
        if not live:
            break
        chats, principles, keys, prompts = {}, {}, {}, {}
        for key in live:
            row = state[key]
            p = principles[key] = choose(constitution, seed=cfg.seed, key=f"{key[0]}/{key[1]}", round=r)
            row["principle"] = p.name  # the last one tried, also when its round fails
            chats[key] = (
                row["prompt"] + stage.assistant(row["current"]) + [{"role": "user", "content": p.critique_request}]
            )
            k = f"{key[0]}\x1f{key[1]}\x1fcritique{r}"
            keys[k], prompts[k] = key, chats[key]
        critiques = call(prompts, keys, "critique")
        keys, prompts = {}, {}
        for key, text in critiques.items():
            chats[key] = (
                chats[key] + stage.assistant(text) + [{"role": "user", "content": principles[key].revision_request}]
            )
            k = f"{key[0]}\x1f{key[1]}\x1frevision{r}"
            keys[k], prompts[k] = key, chats[key]
        revisions = call(prompts, keys, "revision")
        for key, text in revisions.items():
            row, p = state[key], principles[key]
            row["rounds"].append(
                {
                    "principle": p.name,
                    "critic_prompt": p.critique_request,
                    "critic_response": critiques[key],
                    "revision_prompt": p.revision_request,
                    "revision_response": text,
                }
            )
            row["current"] = text
    rows = []
    for row in state.values():
        last = row["rounds"][-1] if row["rounds"] else {}
        rows.append(
            {
                **{
                    k: row[k]
                    for k in (
                        "id",
                        "prompt",
                        "sample",
                        "init_response",
                        "rounds",
                        "reason",
                        "prompt_tokens",
                        "completion_tokens",
                        *PASS_THROUGH,
                    )
                    if k in row
                },
                "init_prompt": render_prompt(row["prompt"]),
                **{k: last.get(k) for k in _ROUND.names},
                "principle": last.get("principle") or row.get("principle"),
            }
        )
    return rows, spent


def run_critique(cfg: CritiqueConfig, *, log: Callable[[str], None] | None = None, backend=None) -> dict:
    """Critique and revise every row of ``cfg.input`` not yet in the record; the report."""
    constitution = load_constitution(cfg.constitution)  # a bad constitution fails before anything loads
    groups, skipped, manifest = read_groups(
        cfg.input, include_reasoning=cfg.include_reasoning, allow_incomplete=cfg.allow_incomplete
    )
    if manifest.get("kind") == "prefs" or any(g.pairs for g in groups):
        raise UserError(f"{cfg.input}: a prefs stage; critique revises single responses (traces, verdicts or sft)")
    settings = {**fingerprinted(cfg), "constitution": constitution.as_dict()}
    source_fp = fingerprint_path(cfg.input)
    common = dict(
        config=settings,
        keys=("id", "sample"),
        input_fingerprint=source_fp,
        input_path=cfg.input,
        overwrite=cfg.overwrite,
    )
    prefs = StageWriter(cfg.out, stage="critique", kind="prefs", **common)
    sft = StageWriter(stage.record_dir(cfg.out).parent / "sft", stage="critique-sft", kind="sft", **common)
    record = StageWriter(stage.record_dir(cfg.out), stage="critique-record", kind=None, **common)
    outputs = [stage.Output(prefs, derive_prefs, PREFS), stage.Output(sft, derive_sft, SFT)]
    stage.reconcile(record, outputs)
    done = record.done_keys()
    items = [
        {"id": g.id, "sample": c.sample, "prompt": g.prompt, "init_response": c.text, **g.extras}
        for g in groups
        for c in g.candidates
        if (g.id, c.sample) not in done
    ]
    spent = Counter()
    if items:
        owned = backend is None
        backend = backend or make_backend(cfg, seed=cfg.seed)
        try:
            for chunk in stage.chunks(items, cfg.shard_size):
                rows, cost = critique_chunk(chunk, cfg, constitution, backend)
                stage.commit(record, RECORD, outputs, rows)
                spent.update(cost)
                (log or stage.say)(
                    f"critique: {record.manifest['rows']} rows recorded, {spent['calls']} calls this run"
                )
        finally:
            if owned:
                backend.close()
    report = summarize(record, prefs, sft, skipped, dict(spent), constitution)
    stage.write_report(cfg.out, report)
    record.finish()
    sft.finish()
    prefs.finish(report=report)
    return report


def summarize(record, prefs, sft, skipped, spent, constitution) -> dict:
    from reasonkit.store import iter_stage

    reasons, principles, tok = [], Counter(), Counter()
    for t in iter_stage(record.dir, allow_incomplete=True):
        reasons += t.column("reason").to_pylist()
        principles.update(p for p in t.column("principle").to_pylist() if p)
        tok.update(
            prompt_tokens=pc.sum(t.column("prompt_tokens")).as_py() or 0,
            completion_tokens=pc.sum(t.column("completion_tokens")).as_py() or 0,
        )
    return {
        "stage": "critique",
        "constitution": constitution.name,
        "rows_in": record.manifest["rows"] + sum(skipped.values()),
        "rows_skipped": dict(skipped),
        "rows_recorded": record.manifest["rows"],
        "failed": stage.reason_counts(reasons),
        "principles": dict(principles),
        "prefs": prefs.manifest["rows"],
        "sft": sft.manifest["rows"],
        "tokens": dict(tok),
        "this_run": spent,
    }
