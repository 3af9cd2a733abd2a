"""GRPO with tools: TRL's agent training, on the tools and the final answer ``distill generate --tools`` uses.

``distill train --method grpo --tools search,python --corpus FILE --max-turns N`` hands the shipped tools
(gen/tools/base.py's ``load_tools``: the same functions, schemas and BM25 index ``distill generate``
uses) to ``GRPOTrainer(tools=...)``, and TRL runs the loop: each completion is parsed with the chat
template's response parser (``add_response_schema``: TRL's Qwen2.5 template is one it knows), its tool
calls are executed, the results appended as ``tool`` messages and the policy samples again, for at
most ``max_turns - 1`` rounds of calls (TRL's ``max_tool_calling_iterations``; the calls of the
``max_turns``-th turn are not run, as ``distill generate --max-turns`` does not run them). The tokens
of the observations are part of the completion but masked out of the loss (TRL's ``tool_mask``): the
policy gradient pushes only on the tokens the policy wrote. Every turn is sampled through
:class:`~reasonkit.distill.rl.grpo.RolloutGRPOTrainer`'s ``_generate_single_turn``, so the tool turns are
sampled from the policy in eval mode, as the first turn is.

The tools go to TRL as the plain functions: a tool that fails raises, and TRL turns the exception into
the observation ``{'error': '...'}`` and counts it (``tools/failure_frequency``). The reward is the
filter's verdict on the final answer: the last assistant turn's text, read by
:func:`reasonkit.filters.trajectory.final_answer` and checked by its :class:`TextAwareVerifier`
(reward/functions.py, ``RewardSetup.trajectory``), so a reward and ``distill filter``'s ``correct`` on
the same trajectory never disagree.

Rollouts of a tool run are rows of the ``trajectories`` table (:func:`trajectory_row`): the whole
conversation in ``messages`` (the prompt, each assistant turn with its ``tool_calls``, each ``tool``
observation), ``response``, ``turns``, ``tool_calls``, ``tool_errors``, ``finish_reason``, plus the
rollout columns (``step``, ``reward``, ``reward_<name>``, ``advantage``): ``distill filter OUT/rollouts``
reads them as it reads ``distill generate --tools`` output.

>>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"type": "function",
...          "function": {"name": "search", "arguments": {"query": "Rode Luke"}}}]},
...         {"role": "tool", "name": "search", "content": "{'error': 'empty query'}"},
...         {"role": "assistant", "content": "The answer is \\\\boxed{1983}."}]
>>> counts(msgs)
(2, 1, 1)
>>> stored_turns(msgs)[0]["tool_calls"]
[{'name': 'search', 'arguments': '{"query": "Rode Luke"}'}]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from reasonkit.errors import UserError

#: How TRL words a failed call's observation (``str({"error": str(e)})`` in GRPOTrainer._tool_call_loop).
TRL_ERROR_PREFIX = "{'error': "


def tool_functions(cfg) -> list[Callable]:
    """The run's tools as plain functions (what ``GRPOTrainer(tools=...)`` takes); an unknown name or a bad
    corpus is one UserError. The search index is built once per corpus in a process (gen/tools/search.py)."""
    from reasonkit.gen.tools.base import load_tools

    return list(load_tools(cfg.tool_names, corpus=cfg.corpus, k=cfg.search_k, timeout=cfg.tool_timeout).tools.values())


def tool_schemas(cfg) -> list[dict]:
    """The JSON schemas the chat template shows the policy (the ``tools`` column of the rollouts)."""
    from transformers.utils import get_json_schema

    return [get_json_schema(f) for f in tool_functions(cfg)]


def check_tools(tok, cfg) -> None:
    """Everything TRL's tool loop needs, checked before OUT is written: the tools load (a corpus that is
    missing or malformed fails here), the chat template renders a tool-calling conversation, TRL can parse
    the policy's calls back (a response parser it knows for this template, or one the tokenizer carries),
    and a template that does not preserve prefixes has a training twin TRL can swap in."""
    from trl.chat_template_utils import (
        add_response_schema,
        get_training_chat_template,
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    tool_functions(cfg)
    where = cfg.chat_template or f"{cfg.student}'s chat template"
    if not supports_tool_calling(tok):
        raise UserError(
            f"--tools: {where} cannot render a tool call and its result (user -> assistant with tool_calls -> "
            "tool); use a tool-calling template, e.g. TRL's qwen2_5.jinja (--set chat_template=FILE.jinja)"
        )
    if getattr(tok, "response_template", None) is None and getattr(tok, "response_schema", None) is None:
        import copy

        try:
            add_response_schema(copy.copy(tok))  # a copy: GRPOTrainer sets it on the trainer's own tokenizer
        except ValueError:
            raise UserError(
                f"--tools: TRL has no parser for the tool calls of {where} (it knows Qwen2.5/3, Llama 3.1/3.2, "
                "GPT-OSS, GLM-4 MoE...); use one of those templates or save a tokenizer with a response_template"
            ) from None
    if not is_chat_template_prefix_preserving(tok):
        try:
            get_training_chat_template(tok)
        except ValueError:
            raise UserError(
                f"--tools: {where} renders earlier turns differently once a tool result follows, and TRL has "
                "no prefix-preserving twin of it; use a prefix-preserving tool-calling template"
            ) from None


def tool_calling_iterations(cfg) -> int:
    """TRL's ``max_tool_calling_iterations``: rounds of tool calls between ``max_turns`` assistant turns.

    >>> from types import SimpleNamespace
    >>> tool_calling_iterations(SimpleNamespace(max_turns=4))
    3
    """
    return cfg.max_turns - 1


def counts(completion: Sequence[dict]) -> tuple[int, int, int]:
    """``(turns, tool_calls, tool_errors)`` of a TRL multi-turn completion: assistant turns, calls that ran
    (one ``tool`` message each) and those whose observation is TRL's error."""
    tools = [m for m in completion if m.get("role") == "tool"]
    errors = sum(str(m.get("content") or "").startswith(TRL_ERROR_PREFIX) for m in tools)
    return sum(m.get("role") == "assistant" for m in completion), len(tools), errors


