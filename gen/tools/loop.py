"""Multi-turn rollouts: generate a turn, run its tool calls, append the observations, repeat.

Every trajectory of a run is in flight at once (up to ``window``), and two kinds of work overlap:
the backend generates the next turn of every trajectory that has one ready (vLLM batches them all
in its engine, a server takes them concurrently, transformers batches what is ready), while a
thread pool runs the tool calls of the trajectories that just stopped to call one. A plain loop
(generate, parse, execute, append, one trajectory at a time) leaves the model idle during every
tool call and runs one sequence at a time; bench/agent.py measures the difference.

The backend is fed through its ordinary ``generate(requests)``: the request source below yields
the next ready turn, or None when no turn is ready but the backend still holds some (it then
works on those and asks again; gen/backend.py), and blocks only when every live trajectory is
waiting on a tool.

A trajectory ends with ``finish_reason``:

- ``stop``: a turn without tool calls, the final answer (``response``);
- ``length``: a turn ran out of ``max_tokens`` (its calls, maybe cut off, are not run);
- ``max_turns``: the model still called tools in its last allowed turn (they are not run);
- ``context``: a turn could not fit the model's context (``max_model_len``): its prompt, the whole
  conversation so far, left no room to generate (the backend refused it), or the context, not
  ``max_tokens``, cut the turn off. The trajectory ends there; eval counts it as context overflow,
  apart from answers that are missing or wrong;
- ``error``: the backend refused a turn for another reason (a server's 400).

Each turn of sample ``k`` of prompt ``id`` is seeded from ``(seed, id, k, turn)``, so a resumed run
draws the same trajectories as one that never stopped (on a seeded backend with deterministic tools).

>>> from reasonkit.gen.backend import Completion, Request
>>> from reasonkit.gen.tools.base import ToolBox
>>> def echo(text: str) -> str:
...     '''Repeat the text.
...
...     Args:
...         text: what to repeat.
...     '''
...     return text.upper()
>>> class Scripted:  # answers with a call first, then with the observation it read back
...     def generate(self, requests):
...         for r in filter(None, requests):
...             last = r.messages[-1]
...             text = (f"done: {last['content']}" if last["role"] == "tool"
...                     else '<tool_call>\\n{"name": "echo", "arguments": {"text": "hi"}}\\n</tool_call>')
...             yield Completion(r.id, 0, text, "stop", 10, 5)
>>> [t] = rollouts(Scripted(), [Request("q1", [{"role": "user", "content": "?"}])], ToolBox([echo]), max_turns=4)
>>> t.response, t.turns, t.tool_calls, t.tool_errors, t.finish_reason, t.completion_tokens
('done: HI', 2, 1, 0, 'stop', 10)
>>> [m["role"] for m in t.messages]
['user', 'assistant', 'tool', 'assistant']
"""

from __future__ import annotations

import dataclasses
import queue
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from reasonkit.gen.backend import Completion, Request, derive_seed
from reasonkit.gen.tools.base import Observation, ToolBox
from reasonkit.gen.tools.calls import ToolCall, assistant_message, parse_turn, stored_messages, tool_message

FINISH_REASONS = ("stop", "length", "max_turns", "context", "error")


@dataclass
class Trajectory:
    """One finished rollout: a ``trajectories`` row without the stage's columns. Token counts are
    summed over the turns (each turn's prompt is the whole conversation so far: what the run cost)."""

    id: str
    sample: int
    messages: list[dict]
    response: str = ""
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class _Live:
    """A trajectory in flight, with what its next turn is sampled with."""

    trajectory: Trajectory
    request: Request
    key: str  # unique within the run: the id its turns carry through the backend
    calls: list[ToolCall] = field(default_factory=list)  # the calls of the turn now running

    def next_turn(self, tools: list[dict]) -> Request:
        t, base = self.trajectory, self.request.sampling
        seed = None if base.seed is None else derive_seed(base.seed, f"turn {t.turns}", t.sample)
        sampling = dataclasses.replace(base, seed=seed)
        return Request(self.key, list(t.messages), 1, sampling, self.request.prefill, tools)


def run_calls(toolbox: ToolBox, calls: list[ToolCall]) -> list[Observation]:
    """The observations of one turn's calls, in order; a call that did not parse is answered as the
    bad arguments it is, and nothing a tool does escapes as an exception."""
    out = []
    for call in calls:
        if call.error is not None:
            out.append(Observation(f"error: bad tool call: {call.error}", "bad_arguments"))
            continue
        try:
            out.append(toolbox.call(call.name, call.arguments))
        except Exception as e:  # ToolBox.call already catches a tool's failures; this is the last guard
            out.append(Observation(f"error: {call.name} failed: {type(e).__name__}: {e}", "tool_error"))
    return out


def turn_of(completion: Completion) -> tuple[str, list[ToolCall]]:
    """A generated turn's content and calls: the server's parsed calls when it sent them, else
    parsed from the text (vLLM offline, transformers, or a server started without a tool parser)."""
    if completion.tool_calls:
        return completion.text.strip(), list(completion.tool_calls)
    turn = parse_turn(completion.text)
    return turn.content, turn.calls


