"""What every generation backend takes and gives: Requests in, Completions out.

A backend turns prompts (chat messages) into samples. It owns the model (an engine, a server
connection, a transformers model) and nothing else: sharding, resume and accounting belong to
the stage (gen/run.py), so a judge or an evaluator can hold the same backends.

Seeds are per prompt and derived from ``(seed, id)``, never from a prompt's position in the run,
so a run killed and resumed draws the same samples as one that never stopped.

>>> derive_seed(0, "abc") == derive_seed(0, "abc"), derive_seed(0, "abc") == derive_seed(1, "abc")
(True, False)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from reasonkit.gen.settings import Sampling

FINISH_REASONS = ("stop", "length", "error")


@dataclass(frozen=True)
class Request:
    """``n`` samples of one prompt.

    ``prefill`` is text the assistant turn starts with (``"<think>\\n"`` for R1's recommended
    prefill); it is part of the prompt, so it is not repeated in the completion's ``text``.
    """

    id: str
    messages: tuple[dict, ...] | list[dict]
    n: int = 1
    sampling: Sampling = field(default_factory=Sampling)
    prefill: str = ""
    #: JSON schemas of the tools the model may call (gen/tools/): the template renders them, a server gets ``tools=``
    tools: tuple[dict, ...] | list[dict] | None = None
    #: the teacher's top-K log-probs of every completion token (``distill generate --logprobs K``); None: none asked
    logprobs: int | None = None


@dataclass(frozen=True)
class Completion:
    """One sample. ``reasoning`` is set only by servers that split it off themselves
    (vLLM's reasoning parsers, DeepSeek's API): then ``text`` holds the response alone.
    ``prefilled``: whether the rendered prompt left a ``<think>`` block open (a template like R1's
    that ends with ``<think>\\n``, or ``--prefill-think``); None where the backend never sees the
    rendered prompt (a server applies its own template)."""

    id: str
    sample: int
    text: str
    finish_reason: str  # one of FINISH_REASONS
    prompt_tokens: int
    completion_tokens: int
    reasoning: str | None = None
    prefilled: bool | None = None
    #: the tool calls a server parsed out of the turn (gen/tools/calls.py ToolCall); None where the
    #: backend returns the raw text and the caller parses it
    tool_calls: tuple | list | None = None
    #: with ``Request.logprobs``: the sampled token ids (the stop token included, as generated), and per
    #: token the top-K ids, most likely first, with their log-probs (gen/logprobs.py); None when not asked
    token_ids: list[int] | None = None
    top_ids: list[list[int]] | None = None
    top_logprobs: list[list[float]] | None = None


@runtime_checkable
class Backend(Protocol):
    """Generates the samples of each request.

    ``generate`` consumes ``requests`` lazily (so a caller can stream a whole dataset through a
    bounded window) and yields Completions as they finish, in any order; every request yields
    exactly ``n`` of them, with ``sample`` in ``range(n)``. A source may yield None: nothing is
    ready yet, so the backend works on what it holds and asks again later (the multi-turn loop,
    gen/tools/loop.py, feeds turns this way while tools run). ``name`` is the teacher as recorded in
    the ``teacher`` column; ``describe()`` the settings recorded in the manifest.
    """

    name: str

    def generate(self, requests: Iterable[Request]) -> Iterator[Completion]: ...

    def describe(self) -> dict: ...

    def close(self) -> None: ...


def derive_seed(seed: int, id: str, sample: int = 0) -> int:
    """A 31-bit seed for prompt ``id`` (and ``sample``, for backends that draw samples one by one).

    vLLM seeds the k-th of ``n`` samples with ``seed + k``; 31 random bits keep those ranges of
    different prompts apart. 31 bits, not 64: some servers parse seeds into int32.
    """
    digest = hashlib.sha256(f"{seed}\x00{id}\x00{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1024)  # seed + k stays an int32


def error_completions(request: Request, prompt_tokens: int = 0) -> list[Completion]:
    """The ``n`` rows of a request the backend refused for good (a prompt longer than the model's
    context, a 400 from a server): kept as ``finish_reason="error"`` so one bad prompt neither
    stops a long run nor is silently lost, and filters drop it with its reason."""
    return [Completion(request.id, k, "", "error", prompt_tokens, 0) for k in range(request.n)]