def stored_turns(messages: Sequence[dict]) -> list[dict]:
    """TRL's messages in the trajectories table's shape (gen/tools/calls.py): calls with JSON-text arguments."""
    from reasonkit.gen.tools.calls import assistant_message, call_from, stored_messages, tool_message

    out = []
    for m in messages:
        if m.get("role") == "assistant":
            calls = [
                call_from(c["function"]["name"], c["function"].get("arguments"))
                if "function" in c
                else call_from(c.get("name", ""), c.get("arguments"))
                for c in m.get("tool_calls") or []
            ]
            out.append(assistant_message(_text(m.get("content")), calls))
        elif m.get("role") == "tool":
            out.append(tool_message(m.get("name") or "", _text(m.get("content"))))
        else:
            out.extend(stored_messages([{**m, "content": _text(m.get("content"))}]))
    return out


def _text(content) -> str:
    if isinstance(content, list):  # content blocks
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def trajectory_rows(inputs, completions, prompt_ids, completion_ids, tool_mask, stops: set, tools) -> list[dict]:
    """:func:`trajectory_row` of each completion of one generation (RolloutGRPOTrainer._record)."""
    from transformers.utils import get_json_schema

    schemas = [get_json_schema(t) for t in tools]
    return [
        trajectory_row(x, c, p, ids, m, stops, schemas)
        for x, c, p, ids, m in zip(inputs, completions, prompt_ids, completion_ids, tool_mask, strict=True)
    ]


def trajectory_row(
    example: dict, completion: list[dict], prompt_ids, completion_ids, tool_mask, stops: set, schemas: list[dict]
) -> dict:
    """A tool run's rollout before its rewards: a ``trajectories`` row (the final answer's ``response`` is
    filled in by the trainer, read as the rewards read it).

    ``finish_reason``: ``length`` when the completion was cut at the token limit, ``max_turns`` when its
    last turn still called tools (TRL ran out of rounds), else ``stop``; ``completion_tokens`` counts
    the policy's tokens only (``tool_mask`` 1), as generate sums its turns.

    >>> call = {"type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}
    >>> row = trajectory_row({"id": "q", "prompt": [{"role": "user", "content": "?"}]},
    ...                      [{"role": "assistant", "content": "", "tool_calls": [call]}], [1, 2], [5, 9], [1, 1], {9}, [])
    >>> row["finish_reason"], row["turns"], row["tool_calls"], [m["role"] for m in row["messages"]]
    ('max_turns', 1, 0, ['user', 'assistant'])
    """  # noqa: E501
    from reasonkit.reward.completions import completion_text

    turns, calls, errors = counts(completion)
    last = next((m for m in reversed(completion) if m.get("role") == "assistant"), {})
    if not completion_ids or completion_ids[-1] not in stops:
        finish = "length"
    elif last.get("tool_calls"):
        finish = "max_turns"
    else:
        finish = "stop"
    return {
        "id": example["id"],
        "messages": stored_turns([*example["prompt"], *completion]),
        "completion": completion_text(completion),
        "turns": turns,
        "tool_calls": calls,
        "tool_errors": errors,
        "finish_reason": finish,
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": int(sum(tool_mask)) if tool_mask is not None else len(completion_ids),
        "answer": example.get("answer"),
        "source": example.get("source"),
        "tools": json.dumps(schemas),
    }