def out_of_context(completion: Completion, max_model_len: int | None) -> bool:
    """Whether the context, not the model or ``max_tokens``, ended this turn: a prompt the backend
    refused because it leaves no room, or a turn cut off where prompt and turn fill the context.

    >>> out_of_context(Completion("a", 0, "", "error", 1030, 0), 1024), out_of_context(Completion("a", 0, "x", "length", 1000, 24), 1024)
    (True, True)
    >>> out_of_context(Completion("a", 0, "x", "length", 500, 64), 1024), out_of_context(Completion("a", 0, "", "error", 1030, 0), None)
    (False, False)
    """  # noqa: E501
    if not max_model_len:
        return False
    if completion.finish_reason == "error":
        return completion.prompt_tokens >= max_model_len
    return (
        completion.finish_reason == "length"
        and completion.prompt_tokens + completion.completion_tokens >= max_model_len
    )


# long: the multi-turn loop: every trajectory's turns interleaved in one scheduler whose state is shared
def rollouts(
    backend,
    requests: Iterable[Request],
    toolbox: ToolBox,
    *,
    max_turns: int,
    workers: int = 8,
    window: int = 1024,
    max_model_len: int | None = None,
) -> Iterator[Trajectory]:
    """Every trajectory of ``requests`` (``n`` per request), yielded as each finishes, in any order.

    ``max_model_len``: the context a turn must fit (default: the backend's own, where it has one;
    a server's is unknown, and its refusals stay ``error``).

    ``workers`` threads run tool calls; at most ``window`` trajectories are alive at once, give or
    take the samples of one prompt, which start together (new prompts start as others finish, in
    request order, and turns of older trajectories go first, so the stage's shards complete in order).
    """
    if max_turns < 1:
        raise ValueError(f"max_turns {max_turns}: expected at least 1")
    tools = toolbox.schemas()
    if max_model_len is None:
        max_model_len = getattr(backend, "max_model_len", None)
    source = iter(requests)
    live: dict[str, _Live] = {}
    fresh: deque[_Live] = deque()  # started, first turn not yet handed to the backend
    ready: queue.SimpleQueue = queue.SimpleQueue()  # (live, future of its observations), from pool threads
    count = {"generating": 0, "keys": 0}
    exhausted = False

    def start_more() -> None:
        nonlocal exhausted
        while not exhausted and len(live) < window:
            request = next(source, None)
            if request is None:
                exhausted = True
                return
            for k in range(request.n):
                key = f"{count['keys']}"
                count["keys"] += 1
                state = _Live(Trajectory(request.id, k, stored_messages(request.messages)), request, key)
                live[key] = state
                fresh.append(state)

    def resume(state: _Live, observations: Future) -> Request:
        t = state.trajectory
        for call, obs in zip(state.calls, observations.result()):
            t.messages.append(tool_message(call.name, obs.content))
            t.tool_errors += obs.error is not None
        return hand_out(state)

    def hand_out(state: _Live) -> Request:
        count["generating"] += 1
        return state.next_turn(tools)

    def turns() -> Iterator[Request | None]:
        while True:
            try:  # older trajectories first: their shard commits sooner
                yield resume(*ready.get_nowait())
                continue
            except queue.Empty:
                pass
            start_more()
            if fresh:
                yield hand_out(fresh.popleft())
                continue
            if not live and exhausted:
                return
            if count["generating"]:
                yield None  # the backend holds turns: let it work, ask again after
            else:
                yield resume(*ready.get())  # every live trajectory waits on a tool

    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="reasonkit-tool")
    try:
        for completion in backend.generate(turns()):
            state = live.get(completion.id)
            if state is None:
                raise RuntimeError(f"backend returned a turn for unknown request {completion.id!r}")
            count["generating"] -= 1
            t = state.trajectory
            t.turns += 1
            t.prompt_tokens += completion.prompt_tokens
            t.completion_tokens += completion.completion_tokens
            if out_of_context(completion, max_model_len):
                yield finish(live, state, "context")
                continue
            if completion.finish_reason == "error":
                yield finish(live, state, "error")
                continue
            content, calls = turn_of(completion)
            t.messages.append(assistant_message(content, calls))
            if completion.finish_reason == "length":
                yield finish(live, state, "length", content)
            elif not calls:
                yield finish(live, state, "stop", content)
            elif t.turns >= max_turns:
                yield finish(live, state, "max_turns")
            else:
                t.tool_calls += len(calls)
                state.calls = calls
                future = pool.submit(run_calls, toolbox, calls)
                future.add_done_callback(lambda f, s=state: ready.put((s, f)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def finish(live: dict, state: _Live, reason: str, response: str = "") -> Trajectory:
    del live[state.key]
    state.trajectory.finish_reason = reason
    state.trajectory.response = response
    return state.trajectory
