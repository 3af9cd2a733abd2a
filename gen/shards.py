"""Which prompts a run still owes, and turning completions back into committed shards.

>>> w = plan(["a", "b", "c"], n=2, shard_size=2, done={("a", 0), ("a", 1), ("b", 0)})
>>> w.chunks, w.prompts
([[1], [2]], 2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonkit.gen.backend import Completion, Request, derive_seed
from reasonkit.schema import LOGPROB_COLUMNS, MESSAGES
from reasonkit.think import join, split


@dataclass
class Work:
    """Prompt indices to generate, grouped by shard (the fixed slices of the prompt list)."""

    ids: list[str]
    n: int
    chunks: list[list[int]]
    done: set[tuple]

    @property
    def prompts(self) -> int:
        return sum(len(c) for c in self.chunks)


def plan(ids: list[str], n: int, shard_size: int, done: set[tuple]) -> Work:
    """Every prompt with a sample not yet committed, in shard order.

    Slices are fixed by position, so an interrupted run and its rerun group the same prompts
    together (and a seeded engine sees the same batches); a prompt is owed whole when any of its
    samples is missing, and samples already committed are dropped again at commit time.
    """
    chunks = []
    for start in range(0, len(ids), shard_size):
        owed = [
            i
            for i in range(start, min(start + shard_size, len(ids)))
            if any((ids[i], k) not in done for k in range(n))
        ]
        if owed:
            chunks.append(owed)
    return Work(ids, n, chunks, done)


class Assembler:
    """Collects completions per shard and commits a shard when its last sample arrives."""

    def __init__(
        self,
        prompts: pa.Table,
        messages: list[list[dict]],
        work: Work,
        *,
        teacher: str,
        gen_config: str,
        prefilled: bool,
        commit: Callable[[pa.Table], object],
    ):
        self.prompts, self.messages, self.work = prompts, messages, work
        self.teacher, self.gen_config, self.prefilled, self.commit = teacher, gen_config, prefilled, commit
        self.index = {work.ids[i]: i for chunk in work.chunks for i in chunk}
        self.chunk_of = {i: c for c, chunk in enumerate(work.chunks) for i in chunk}
        self.waiting = {c: len(chunk) for c, chunk in enumerate(work.chunks)}  # prompts still owed, per shard
        self.got: dict[int, dict[int, Completion]] = {}
        self.committed = 0
        # Pass-through prompt columns: everything but the two the traces rebuild.
        self.extra = [c for c in prompts.column_names if c not in ("id", "messages")]
        self.logprobs: int | None = None  # the top K asked of every token (set by requests())

    def requests(self, config, prefill: str) -> Iterator[Request]:
        self.logprobs = getattr(config, "logprobs", None)
        for chunk in self.work.chunks:
            for i in chunk:
                pid = self.work.ids[i]
                sampling = config.request_sampling(derive_seed(config.seed, pid))
                yield Request(pid, self.messages[i], config.n, sampling, prefill, logprobs=self.logprobs)

    def add(self, completion: Completion) -> int:
        """Record one sample; returns 1 when it completed its prompt (for progress), else 0."""
        i = self.index.get(completion.id)
        if i is None or not 0 <= completion.sample < self.work.n:
            raise RuntimeError(f"backend returned an unknown sample {completion.id!r}/{completion.sample}")
        samples = self.got.setdefault(i, {})
        if completion.sample in samples:
            raise RuntimeError(f"backend returned sample {completion.id!r}/{completion.sample} twice")
        samples[completion.sample] = completion
        if len(samples) < self.work.n:
            return 0
        c = self.chunk_of[i]
        self.waiting[c] -= 1
        if self.waiting[c] == 0:
            self._commit(c)
        return 1

    def check_complete(self) -> None:
        owed = [c for c, left in self.waiting.items() if left]
        if owed:
            raise RuntimeError(f"backend stopped with {len(owed)} shards incomplete (of {len(self.waiting)})")

    def _commit(self, c: int) -> None:
        rows, take = [], []
        for i in self.work.chunks[c]:
            for k, comp in sorted(self.got.pop(i).items()):
                if (comp.id, k) in self.work.done:
                    continue  # committed by an earlier run
                rows.append(comp)
                take.append(i)
        self.commit(self.table(rows, take))
        self.committed += 1

    def table(self, rows: list[Completion], take: list[int]) -> pa.Table:
        texts, reasonings, responses = [], [], []
        for comp in rows:
            if comp.reasoning is not None:  # the server split it: rebuild the raw text
                texts.append(join(comp.reasoning, comp.text))
                reasonings.append(comp.reasoning)
                responses.append(comp.text.strip())
            else:
                # the backend saw the rendered prompt: a template that opened <think> itself makes an
                # unclosed sample reasoning, not a response (--prefill-think alone cannot know)
                reasoning, response = split(comp.text, prefilled=self.prefilled or bool(comp.prefilled))
                texts.append(comp.text)
                reasonings.append(reasoning)
                responses.append(response)
        count = len(rows)
        columns = {
            "id": pa.array([r.id for r in rows], pa.string()),
            "sample": pa.array([r.sample for r in rows], pa.int32()),
            "messages": pa.array([self.messages[i] for i in take], MESSAGES),
            "completion": pa.array(texts, pa.string()),
            "reasoning": pa.array(reasonings, pa.string()),
            "response": pa.array(responses, pa.string()),
            "finish_reason": pa.array([r.finish_reason for r in rows], pa.string()),
            "prompt_tokens": pa.array([r.prompt_tokens for r in rows], pa.int32()),
            "completion_tokens": pa.array([r.completion_tokens for r in rows], pa.int32()),
            "teacher": pa.array([self.teacher] * count, pa.string()),
            "gen_config": pa.array([self.gen_config] * count, pa.string()),
        }
        if self.logprobs:
            columns.update(logprob_columns(rows))
        return self.with_extras(columns, take)

    def with_extras(self, columns: dict, take: list[int]) -> pa.Table:
        """``columns`` + the prompts' pass-through columns of rows ``take`` (a subclass builds other tables)."""
        passed = self.prompts.select(self.extra).take(pa.array(take, pa.int64()))
        for name in self.extra:
            columns[name] = passed.column(name)
        return pa.table(columns)


