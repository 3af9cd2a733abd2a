"""Reading what the judges stages consume: traces, verdicts (kept and ``rejected/``) and prefs.

Every stage here sees a prompt as a :class:`Group` of candidate answers. A candidate's text is the
assistant turn a student would be trained on: ``<think>\\nreasoning\\n</think>\\n\\nresponse`` when
the row has a reasoning block (think.candidate_text: the same join generation defines, so a prefilled ``<think>`` is
restored), the response alone when ``include_reasoning`` is off, or the raw ``completion``.

Rows that did not finish (``finish_reason`` ``length`` or ``error``) or have no text are never
candidates: a truncated trace closed by the join would be a reasoning block the model never wrote.
They are counted, by reason, in each stage's report.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.store import is_stage_dir, load_manifest, read_stage
from reasonkit.think import candidate_text

PASS_THROUGH = ("source", "answer")  # prompt columns carried into every output row


@dataclass
class Candidate:
    sample: int
    text: str
    length: int  # completion tokens when known, else characters
    correct: bool | None = None
    keep: bool | None = None
    drop_reason: str | None = None


@dataclass
class Group:
    """One prompt and its candidate answers (and, for a prefs input, the pairs it already has)."""

    id: str
    prompt: list[dict]
    candidates: list[Candidate] = field(default_factory=list)
    pairs: list[tuple[int, int, int]] = field(default_factory=list)  # (pair index, chosen sample, rejected sample)
    extras: dict = field(default_factory=dict)


def open_stage(path: str | os.PathLike, *, allow_incomplete: bool = False) -> tuple[pa.Table, dict]:
    """All committed rows of a stage directory and its manifest, with one clear error when it is not one."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{path}: no such directory")
    if not is_stage_dir(p):
        raise UserError(f"{path}: not a stage directory (no _manifest.json); expected the output of a reasonkit stage")
    return read_stage(p, allow_incomplete=allow_incomplete), load_manifest(p)


def require(table: pa.Table, columns: tuple[str, ...], where: str, hint: str) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise UserError(f"{where}: missing column {missing[0]!r} ({hint}); found columns {table.column_names}")


def is_prefs(table: pa.Table) -> bool:
    return all(c in table.column_names for c in ("prompt", "chosen", "rejected"))


def unusable(row: dict) -> str | None:
    """Why a traces row cannot be a candidate (None: it can)."""
    finish = row.get("finish_reason")
    if finish == "error":
        return "error"
    if finish == "length":
        return "truncated"
    return None


def groups_from_rows(table: pa.Table, *, include_reasoning: bool, where: str) -> tuple[list[Group], Counter]:
    """Traces/verdicts rows grouped by prompt ``id``, in first-seen order, candidates by sample."""
    require(table, ("id", "messages"), where, "expected a traces or verdicts stage")
    if "completion" not in table.column_names and "response" not in table.column_names:
        raise UserError(f"{where}: missing column 'completion' (or 'response'); found columns {table.column_names}")
    skipped: Counter = Counter()
    groups: dict[str, Group] = {}
    for i, row in enumerate(table.to_pylist()):
        group = groups.get(row["id"])
        if group is None:
            group = groups[row["id"]] = Group(row["id"], _messages(row["messages"]), extras=_extras(row))
        reason = unusable(row)
        text = candidate_text(row, include_reasoning) if reason is None else ""
        if reason is None and not text:
            reason = "empty"
        if reason is not None:
            skipped[reason] += 1
            continue
        tokens = row.get("completion_tokens")
        group.candidates.append(
            Candidate(
                sample=int(row["sample"]) if row.get("sample") is not None else i,
                text=text,
                length=int(tokens) if tokens is not None else len(text),
                correct=row.get("correct"),
                keep=row.get("keep"),
                drop_reason=row.get("drop_reason"),
            )
        )
    for group in groups.values():
        group.candidates.sort(key=lambda c: c.sample)
    return list(groups.values()), skipped


def groups_from_prefs(table: pa.Table, *, where: str) -> tuple[list[Group], Counter]:
    """A prefs table as groups: each prompt's distinct texts are its candidates, its rows its pairs."""
    require(table, ("id", "prompt", "chosen", "rejected"), where, "expected a prefs stage")
    skipped: Counter = Counter()
    groups: dict[str, Group] = {}
    for row in table.to_pylist():
        group = groups.get(row["id"])
        if group is None:
            group = groups[row["id"]] = Group(row["id"], _messages(row["prompt"]), extras=_extras(row))
        samples = []
        for side in ("chosen", "rejected"):
            text = _last_content(row[side])
            known = next((c for c in group.candidates if c.text == text), None)
            if known is None:
                known = Candidate(sample=len(group.candidates), text=text, length=len(text))
                group.candidates.append(known)
            samples.append(known.sample)
        if not all(group.candidates[s].text for s in samples):
            skipped["empty"] += 1
            continue
        pair = row.get("pair")
        group.pairs.append((int(pair) if pair is not None else len(group.pairs), samples[0], samples[1]))
    return list(groups.values()), skipped


def groups_from_sft(table: pa.Table, *, where: str) -> tuple[list[Group], Counter]:
    """An sft table (prompt turns + one assistant turn) as groups of one candidate per row."""
    skipped: Counter = Counter()
    groups: dict[str, Group] = {}
    for row in table.to_pylist():
        messages = _messages(row["messages"])
        if not messages or messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
            skipped["no_assistant_turn"] += 1
            continue
        group = groups.setdefault(row["id"], Group(row["id"], messages[:-1], extras=_extras(row)))
        sample = row.get("sample")
        text = messages[-1]["content"].strip()
        group.candidates.append(
            Candidate(int(sample) if sample is not None else len(group.candidates), text, len(text))
        )
    if table.num_rows and not groups:
        raise UserError(f"{where}: no row ends in an assistant turn; expected a traces, verdicts, sft or prefs stage")
    return list(groups.values()), skipped


def read_groups(
    path: str, *, include_reasoning: bool = True, allow_incomplete: bool = False
) -> tuple[list[Group], Counter, dict]:
    """The prompts of a traces, verdicts, sft or prefs directory (a filter's kept rows, not ``rejected/``)."""
    table, manifest = open_stage(path, allow_incomplete=allow_incomplete)
    names = table.column_names
    if is_prefs(table) or manifest.get("kind") == "prefs":
        groups, skipped = groups_from_prefs(table, where=str(path))
    elif manifest.get("kind") == "sft" or (
        "messages" in names
        and "completion" not in names
        and "response" not in names
        and "id" in names
        and table.num_rows
    ):
        groups, skipped = groups_from_sft(table, where=str(path))
    else:
        groups, skipped = groups_from_rows(table, include_reasoning=include_reasoning, where=str(path))
    return groups, skipped, manifest


def render_prompt(messages: list[dict]) -> str:
    """The question a judge sees: the last user turn, or every turn labelled when there are several.

    >>> render_prompt([{"role": "user", "content": "What is 2 * 3?"}])
    'What is 2 * 3?'
    """
    turns = [m for m in messages if m["role"] != "assistant" or m["content"]]
    if len(turns) == 1:
        return turns[0]["content"]
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in turns)


def _messages(value: list[dict] | None) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in value or []]


def _last_content(messages: list[dict] | None) -> str:
    return (messages[-1]["content"] or "").strip() if messages else ""


def _extras(row: dict) -> dict:
    return {k: row[k] for k in PASS_THROUGH if k in row}
