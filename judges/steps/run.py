"""``distill label-steps``: Math-Shepherd's automatic process labels, and Step-DPO pairs from them.

Each solution of a traces or verdicts directory is cut into steps (reward/steps.py: a line
each by default). From every step prefix the policy writes ``n`` rollouts through the generate
stage's backends (gen/: vLLM offline, or transformers), continuing the same assistant turn: the
chat template's generation prompt, the ``<think>\\n`` that opened the reasoning, then the steps so
far. Each rollout's final answer is extracted and verified as the filter does (filters/math/extract.py,
filters/math/verify.py). Step ``i`` is good (hard estimate) when any rollout from after it reached the
gold answer; ``soft`` is the share that did. The last step is the solution's own answer: its label
is whether that answer is correct, with no rollout (there is nothing left to write).

Rollouts are drawn from prefixes ``0 .. L-1`` (``L`` steps): prefix ``j`` labels step ``j`` (1-based),
and prefix 0 (nothing but the opening) gives the chosen step of a Step-DPO pair whose first step
is already wrong. So a solution costs ``L`` requests of ``n`` samples, as many as Math-Shepherd's.

Outputs: ``OUT`` the steps table (schema.py ``steps``: TRL's stepwise supervision, plus ``sample``,
``correct``, ``first_error``, ``next_steps``), and ``OUT/step_dpo`` (schema.py ``prefs_text``: TRL's
string preference format). The pairs are derived from the committed steps rows (judges/stage.py),
because the chosen step comes from the rollouts only this stage has; both resume together, and a
run killed between the two commits re-derives the missing pairs before any new rollout.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.judges import stage
from reasonkit.judges.steps.config import LabelStepsConfig, fingerprinted
from reasonkit.judges.steps.text import first_step, prefix, step_dpo_pair
from reasonkit.reward.steps import first_error, opening, solution_body, split_steps
from reasonkit.schema import MESSAGES, schema
from reasonkit.store import StageWriter

STEPS = pa.schema(
    list(schema("steps"))
    + [
        pa.field("sample", pa.int32()),
        pa.field("answer", pa.string()),
        pa.field("source", pa.string()),
        pa.field("correct", pa.bool_()),
        pa.field("first_error", pa.int32()),
        pa.field("next_steps", pa.list_(pa.list_(pa.string()))),
        pa.field("rollouts", pa.int32()),
        pa.field("rollout_tokens", pa.int64()),
        pa.field("messages", MESSAGES),
    ]
)
STEP_DPO = pa.schema(
    list(schema("prefs_text"))
    + [
        pa.field("sample", pa.int32()),
        pa.field("step", pa.int32()),
        pa.field("answer", pa.string()),
        pa.field("source", pa.string()),
    ]
)
_READ = (
    "id",
    "sample",
    "messages",
    "reasoning",
    "response",
    "completion",
    "finish_reason",
    "answer",
    "source",
    "drop_reason",
)


@dataclass
class Solution:
    id: str
    sample: int
    messages: list[dict]
    steps: list[str]
    in_think: bool
    answer: str
    source: str | None
    response: str  # the solution's own response (its answer labels the last step)


def read_solutions(cfg: LabelStepsConfig) -> tuple[list[Solution], Counter]:
    """The solutions to label: a directory's rows and, for a filter output, its ``rejected/`` rows
    dropped as ``wrong`` (the negatives a PRM and Step-DPO need). Rows that did not finish are
    skipped and counted; a finished row without gold or without a step is bad input."""
    from reasonkit.judges.inputs import open_stage, unusable
    from reasonkit.store import is_stage_dir

    tables = [(cfg.input, open_stage(cfg.input, allow_incomplete=cfg.allow_incomplete)[0])]
    rejected = Path(cfg.input) / "rejected"
    if cfg.include_wrong and is_stage_dir(rejected):
        tables.append((str(rejected), open_stage(rejected, allow_incomplete=cfg.allow_incomplete)[0]))
    solutions: list[Solution] = []
    skipped: Counter = Counter()
    seen: set[tuple[str, int]] = set()
    for where, table in tables:
        names = table.column_names
        for col in ("id", "messages", "answer"):
            if col not in names:
                why = " (the gold answer every rollout is checked against)" if col == "answer" else ""
                raise UserError(
                    f"{where}: missing column {col!r}{why}; expected a traces or verdicts stage, found {names}"
                )
        if "response" not in names and "completion" not in names:
            raise UserError(f"{where}: missing column 'response' (or 'completion'); found {names}")
        for i, row in enumerate(table.select([c for c in _READ if c in names]).to_pylist()):
            if where != cfg.input and (row.get("drop_reason") or "").split(":")[0].strip() != "wrong":
                continue
            sample = int(row["sample"]) if row.get("sample") is not None else i
            at = f"{where}: row {i} (id {row['id']!r}, sample {sample})"
            why = unusable(row) or ("duplicate_key" if (row["id"], sample) in seen else None)
            seen.add((row["id"], sample))
            if why is not None:
                skipped[why] += 1
                continue
            gold = row.get("answer")
            if gold is None or not str(gold).strip():
                raise UserError(
                    f"{at}: no gold answer in column 'answer'; label-steps checks every rollout against it"
                )
            body, in_think = solution_body(row)
            steps = split_steps(body, cfg.separator)
            if not steps:
                raise UserError(f"{at}: empty solution, no step to label (separator {cfg.separator!r})")
            solutions.append(
                Solution(
                    row["id"],
                    sample,
                    [{"role": m["role"], "content": m["content"]} for m in row["messages"]],
                    steps,
                    in_think,
                    str(gold),
                    row.get("source"),
                    row.get("response") or "",
                )
            )
    if cfg.wrong_only:
        verdicts = own_verdicts(solutions, cfg.verifier)
        skipped["correct"] += sum(verdicts)
        solutions = [s for s, ok in zip(solutions, verdicts) if not ok]
    return solutions[: cfg.limit], skipped


def own_verdicts(solutions: list[Solution], verifier: str) -> list[bool]:
    """Whether each solution's own final answer is the gold one (unverifiable: not)."""
    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.filters.math.verify import Verifier

    checker = Verifier(verifier)
    try:
        return [ok is True for ok, _ in checker.check([(extract_answer(s.response)[0], s.answer) for s in solutions])]
    finally:
        checker.close()