def logprob_columns(rows: list[Completion]) -> dict[str, pa.Array]:
    """The rows' sampled ids and top-K log-probs as the contract's columns (schema.LOGPROB_COLUMNS); a row the
    backend refused (``finish_reason`` error) has none: empty lists."""
    return {
        column.name: pa.array([getattr(r, field) or [] for r in rows], column.type)
        for column, field in zip(LOGPROB_COLUMNS, ("token_ids", "top_ids", "top_logprobs"))
    }


def generate_shard(
    backend,
    prompts: pa.Table,
    messages: list[list[dict]],
    done: set[tuple],
    config,
    *,
    teacher: str,
    gen_config: str,
    prefill: str,
) -> pa.Table:
    """Every sample one shard still owes, through ``backend``, as the table the stage commits.

    The unit of work of a Ray replica: the same Assembler as the local loop, over one shard's
    prompts (``prompts`` and their rendered ``messages``), skipping the ``done`` keys.
    """
    work = plan(prompts.column("id").to_pylist(), config.n, max(1, prompts.num_rows), done)
    shards: list[pa.Table] = []
    assembler = Assembler(
        prompts,
        messages,
        work,
        teacher=teacher,
        gen_config=gen_config,
        prefilled=config.prefill_think,
        commit=shards.append,
    )
    for completion in backend.generate(assembler.requests(config, prefill)):
        assembler.add(completion)
    assembler.check_complete()
    return shards[0] if shards else assembler.table([], [])


def totals(writer) -> dict:
    """Counts over every committed shard of the directory (earlier runs included)."""
    out = {"rows": 0, "prompts": 0, "prompt_tokens": 0, "completion_tokens": 0, "truncated": 0, "errors": 0}
    ids: set[str] = set()
    for shard in writer.manifest["shards"]:
        t = pq.read_table(
            writer.dir / shard["file"], columns=["id", "finish_reason", "prompt_tokens", "completion_tokens"]
        )
        out["rows"] += t.num_rows
        ids.update(t.column("id").to_pylist())
        out["prompt_tokens"] += int(pc.sum(t.column("prompt_tokens")).as_py() or 0)
        out["completion_tokens"] += int(pc.sum(t.column("completion_tokens")).as_py() or 0)
        reasons = t.column("finish_reason")
        out["truncated"] += int(pc.sum(pc.equal(reasons, "length")).as_py() or 0)
        out["errors"] += int(pc.sum(pc.equal(reasons, "error")).as_py() or 0)
    out["prompts"] = len(ids)
    return out
