"""``distill pairs``: DPO preference pairs from verifier outcomes, no model in the loop.

A filter output directory holds the kept verdicts and, in ``rejected/``, every dropped row with its
reason; the incorrect samples are all in the latter. Both are read, in two streaming passes so the
traces never sit in memory at once: the first reads what decides a pair (ids, verdicts, lengths and
a digest of each text), the second fetches the texts of the rows that were picked.

Strategies, per prompt:

- ``correct-vs-incorrect``: chosen = a correct sample (``--chosen shortest|random``), rejected = an
  incorrect one (``--rejected longest|random``). Scores are the verifier's reward, 1.0 and 0.0.
- ``short-vs-long``: the shortest correct sample against the longest correct one (SkyThought's
  recipe for shorter reasoning); with K pairs, the k-th shortest against the k-th longest.

Never paired: identical texts (compared by digest) and equal lengths (a tie says nothing).
``correct`` None means unverifiable and is never used as either side. A correct row the filter
dropped for a reason other than selection (language, format, repetition) may only be rejected in
short-vs-long terms, never chosen; a prompt with a decontamination drop is left out entirely.
Random picks use a generator seeded by ``(seed, id)``, so the pairs do not depend on row order.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.errors import UserError
from reasonkit.gen.backend import derive_seed
from reasonkit.judges.config import PairsConfig, fingerprinted
from reasonkit.judges.inputs import PASS_THROUGH, unusable
from reasonkit.judges.stage import write_report
from reasonkit.schema import MESSAGES
from reasonkit.store import StageWriter, fingerprint, fingerprint_path, is_stage_dir, shard_paths
from reasonkit.think import candidate_text

_COLUMNS = (
    "id",
    "sample",
    "messages",
    "correct",
    "keep",
    "drop_reason",
    "finish_reason",
    "completion_tokens",
    "reasoning",
    "response",
    "completion",
    *PASS_THROUGH,
)
_OUT_SHARD = 2000  # pairs per committed shard


@dataclass(frozen=True)
class Cand:
    """What decides a pair, without the text."""

    sample: int
    length: int
    digest: str
    correct: bool | None
    choosable: bool = True


def pick(cands: list[Cand], cfg: PairsConfig, rng: random.Random) -> tuple[list[tuple[Cand, Cand]], str | None]:
    """The (chosen, rejected) pairs of one prompt, or none and the reason why.

    >>> c = lambda s, n, ok: Cand(s, n, f"d{s}", ok)
    >>> cfg = PairsConfig(verdicts="v", out="o")
    >>> [(a.sample, b.sample) for a, b in pick([c(0, 9, True), c(1, 5, True), c(2, 7, False)], cfg, random.Random(0))[0]]
    [(1, 2)]
    >>> pick([c(0, 9, True)], cfg, random.Random(0))
    ([], 'no_incorrect')
    """  # noqa: E501
    ordered = sorted(cands, key=lambda c: c.sample)
    verified = [c for c in ordered if c.correct is not None]
    if not ordered:
        return [], "no_usable_samples"
    if not verified:
        return [], "unverifiable"
    right = [c for c in verified if c.correct]
    good = _distinct([c for c in right if c.choosable])
    if cfg.strategy == "short-vs-long":
        return _short_vs_long(good, right, cfg.max_pairs_per_prompt)
    wrong = _distinct([c for c in verified if not c.correct])
    clash = {c.digest for c in good} & {c.digest for c in wrong}  # the same text judged both ways
    good, wrong = [c for c in good if c.digest not in clash], [c for c in wrong if c.digest not in clash]
    if not right:
        return [], "no_correct"
    if not wrong:
        return [], "no_incorrect" if not clash else "identical"
    if not good:
        return [], "no_choosable_correct" if not clash else "identical"
    if cfg.chosen == "shortest":
        good.sort(key=lambda c: (c.length, c.sample))
    else:
        rng.shuffle(good)
    if cfg.rejected == "longest":
        wrong.sort(key=lambda c: (-c.length, c.sample))
    else:
        rng.shuffle(wrong)
    # Each pair is new: one side's index only grows while the other wraps around.
    n = min(cfg.max_pairs_per_prompt, max(len(good), len(wrong)))
    return [(good[i % len(good)], wrong[i % len(wrong)]) for i in range(n)], None


def _short_vs_long(good: list[Cand], right: list[Cand], k: int) -> tuple[list[tuple[Cand, Cand]], str | None]:
    """Shortest choosable correct against longest correct; each sample in one pair at most."""
    distinct = _distinct(right)
    if len(distinct) < 2:
        return [], "fewer_than_two_correct" if len(right) < 2 else "identical"
    if not good:
        return [], "no_choosable_correct"
    shorts = sorted(good, key=lambda c: (c.length, c.sample))
    longs = sorted(distinct, key=lambda c: (-c.length, c.sample))
    pairs: list[tuple[Cand, Cand]] = []
    used: set[int] = set()
    for short in shorts:
        if len(pairs) == k:
            break
        if short.sample in used:
            continue
        long = next((c for c in longs if c.sample not in used and c.sample != short.sample), None)
        if long is None or long.digest == short.digest or short.length >= long.length:
            break  # sorted both ways: every later pair would be a tie or reversed
        pairs.append((short, long))
        used |= {short.sample, long.sample}
    return pairs, None if pairs else "equal_lengths"


def _distinct(cands: list[Cand]) -> list[Cand]:
    seen: set[str] = set()
    out = []
    for c in cands:
        if c.digest not in seen:
            seen.add(c.digest)
            out.append(c)
    return out


def _head(reason: str | None) -> str:
    """``"decontam: aime24"`` -> ``"decontam"``."""
    words = (reason or "").split(":")[0].split()
    return words[0].lower() if words else ""


def _sources(path: Path) -> list[Path]:
    """The verdicts directory and, for a filter output, its ``rejected/`` sub-stage."""
    if not path.exists():
        raise UserError(f"{path}: no such directory")
    if not is_stage_dir(path):
        raise UserError(f"{path}: not a stage directory (no _manifest.json); expected the output of `distill filter`")
    return [path] + ([path / "rejected"] if is_stage_dir(path / "rejected") else [])


def _shards(dirs: list[Path], allow_incomplete: bool) -> list[Path]:
    shards = [s for d in dirs for s in shard_paths(d, allow_incomplete=allow_incomplete)]
    for shard in shards:
        names = pq.read_schema(shard).names
        for col in ("id", "sample", "messages", "correct"):
            if col not in names:
                hint = " (pairs needs verdicts from `distill filter`)" if col == "correct" else ""
                raise UserError(f"{shard.parent}: missing column {col!r}{hint}; found columns {names}")
    return shards


def _scan(shards: list[Path], cfg: PairsConfig):
    """Pass 1: per prompt, its candidates (texts reduced to digests) and exclusion; skipped rows."""
    cands: dict[str, list[Cand]] = {}
    excluded: dict[str, str] = {}
    skipped: Counter = Counter()
    chosen_ok = {r.lower() for r in cfg.chosen_drop_reasons}
    exclude = {r.lower() for r in cfg.exclude_drop_reasons}
    for shard in shards:
        names = pq.read_schema(shard).names
        table = pq.read_table(shard, columns=[c for c in _COLUMNS if c in names and c != "messages"])
        for i, row in enumerate(table.to_pylist()):
            pid = row["id"]
            bucket = cands.setdefault(pid, [])
            head = _head(row.get("drop_reason"))
            if head in exclude:
                excluded[pid] = head
            why = unusable(row)
            text = candidate_text(row) if why is None else ""
            if why is None and not text:
                why = "empty"
            if why is not None:
                skipped[why] += 1
                continue
            tokens = row.get("completion_tokens")
            bucket.append(
                Cand(
                    sample=int(row["sample"]),
                    length=int(tokens) if tokens is not None else len(text),
                    digest=hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(),
                    correct=row.get("correct"),
                    choosable=row.get("keep") is not False or head in chosen_ok,
                )
            )
    return cands, excluded, skipped


def _fetch(shards: list[Path], wanted: set[tuple[str, int]]) -> dict[tuple[str, int], dict]:
    """Pass 2: the text, prompt and pass-through columns of the picked rows only."""
    found: dict[tuple[str, int], dict] = {}
    ids = {pid for pid, _ in wanted}
    for shard in shards:
        names = pq.read_schema(shard).names
        table = pq.read_table(shard, columns=[c for c in _COLUMNS if c in names])
        mask = pc.is_in(table.column("id"), value_set=pa.array(sorted(ids), pa.string()))
        for row in table.filter(mask).to_pylist():
            key = (row["id"], int(row["sample"]))
            if key in wanted and key not in found:
                found[key] = row
    return found


def build(cfg: PairsConfig) -> tuple[list[dict], dict]:
    """Every pair (as output rows, prompt by prompt) and the report, without writing anything."""
    shards = _shards(_sources(Path(cfg.verdicts)), cfg.allow_incomplete)
    cands, excluded, skipped = _scan(shards, cfg)
    no_pair: Counter = Counter()
    picked: list[tuple[str, int, Cand, Cand]] = []
    for pid, group in cands.items():
        if pid in excluded:
            no_pair[f"excluded:{excluded[pid]}"] += 1
            continue
        pairs, reason = pick(group, cfg, random.Random(derive_seed(cfg.seed, pid)))
        if not pairs:
            no_pair[reason] += 1
        picked.extend((pid, k, a, b) for k, (a, b) in enumerate(pairs))
    rows = _fetch(shards, {(pid, c.sample) for pid, _, a, b in picked for c in (a, b)})
    verifier = cfg.strategy == "correct-vs-incorrect"
    out = []
    for pid, k, a, b in picked:
        first = rows[(pid, a.sample)]
        out.append(
            {
                "id": pid,
                "prompt": [{"role": m["role"], "content": m["content"]} for m in first["messages"]],
                "chosen": [{"role": "assistant", "content": candidate_text(first)}],
                "rejected": [{"role": "assistant", "content": candidate_text(rows[(pid, b.sample)])}],
                "chosen_score": 1.0 if verifier else None,
                "rejected_score": 0.0 if verifier else None,
                "strategy": cfg.strategy,
                "pair": k,
                "chosen_sample": a.sample,
                "rejected_sample": b.sample,
                "chosen_length": a.length,
                "rejected_length": b.length,
                **{c: first.get(c) for c in PASS_THROUGH if c in first},
            }
        )
    paired = len({r["id"] for r in out})
    report = {
        "stage": "pairs",
        "strategy": cfg.strategy,
        "rows_in": sum(len(v) for v in cands.values()) + sum(skipped.values()),
        "rows_skipped": dict(sorted(skipped.items())),
        "prompts_in": len(cands),
        "prompts_paired": paired,
        "prompts_without_pair": sum(no_pair.values()),
        "no_pair": dict(sorted(no_pair.items())),
        "pairs": len(out),
    }
    return out, report


def to_table(rows: list[dict]) -> pa.Table:
    """Pair rows as a prefs table with an explicit schema."""
    fields = [
        ("id", pa.string()),
        ("prompt", MESSAGES),
        ("chosen", MESSAGES),
        ("rejected", MESSAGES),
        ("chosen_score", pa.float32()),
        ("rejected_score", pa.float32()),
        ("strategy", pa.string()),
        ("pair", pa.int32()),
        ("chosen_sample", pa.int32()),
        ("rejected_sample", pa.int32()),
        ("chosen_length", pa.int32()),
        ("rejected_length", pa.int32()),
    ] + [(c, pa.string()) for c in PASS_THROUGH if rows and c in rows[0]]
    schema = pa.schema(fields)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def run_pairs(cfg: PairsConfig, *, log: Callable[[str], None] | None = None) -> dict:
    """Build the pairs and write them as a resumable ``prefs`` stage directory; returns the report."""
    src = _sources(Path(cfg.verdicts))
    writer = StageWriter(
        cfg.out,
        stage="pairs",
        kind="prefs",
        config=fingerprinted(cfg),
        keys=("id", "pair"),
        input_fingerprint=fingerprint([fingerprint_path(d) for d in src]),
        input_path=src,
        overwrite=cfg.overwrite,
    )
    rows, report = build(cfg)
    done = writer.done_keys()
    todo = [r for r in rows if (r["id"], r["pair"]) not in done]
    for start in range(0, len(todo), _OUT_SHARD):
        writer.commit(to_table(todo[start : start + _OUT_SHARD]))
    report["resumed_pairs"] = len(rows) - len(todo)
    write_report(cfg.out, report)
    writer.finish(report=report)
    return report