def make_backend(cfg: LabelStepsConfig):
    """The policy behind the generate stage's vLLM or transformers backend (preflight first)."""
    from reasonkit.gen.preflight import model_length
    from reasonkit.gen.render import load_chat_template
    from reasonkit.gen.run import GenerateConfig, preflight
    from reasonkit.gen.run import make_backend as gen_backend
    from reasonkit.gen.settings import BackendSettings, SamplingSettings, values_of

    try:
        length = cfg.max_model_len or model_length(cfg.policy)[0]
        # A rollout must be free to finish the solution: by default all the context the prefix leaves
        # (the backends shorten a request's max_tokens to what fits after its prompt).
        max_tokens = cfg.max_tokens or (length - 1 if length else 32768)
        # the sampling and backend groups whole (gen/settings.py): the policy runs as generate would run it
        config = GenerateConfig(
            prompts="",
            teacher=cfg.policy,
            out="",
            n=cfg.rollouts,
            shard_size=cfg.shard_size,
            **values_of(cfg, SamplingSettings, max_tokens=max_tokens),
            **values_of(cfg, BackendSettings),
        )
        preflight(config)
        return gen_backend(config, chat_template=load_chat_template(cfg.chat_template))
    except UserError as e:  # the generate stage names its model --teacher; here it is --policy
        raise UserError(str(e).replace("--teacher ", "--policy ")) from None


