"""``distill judge``: RLAIF preferences from an LLM judge, through any gen backend.

- **pointwise**: each candidate answer is graded 1-10 against a rubric (templates/pointwise.jinja);
  per prompt the best-scored answer is chosen over the worst when their scores differ by at least
  ``min_margin`` (and by more than nothing: equal scores are a tie, never a pair).
- **pairwise**: each pair is asked twice, A/B then B/A (templates/pairwise.jinja), to cancel the
  judge's position bias (MT-Bench's finding: judges favour the first answer). A preference stands
  only when both orders name the same answer; two orders that disagree, or a "tie", drop the pair.
  A traces input is paired at random (seeded by ``(seed, id)``); a prefs input's pairs are re-judged.

A reply that cannot be read gives ``None`` with the reason (judges/parse.py), never a guess. The
record (``OUT/record/``) keeps every raw reply, the parsed value or reason, and the tokens spent.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pyarrow as pa

from reasonkit.gen.backend import derive_seed
from reasonkit.judges import stage
from reasonkit.judges.backends import ask, make_backend, tokens
from reasonkit.judges.config import JudgeConfig, fingerprinted
from reasonkit.judges.inputs import PASS_THROUGH, Group, read_groups, render_prompt
from reasonkit.judges.parse import parse_score, parse_verdict
from reasonkit.judges.prompts import load_rubric, render
from reasonkit.schema import MESSAGES
from reasonkit.store import StageWriter, fingerprint_path

_COST = [("finish_reason", pa.string()), ("prompt_tokens", pa.int32()), ("completion_tokens", pa.int32())]
POINTWISE_RECORD = stage.with_extras(
    stage.prompt_fields()
    + [
        ("sample", pa.int32()),
        ("text", pa.string()),
        ("score", pa.float32()),
        ("rationale", pa.string()),
        ("reason", pa.string()),
        ("judge_output", pa.string()),
    ]
    + _COST,
    PASS_THROUGH,
)
PAIRWISE_RECORD = stage.with_extras(
    stage.prompt_fields()
    + [
        ("pair", pa.int32()),
        ("a_sample", pa.int32()),
        ("b_sample", pa.int32()),
        ("a_text", pa.string()),
        ("b_text", pa.string()),
        ("verdict_ab", pa.string()),
        ("verdict_ba", pa.string()),
        ("winner", pa.string()),
        ("reason", pa.string()),
        ("output_ab", pa.string()),
        ("output_ba", pa.string()),
    ]
    + _COST,
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
        ("pair", pa.int32()),
        ("chosen_sample", pa.int32()),
        ("rejected_sample", pa.int32()),
    ],
    PASS_THROUGH,
)


def pointwise_pairs(rows: list[dict], min_margin: float, k: int) -> tuple[list[dict], str | None]:
    """Prefs rows of one prompt from its graded candidates, or none and the reason."""
    scored = [r for r in rows if r["score"] is not None]
    if len(scored) < 2:
        return [], "fewer_than_two_scored"
    best = sorted(scored, key=lambda r: (-r["score"], len(r["text"]), r["sample"]))
    worst = sorted(scored, key=lambda r: (r["score"], -len(r["text"]), r["sample"]))
    pairs, used = [], set()
    for hi in best:
        if len(pairs) == k:
            break
        if hi["sample"] in used:
            continue
        lo = next((r for r in worst if r["sample"] not in used | {hi["sample"]} and r["text"] != hi["text"]), None)
        margin = hi["score"] - lo["score"] if lo is not None else 0.0
        if margin <= 0 or margin < min_margin:
            break  # both lists are sorted: no later pair has a wider margin
        used |= {hi["sample"], lo["sample"]}
        pairs.append(_pref(hi, len(pairs), "judge-pointwise", hi, lo, hi["score"], lo["score"]))
    if pairs:
        return pairs, None
    return [], "tied_scores" if best[0]["score"] == worst[0]["score"] else "margin_below_min"


def _pref(row: dict, pair: int, strategy: str, chosen: dict, rejected: dict, cscore=None, rscore=None) -> dict:
    """A prefs row; ``chosen``/``rejected`` hold ``text`` and ``sample``."""
    return {
        "id": row["id"],
        "prompt": row["prompt"],
        "chosen": stage.assistant(chosen["text"]),
        "rejected": stage.assistant(rejected["text"]),
        "chosen_score": cscore,
        "rejected_score": rscore,
        "strategy": strategy,
        "pair": pair,
        "chosen_sample": chosen["sample"],
        "rejected_sample": rejected["sample"],
        **{c: row.get(c) for c in PASS_THROUGH},
    }


def derive_pointwise(cfg: JudgeConfig):
    def derive(rows: list[dict]) -> list[dict]:
        by_id: dict[str, list[dict]] = {}
        for r in rows:
            by_id.setdefault(r["id"], []).append(r)
        return [
            p for group in by_id.values() for p in pointwise_pairs(group, cfg.min_margin, cfg.max_pairs_per_prompt)[0]
        ]

    return derive


def derive_pairwise(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        if r["winner"] in ("a", "b"):
            side = {s: {"text": r[f"{s}_text"], "sample": r[f"{s}_sample"]} for s in "ab"}
            lose = "b" if r["winner"] == "a" else "a"
            out.append(_pref(r, r["pair"], "judge-pairwise", side[r["winner"]], side[lose]))
    return out


def pairwise_items(group: Group, k: int, seed: int) -> list[tuple[int, int, int]]:
    """``(pair, a, b)`` sample triples: a prefs input's own pairs, else K disjoint random pairs."""
    if group.pairs:
        return group.pairs
    distinct = list({c.text: c for c in reversed(group.candidates)}.values())[::-1]
    samples = [c.sample for c in sorted(distinct, key=lambda c: c.sample)]
    random.Random(derive_seed(seed, group.id)).shuffle(samples)
    return [(i, samples[2 * i], samples[2 * i + 1]) for i in range(min(k, len(samples) // 2))]


def combine(ab: str | None, ba: str | None) -> tuple[str | None, str | None]:
    """The winner (``a``/``b``) from the A/B verdict and the swapped B/A verdict, or None and why.

    >>> combine("A", "B"), combine("A", "A"), combine("tie", "tie")
    (('a', None), (None, 'position disagreement'), (None, 'tie'))
    """
    second = {"A": "B", "B": "A"}.get(ba, ba)  # B/A order: its "A" is our b
    if ab == "tie" or second == "tie":
        return None, "tie"
    if ab != second:
        return None, "position disagreement"
    return ab.lower(), None


def _truncated(answer, reason: str | None) -> str | None:
    """A parse failure of a reply cut off by max_tokens says so: the fix is a larger budget."""
    if reason and answer.finish_reason == "length":
        return f"{reason} (reply truncated: finish_reason=length)"
    return reason


def _base(group: Group) -> dict:
    return {"id": group.id, "prompt": group.prompt, **{c: group.extras.get(c) for c in PASS_THROUGH}}


# long: the judge's requests for a chunk at once, then each verdict parsed and recorded: one batch
def judge_chunk(groups: list[Group], cfg: JudgeConfig, rubric: str, backend) -> tuple[list[dict], dict]:
    """Ask the judge about every item of ``groups`` at once; the record rows and the tokens spent."""
    prompts, items = {}, []
    for g in groups:
        ctx = {
            "rubric": rubric,
            "question": render_prompt(g.prompt),
            "reference": g.extras.get("answer") if cfg.reference else None,
        }
        texts = {c.sample: c.text for c in g.candidates}
        if cfg.mode == "pointwise":
            for c in g.candidates:
                key = f"{g.id}\x1f{c.sample}"
                prompts[key] = [{"role": "user", "content": render("pointwise", answer=c.text, **ctx)}]
                items.append((g, c.sample, key))
        else:
            for pair, a, b in pairwise_items(g, cfg.max_pairs_per_prompt, cfg.seed):
                keys = (f"{g.id}\x1f{pair}\x1fab", f"{g.id}\x1f{pair}\x1fba")
                prompts[keys[0]] = [
                    {"role": "user", "content": render("pairwise", answer_a=texts[a], answer_b=texts[b], **ctx)}
                ]
                prompts[keys[1]] = [
                    {"role": "user", "content": render("pairwise", answer_a=texts[b], answer_b=texts[a], **ctx)}
                ]
                items.append((g, (pair, a, b), keys))
    answers = ask(backend, prompts, cfg, cfg.seed)
    rows = []
    for g, item, key in items:
        if cfg.mode == "pointwise":
            a = answers[key]
            parsed = parse_score(a.text) if a.failure is None else None
            rows.append(
                {
                    **_base(g),
                    "sample": item,
                    "text": next(c.text for c in g.candidates if c.sample == item),
                    "score": parsed.value if parsed else None,
                    "rationale": parsed.rationale if parsed else None,
                    "reason": a.failure or _truncated(a, parsed.reason),
                    "judge_output": a.text,
                    "finish_reason": a.finish_reason,
                    "prompt_tokens": a.prompt_tokens,
                    "completion_tokens": a.completion_tokens,
                }
            )
            continue
        pair, sa, sb = item
        replies = [answers[k] for k in key]
        verdicts = [parse_verdict(r.text) if r.failure is None else None for r in replies]
        failed = [
            r.failure or (v.reason and f"unparseable: {_truncated(r, v.reason)}") for r, v in zip(replies, verdicts)
        ]
        values = [v.value if v else None for v in verdicts]
        winner, why = combine(*values) if not any(failed) else (None, next(f for f in failed if f))
        texts = {c.sample: c.text for c in g.candidates}
        rows.append(
            {
                **_base(g),
                "pair": pair,
                "a_sample": sa,
                "b_sample": sb,
                "a_text": texts[sa],
                "b_text": texts[sb],
                "verdict_ab": values[0],
                "verdict_ba": values[1],
                "winner": winner,
                "reason": why,
                "output_ab": replies[0].text,
                "output_ba": replies[1].text,
                "finish_reason": ",".join(r.finish_reason for r in replies),
                "prompt_tokens": sum(r.prompt_tokens for r in replies),
                "completion_tokens": sum(r.completion_tokens for r in replies),
            }
        )
    return rows, tokens(answers)


def run_judge(cfg: JudgeConfig, *, log: Callable[[str], None] | None = None, backend=None) -> dict:
    """Judge every prompt of ``cfg.input`` not yet in the record; write prefs and record; the report."""
    rubric = load_rubric(cfg.rubric)  # a bad rubric fails before any data or model is loaded
    groups, skipped, _ = read_groups(
        cfg.input, include_reasoning=cfg.include_reasoning, allow_incomplete=cfg.allow_incomplete
    )
    settings = {**fingerprinted(cfg), "rubric": rubric}
    source_fp = fingerprint_path(cfg.input)
    pointwise = cfg.mode == "pointwise"
    prefs = StageWriter(
        cfg.out,
        stage="judge",
        kind="prefs",
        config=settings,
        keys=("id", "pair"),
        input_fingerprint=source_fp,
        input_path=cfg.input,
        overwrite=cfg.overwrite,
    )
    record = StageWriter(
        stage.record_dir(cfg.out),
        stage="judge-record",
        kind=None,
        config=settings,
        keys=("id", "sample") if pointwise else ("id", "pair"),
        input_fingerprint=source_fp,
        overwrite=cfg.overwrite,
    )
    outputs = [stage.Output(prefs, derive_pointwise(cfg) if pointwise else derive_pairwise, PREFS)]
    stage.reconcile(record, outputs)
    done = stage.done_ids(record)
    todo = [g for g in groups if g.id not in done and len(g.candidates) >= 2]
    spent = Counter()
    if todo:
        owned = backend is None
        backend = backend or make_backend(cfg, seed=cfg.seed)
        try:
            for n, chunk in enumerate(stage.chunks(todo, cfg.shard_size)):
                rows, cost = judge_chunk(chunk, cfg, rubric, backend)
                stage.commit(record, POINTWISE_RECORD if pointwise else PAIRWISE_RECORD, outputs, rows)
                spent.update(cost)
                (log or stage.say)(
                    f"judge: {min((n + 1) * cfg.shard_size, len(todo))}/{len(todo)} prompts, {spent['calls']} calls"
                )
        finally:
            if owned:
                backend.close()
    report = summarize(cfg, record, prefs, groups, skipped, dict(spent))
    stage.write_report(cfg.out, report)
    record.finish()
    prefs.finish(report=report)
    return report


def summarize(cfg: JudgeConfig, record: StageWriter, prefs: StageWriter, groups, skipped, spent) -> dict:
    from reasonkit.store import iter_stage

    reasons, paired, no_pair, tok = [], set(), Counter(), Counter()
    for t in iter_stage(prefs.dir, allow_incomplete=True):
        paired.update(t.column("id").to_pylist())
    for t in iter_stage(record.dir, allow_incomplete=True):
        rows = t.to_pylist()
        reasons += [r["reason"] for r in rows]
        tok.update(
            {
                "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
                "completion_tokens": sum(r["completion_tokens"] for r in rows),
            }
        )
        if cfg.mode == "pointwise":
            by_id: dict[str, list[dict]] = {}
            for r in rows:
                by_id.setdefault(r["id"], []).append(r)
            no_pair.update(pointwise_pairs(v, cfg.min_margin, cfg.max_pairs_per_prompt)[1] for v in by_id.values())
        else:
            first: dict[str, str] = {}
            for r in rows:
                if r["winner"] is None and r["id"] not in paired:
                    first.setdefault(r["id"], r["reason"].split(":")[0])
            no_pair.update(first.values())
    no_pair.pop(None, None)
    few = sum(1 for g in groups if len(g.candidates) < 2)
    if few:
        no_pair["fewer_than_two_candidates"] += few
    return {
        "stage": "judge",
        "mode": cfg.mode,
        "judge": cfg.judge,
        "prompts_in": len(groups),
        "rows_skipped": dict(skipped),
        "items_judged": len(reasons),
        "no_value": stage.reason_counts(reasons),
        "prompts_paired": len(paired),
        "pairs": prefs.manifest["rows"],
        "no_pair": dict(no_pair),
        "tokens": dict(tok),
        "this_run": spent,
    }
