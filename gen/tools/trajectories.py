"""``distill generate --tools``: the generate stage's pieces that differ when rows are trajectories.

Everything else is the stage's own (gen/run.py): the same prompts, shards, manifest, resume
after SIGKILL and summary; rows are built from :class:`~reasonkit.gen.tools.loop.Trajectory`
records instead of completions, and validated as the ``trajectories`` table (schema.py).
"""

from __future__ import annotations

import pyarrow as pa

from reasonkit.errors import UserError
from reasonkit.gen.shards import Assembler
from reasonkit.schema import TOOL_MESSAGES


def tool_names(tools: str | None) -> list[str]:
    """
    >>> tool_names(" search, python ,"), tool_names(None)
    (['search', 'python'], [])
    """
    return [n.strip() for n in (tools or "").split(",") if n.strip()]


def check_tool_config(
    tools: str | None, corpus: str | None, *, engine: str, replicas: int, prefill_think: bool
) -> None:
    """The tool settings of generate (and eval, which generates) that can be judged without loading anything, every
    problem in one UserError. ``replicas``: the engines generating side by side (data parallel).

    >>> check_tool_config("search", None, engine="ray", replicas=1, prefill_think=False)
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: --tools search needs --corpus FILE (JSONL or Parquet with id and contents columns); --tools runs on the local engine; --engine ray generates single replies only
    """  # noqa: E501
    names = tool_names(tools)
    problems = []
    if tools is not None and not names:
        problems.append("--tools: no tool named; expected a comma-separated list such as search,python")
    if corpus is not None and "search" not in names:
        problems.append(f"--corpus {corpus}: only the search tool reads a corpus; add search to --tools")
    if "search" in names and not corpus:
        problems.append("--tools search needs --corpus FILE (JSONL or Parquet with id and contents columns)")
    if names and engine == "ray":
        problems.append("--tools runs on the local engine; --engine ray generates single replies only")
    if names and replicas > 1:
        problems.append("--tools runs one engine (its turns are fed as tools return); use --data-parallel 1")
    if names and prefill_think:
        problems.append("--prefill-think does not apply to --tools (every turn would reopen a think block)")
    if problems:
        raise UserError(*problems)


def load_run_tools(config):
    """The run's ToolBox; an unknown tool or a bad corpus fails here, before OUT is written."""
    from reasonkit.gen.tools.base import load_tools

    return load_tools(tool_names(config.tools), corpus=config.corpus, k=config.search_k, timeout=config.tool_timeout)


def tool_settings(config, toolbox) -> dict:
    """What the tools add to the run's fingerprint: their schemas (the model sees them), the corpus
    by content, the turn limit, the timeout and the passages per search (all change what rows say)."""
    from reasonkit.store import fingerprint, fingerprint_path

    return {
        "tools": tool_names(config.tools),
        "tool_schemas": fingerprint(toolbox.schemas()),
        "corpus": None if config.corpus is None else fingerprint_path(config.corpus),
        "max_turns": config.max_turns,
        "tool_timeout": config.tool_timeout,
        "search_k": config.search_k,
    }


class TrajectoryAssembler(Assembler):
    """The stage's Assembler (commit a shard when its last sample arrives) over trajectories."""

    tools: str | None = None  # the run's tool schemas as JSON text (gen/run.py sets it)

    def table(self, rows: list, take: list[int]) -> pa.Table:
        def ints(name: str) -> pa.Array:
            return pa.array([getattr(r, name) for r in rows], pa.int32())

        count = len(rows)
        columns = {
            "id": pa.array([r.id for r in rows], pa.string()),
            "sample": ints("sample"),
            "messages": pa.array([r.messages for r in rows], TOOL_MESSAGES),
            "response": pa.array([r.response for r in rows], pa.string()),
            "turns": ints("turns"),
            "tool_calls": ints("tool_calls"),
            "tool_errors": ints("tool_errors"),
            "finish_reason": pa.array([r.finish_reason for r in rows], pa.string()),
            "prompt_tokens": ints("prompt_tokens"),
            "completion_tokens": ints("completion_tokens"),
            "teacher": pa.array([self.teacher] * count, pa.string()),
            "gen_config": pa.array([self.gen_config] * count, pa.string()),
            "tools": pa.array([self.tools] * count, pa.string()),
        }
        return self.with_extras(columns, take)