# long: the rollouts of every step prefix of a chunk at once, then their labels: one batch, one pass
def label_chunk(solutions: list[Solution], cfg: LabelStepsConfig, backend, verifier) -> list[dict]:
    """Roll out every step prefix of ``solutions`` at once; the steps rows."""
    from reasonkit.filters.math.extract import extract_answer
    from reasonkit.gen.backend import Request, derive_seed
    from reasonkit.gen.render import prompt_text
    from reasonkit.think import opens_think, split

    sep = cfg.separator
    requests, heads = [], {}
    for s in solutions:
        rendered = prompt_text(backend.tokenizer, s.messages, chat_template=getattr(backend, "chat_template", None))
        heads[s.id, s.sample] = (rendered, opening(s.in_think, opens_think(rendered)), opens_think(rendered))
        for j in range(len(s.steps)):  # prefix L (the whole solution) is labelled by its own answer
            key = f"{s.id}\x1f{s.sample}\x1f{j}"
            requests.append(
                Request(
                    id=key,
                    messages=s.messages,
                    n=cfg.rollouts,
                    prefill=heads[s.id, s.sample][1] + prefix(s.steps, j, sep),
                    sampling=replace(
                        cfg.request_sampling(derive_seed(cfg.seed, key)), max_tokens=cfg.max_tokens or 1 << 30
                    ),
                )
            )
    by_key = {r.id: r for r in requests}
    outs: dict[str, list] = defaultdict(list)
    for c in backend.generate(requests):
        outs[c.id].append(c)
    # Every rollout's answer, and each solution's own, verified in one call (one pool for the lot).
    checks, own = [], {}
    by_solution = {f"{s.id}\x1f{s.sample}": s for s in solutions}
    for key, completions in outs.items():
        s = by_solution[key.rsplit("\x1f", 1)[0]]
        gold, template_opens = s.answer, heads[s.id, s.sample][2]
        for c in sorted(completions, key=lambda c: c.sample):
            _, response = split(by_key[key].prefill + c.text, prefilled=template_opens)
            pred = extract_answer(response)[0] if c.finish_reason == "stop" else None  # a cut rollout has no answer
            checks.append(((key, c), (pred, gold)))
    for s in solutions:
        own[s.id, s.sample] = len(checks)
        checks.append(((None, None), (extract_answer(s.response)[0], s.answer)))
    verdicts = verifier.check([pair for _, pair in checks])
    reached: dict[str, list[tuple]] = defaultdict(list)  # key -> [(completion, reached gold)]
    for ((key, c), _), (ok, _) in zip(checks, verdicts):
        if key is not None:
            reached[key].append((c, ok is True))
    rows = []
    for s in solutions:
        labels, soft, nexts, tokens = [], [], [], 0
        for j in range(len(s.steps)):
            results = reached.get(f"{s.id}\x1f{s.sample}\x1f{j}", [])
            tokens += sum(int(c.completion_tokens or 0) for c, _ in results)
            if j:  # rollouts after steps 1..j judge step j
                labels.append(any(ok for _, ok in results))
                soft.append(sum(ok for _, ok in results) / max(1, len(results)))
            good = [first_step(c.text, sep) for c, ok in results if ok]
            nexts.append(list(dict.fromkeys(g for g in good if g is not None)))
        correct = verdicts[own[s.id, s.sample]][0] is True
        labels.append(correct)
        soft.append(1.0 if correct else 0.0)
        rendered, head, _ = heads[s.id, s.sample]
        rows.append(
            {
                "id": s.id,
                "prompt": rendered + head,
                "completions": s.steps,
                "labels": labels,
                "soft": soft,
                "sample": s.sample,
                "answer": s.answer,
                "source": s.source,
                "correct": correct,
                "first_error": first_error(labels),
                "next_steps": nexts,
                "rollouts": cfg.rollouts,
                "rollout_tokens": tokens,
                "messages": s.messages,
            }
        )
    return rows


def derive_pairs(separator: str, written: StageWriter):
    """Step-DPO pairs of a shard of steps rows. Samples of one prompt that slipped the same way give the
    same pair: it is kept once, here or in an earlier shard or run (``written``), so no pair weighs
    double in DPO's loss."""
    from reasonkit.store import iter_stage

    seen = {
        (r["prompt"], r["chosen"], r["rejected"])
        for t in iter_stage(written.dir, allow_incomplete=True)
        for r in t.select(["prompt", "chosen", "rejected"]).to_pylist()
    }

    def derive(rows: list[dict]) -> list[dict]:
        pairs = []
        for pair, _ in (step_dpo_pair(r, separator) for r in rows):
            if pair is not None and (key := (pair["prompt"], pair["chosen"], pair["rejected"])) not in seen:
                seen.add(key)
                pairs.append(pair)
        return pairs

    return derive


