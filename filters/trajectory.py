r"""Tool-use trajectories through the filter: the final answer verified, the trajectory itself checked.

A ``trajectories`` table (``distill generate --tools``; schema.py) is told from a traces table by its
columns (:func:`is_trajectories`). Its rows go through the same stage as traces, with three changes:

- **Trajectory checks first** (:class:`TrajectoryFilter`, reasons in this order): ``max_turns``
  (the turn limit stopped it: the model was still calling tools), ``tool_error_unrecovered`` (a tool
  whose last result was an error: no later call of it succeeded), and with ``require_tool``
  ``no_tool_call`` (an answer given without calling any tool, on a task that needs one).
- **The final answer** is the last turn's ``response``: a ``\boxed{}`` or "the answer is" answer
  as for traces, else the response itself when it is one short line (an agent often answers
  "1987." and nothing else), verified by the same :class:`~reasonkit.filters.math.verify.Verifier`;
  a gold answer that is plain words (a name, a title) is matched as text, never by math-verify
  (:class:`TextAwareVerifier`; ``--verifier exact`` matches every answer as text).
- **Text filters** (format, dedup) read the model's own text across the trajectory (:func:`model_text`:
  its turns and calls, never the tools' observations) as a trace's completion; the language filter
  reads its prose only (:func:`prose`: a call's arguments are names copied from elsewhere).

Kept rows go to ``OUT/sft`` whole (:func:`sft_rows`): the conversation with its tool turns and the
tool schemas the model was shown, which ``distill train --method sft`` trains on with loss on the
assistant turns only (distill/data.py).

>>> user = {"role": "user", "content": "What year did the author of Glass win the Orb?"}
>>> call = {"role": "assistant", "content": "", "tool_calls": [{"name": "search", "arguments": '{"query": "Glass"}'}]}
>>> failed = {"role": "tool", "name": "search", "content": "error: search timed out"}
>>> found = {"role": "tool", "name": "search", "content": "Glass is by Ada Vell."}
>>> trajectory_reason([user, call, failed, {"role": "assistant", "content": "1987"}], "stop", 1, 1)
'tool_error_unrecovered'
>>> trajectory_reason([user, call, failed, call, found, {"role": "assistant", "content": "1987"}], "stop", 2, 1)
>>> trajectory_reason([user, {"role": "assistant", "content": "1987"}], "stop", 0, 0, require_tool=True)
'no_tool_call'
>>> final_answer("1987."), final_answer(r"So it is \boxed{1987}."), final_answer("I could not\nfind it")
(('1987', None), ('1987', None), (None, 'no_answer'))
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pyarrow as pa

from reasonkit.filters.base import RowFilter
from reasonkit.filters.language import LanguageFilter
from reasonkit.filters.math.extract import extract_answer
from reasonkit.filters.math.verify import VerifyFilter, same_text

#: The columns that, beside ``messages`` and ``finish_reason``, make a table a trajectories table.
COLUMNS = ("turns", "tool_calls", "tool_errors")
#: ``finish_reason`` of a trajectory the turn limit stopped (gen/tools/loop.py).
TURN_LIMIT = "max_turns"
REASONS = ("max_turns", "tool_error_unrecovered", "no_tool_call")
#: Longest response taken whole as a plain final answer; a longer one must box or state its answer.
MAX_PLAIN = 200
#: Columns the trace filters read, derived for a trajectories batch and dropped before it is written.
TEXT_COLUMNS = ("completion", "reasoning")
# How the tool loop words observations that say the call reached no tool (gen/tools/base.py, loop.py):
# any later successful call recovers from those, whichever tool it calls.
_NO_TOOL = ("error: unknown tool", "error: bad tool call")
_WORDS = re.compile(r"[^\W\d_]+(?:[\s'.,&-]+[^\W\d_]+)*\.?")


def is_trajectories(names: Iterable[str]) -> bool:
    """Whether a table with these column names is a trajectories table.

    >>> is_trajectories(["id", "messages", "turns", "tool_calls", "tool_errors"]), is_trajectories(["id", "completion"])
    (True, False)
    """  # noqa: E501
    names = set(names)
    return all(c in names for c in COLUMNS)


def is_error(content: str | None) -> bool:
    """Whether a tool observation is an error: our tool loop starts every error observation with
    ``error:``; TRL's GRPO tool loop (GRPO rollouts with tools) writes ``str({"error": ...})``.

    >>> is_error("error: search failed"), is_error("{'error': 'timed out'}"), is_error("[a] 1987")
    (True, True, False)
    """
    text = (content or "").lstrip()
    return text.startswith("error:") or text.startswith("{'error': ")


def unrecovered_error(messages: Sequence[dict]) -> str | None:
    """The first tool (by its first failure) whose last result was an error, or None.

    A failed call is recovered when a later call of the same tool succeeds; a call that reached no
    tool (an unknown name, a call that did not parse) by any later successful call.

    >>> t = lambda name, text: {"role": "tool", "name": name, "content": text}
    >>> unrecovered_error([t("search", "error: timed out"), t("python", "42")])
    'search'
    >>> unrecovered_error([t("serch", "error: unknown tool 'serch' (tools: search)"), t("search", "Ada Vell")])
    """
    failed: dict[str, bool] = {}  # tool -> reached no tool; insertion order is the order of first failure
    for m in messages:
        if m.get("role") != "tool":
            continue
        name, content = m.get("name") or "", m.get("content") or ""
        if is_error(content):
            failed.setdefault(name, not name or content.lstrip().startswith(_NO_TOOL))
            continue
        failed.pop(name, None)
        failed = {n: no_tool for n, no_tool in failed.items() if not no_tool}
    return next(iter(failed), None)


def trajectory_reason(
    messages: Sequence[dict], finish_reason: str, tool_calls: int, tool_errors: int, *, require_tool: bool = False
) -> str | None:
    """The first trajectory check one row fails (:data:`REASONS` order), or None.

    Errors are looked for only where the loop counted some (``tool_errors``): a program whose
    output happens to start with "error:" is not a failed call.
    """
    if finish_reason == TURN_LIMIT:
        return "max_turns"
    if tool_errors and unrecovered_error(messages) is not None:
        return "tool_error_unrecovered"
    if require_tool and not tool_calls:
        return "no_tool_call"
    return None


class TrajectoryFilter(RowFilter):
    """:func:`trajectory_reason` over a batch of trajectories."""

    name = "trajectory"

    def __init__(self, require_tool: bool = False):
        self.require_tool = require_tool
        self.reasons = REASONS if require_tool else REASONS[:-1]

    def judge(self, batch: pa.Table, rows: list[int]):
        cols = [batch.column(c).to_pylist() for c in ("messages", "finish_reason", "tool_calls", "tool_errors")]
        return [trajectory_reason(*(c[i] for c in cols), require_tool=self.require_tool) for i in rows]


def final_answer(response: str | None) -> tuple[str | None, str | None]:
    """``(answer, None)`` or ``(None, reason)``: :func:`~reasonkit.filters.math.extract.extract_answer`'s
    answer, else the whole response when it is one short line (outer ``$`` and a final period aside)."""
    answer, why = extract_answer(response)
    if answer is not None or why != "no_answer":
        return answer, why
    text = (response or "").strip().rstrip(".").strip().strip("$").strip()
    if text and "\n" not in text and len(text) <= MAX_PLAIN:
        return text, None
    return None, why


def is_words(gold: str) -> bool:
    """Whether a gold answer is plain words (a name, a title), which math-verify would read as a product
    of symbols ("Vell Ada" equal to "Ada Vell"): letters, spaces and name punctuation only, with a word
    of three letters or more (so "x", "xy" or "pi" stay math).

    >>> is_words("Ada Vell"), is_words("The Glass Orchard."), is_words("O'Neil-Smith"), is_words("pi"), is_words("x+y"), is_words("1987")
    (True, True, True, False, False, False)
    """  # noqa: E501
    return bool(_WORDS.fullmatch(gold.strip())) and any(len(w) >= 3 for w in re.findall(r"[^\W\d_]+", gold))


class TextAwareVerifier:
    """The math verifier with exact text matching for golds that are plain words (:func:`is_words`);
    every other pair (numbers, LaTeX) goes to the wrapped :class:`~reasonkit.filters.math.verify.Verifier`."""

    def __init__(self, inner):
        self.inner, self.kind = inner, inner.kind

    def check(self, pairs: Sequence[tuple[str | None, str | None]]) -> list[tuple[bool | None, str | None]]:
        if self.kind != "math":
            return self.inner.check(pairs)
        words = [p is not None and g is not None and is_words(g) for p, g in pairs]
        rest = iter(self.inner.check([pair for pair, w in zip(pairs, words) if not w]))
        return [(same_text(*pair), None) if w else next(rest) for pair, w in zip(pairs, words)]

    def close(self) -> None:
        self.inner.close()


class TrajectoryVerifyFilter(VerifyFilter):
    """The verify filter on a trajectory's final answer (:func:`final_answer`); golds that are words
    are matched as text under the math verifier (:class:`TextAwareVerifier`)."""

    def __init__(self, verifier: str = "math", **options):
        super().__init__(verifier, extract=final_answer, **options)
        self.verifier = TextAwareVerifier(self.verifier)


def model_text(messages: Sequence[dict]) -> str:
    """What the model wrote after the prompt: each assistant turn's text and calls, one per line;
    never the tools' observations (they are not the model's, and would dominate the text).

    >>> model_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "Let me look.",
    ...             "tool_calls": [{"name": "search", "arguments": '{"query": "Glass"}'}]},
    ...             {"role": "tool", "name": "search", "content": "..."}, {"role": "assistant", "content": "1987"}])
    'Let me look.\\nsearch {"query": "Glass"}\\n1987'
    """
    lines = []
    for m in messages:
        if m.get("role") != "assistant":
            continue
        if m.get("content"):
            lines.append(m["content"])
        lines += [f"{c['name']} {c['arguments']}" for c in m.get("tool_calls") or []]
    return "\n".join(lines)


def prose(messages: Sequence[dict]) -> str:
    """The model's own words: its turns' text without the calls, whose arguments are names and queries
    copied from the question and the observations (fictional names in no language, on the agent task).

    >>> prose([{"role": "assistant", "content": "", "tool_calls": [{"name": "search", "arguments": '{"query": "Gemi Fozu"}'}]},
    ...        {"role": "assistant", "content": "The answer is 1901."}])
    'The answer is 1901.'
    """  # noqa: E501
    return "\n".join(m["content"] for m in messages if m.get("role") == "assistant" and m.get("content"))


class TrajectoryLanguageFilter(LanguageFilter):
    """The language filter on :func:`prose`: a call's arguments would make a trajectory that answers in
    plain English look foreign."""

    def texts(self, batch: pa.Table, rows: list[int]) -> list[str]:
        messages = batch.column("messages").to_pylist()
        return [prose(messages[i] or []) for i in rows]


def with_model_text(batch: pa.Table) -> pa.Table:
    """A trajectories batch as the trace filters read it: ``completion`` the model's text, no ``reasoning``."""
    text = pa.array([model_text(m or []) for m in batch.column("messages").to_pylist()], pa.string())
    batch = batch.drop_columns([c for c in TEXT_COLUMNS if c in batch.column_names])
    return batch.append_column("completion", text).append_column("reasoning", pa.nulls(batch.num_rows, pa.string()))