def run_label_steps(cfg: LabelStepsConfig, *, log: Callable[[str], None] | None = None, backend=None) -> dict:
    """Label every solution of ``cfg.input`` not yet in ``cfg.out``; write steps and Step-DPO pairs; the report."""
    from reasonkit.filters.math.verify import Verifier
    from reasonkit.store import fingerprint_path

    solutions, skipped = read_solutions(cfg)  # bad input fails before any model loads
    settings = fingerprinted(cfg)
    source_fp = fingerprint_path(cfg.input)
    steps = StageWriter(
        cfg.out,
        stage="label-steps",
        kind="steps",
        config=settings,
        keys=("id", "sample"),
        input_fingerprint=source_fp,
        input_path=cfg.input,
        overwrite=cfg.overwrite,
    )
    pairs = StageWriter(
        Path(cfg.out) / "step_dpo",
        stage="label-steps",
        kind="prefs_text",
        config=settings,
        keys=("id", "sample"),
        input_fingerprint=source_fp,
        overwrite=cfg.overwrite,
    )
    outputs = [stage.Output(pairs, derive_pairs(cfg.separator, pairs), STEP_DPO)]
    stage.reconcile(steps, outputs)
    done = steps.done_keys()
    todo = [s for s in solutions if (s.id, s.sample) not in done]
    labelled, seconds = 0, 0.0
    if todo:
        owned = backend is None
        backend = backend or make_backend(cfg)
        verifier = Verifier(cfg.verifier)
        started = time.monotonic()  # after the engine is up: the figure that scales with solutions
        try:
            for chunk in stage.chunks(todo, cfg.shard_size):
                stage.commit(steps, STEPS, outputs, label_chunk(chunk, cfg, backend, verifier))
                labelled += len(chunk)
                seconds = time.monotonic() - started
                (log or stage.say)(f"label-steps: {labelled}/{len(todo)} solutions, {seconds:.1f}s")
        finally:
            verifier.close()
            if owned:
                backend.close()
    report = summarize(cfg, steps, pairs, len(solutions), skipped, labelled, seconds)
    stage.write_report(cfg.out, report)
    pairs.finish()
    steps.finish(report=report)
    (log or stage.say)(
        f"label-steps: {report['solutions']} solutions, {report['steps']} steps ({report['good_steps']} good), "
        f"{report['pairs']} Step-DPO pairs",
    )
    return report


def summarize(cfg, steps, pairs, read: int, skipped: Counter, labelled: int, seconds: float) -> dict:
    from reasonkit.store import iter_stage

    n_steps = good = wrong_solutions = correct = tokens = 0
    no_pair: Counter = Counter()
    solutions = 0
    for t in iter_stage(steps.dir, allow_incomplete=True):
        for r in t.select(
            ["id", "prompt", "completions", "labels", "correct", "next_steps", "rollout_tokens"]
        ).to_pylist():
            solutions += 1
            n_steps += len(r["labels"])
            good += sum(r["labels"])
            correct += bool(r["correct"])
            wrong_solutions += first_error(r["labels"]) is not None
            tokens += r["rollout_tokens"] or 0
            no_pair[step_dpo_pair(r, cfg.separator)[1] or "duplicate_pair"] += 1
    no_pair["duplicate_pair"] -= pairs.manifest["rows"]  # the rows with a pair less the pairs kept
    no_pair = +no_pair  # drops the zero counts
    return {
        "stage": "label-steps",
        "policy": cfg.policy,
        "input": cfg.input,
        "solutions_read": read,
        "rows_skipped": dict(skipped),
        "solutions": solutions,
        "solutions_correct": correct,
        "solutions_with_a_wrong_step": wrong_solutions,
        "steps": n_steps,
        "good_steps": good,
        "rollouts_per_step": cfg.rollouts,
        "rollout_tokens": tokens,
        "pairs": pairs.manifest["rows"],
        "no_pair": dict(no_pair),
        "this_run": {
            "solutions": labelled,
            "seconds": round(seconds, 2),
            "seconds_per_solution": round(seconds / labelled, 3) if labelled else None,
        },
    }