def sft_rows(kept: pa.Table) -> pa.Table:
    """The ``sft_tools`` table of kept trajectories: each whole conversation, its tool turns included,
    and the tool schemas it was generated with (TRL's ``tools`` column, JSON text, when the
    trajectories carry one; the training lint flags conversations without)."""
    from reasonkit.schema import TOOL_MESSAGES

    tools = (
        kept.column("tools").cast(pa.string())
        if "tools" in kept.column_names
        else pa.nulls(kept.num_rows, pa.string())
    )
    return pa.table(
        {
            "id": kept.column("id"),
            "messages": kept.column("messages").cast(TOOL_MESSAGES),
            "tools": tools,
            "source": kept.column("source"),
            "sample": kept.column("sample"),
        }
    )


def summary(
    turns: Sequence[int], tool_calls: Sequence[int], tool_errors: Sequence[int], finish_reasons: Sequence[str]
) -> dict:
    """How a set of trajectories went: tool calls and turns per trajectory, the share of calls that
    failed, how they ended.

    >>> summary([2, 3], [1, 2], [0, 1], ["stop", "max_turns"])
    {'rows': 2, 'turns_per_trajectory': 2.5, 'tool_calls_per_trajectory': 1.5, 'tool_error_rate': 0.3333, 'finish_reason': {'max_turns': 1, 'stop': 1}}
    """  # noqa: E501
    from collections import Counter

    n, calls = len(turns), sum(tool_calls)
    return {
        "rows": n,
        "turns_per_trajectory": round(sum(turns) / n, 4) if n else None,
        "tool_calls_per_trajectory": round(calls / n, 4) if n else None,
        "tool_error_rate": round(sum(tool_errors) / calls, 4) if calls else None,
        "finish_reason": dict(sorted(Counter(finish_reasons).items())),
    }


def report(work: Sequence, decisions: Sequence[str | None]) -> dict:
    """The filter report's ``trajectories`` section: :func:`summary` of the input and of the kept rows,
    from the work shards' small columns (``decisions``: pass 2's drops, one per work row)."""
    import pyarrow.parquet as pq

    names = ["keep", "turns", "tool_calls", "tool_errors", "finish_reason"]
    cols = {n: [v for path in work for v in pq.read_table(path, columns=[n]).column(n).to_pylist()] for n in names}
    kept = [k and d is None for k, d in zip(cols["keep"], decisions)]

    def of(rows: list[bool]) -> dict:
        return summary(*([v for v, r in zip(cols[n], rows) if r] for n in names[1:]))

    return {"trajectories": {"in": of([True] * len(kept)), "kept": of(kept)}}
