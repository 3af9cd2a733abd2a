"""Chat rendering: which messages a prompt sends, and the text a local model sees.

Two steps, kept apart because the OpenAI-compatible backend needs only the first (the server
applies its own template):

1. :func:`build_messages` -- the prompt's messages, with the user turn rebuilt as
   ``problem + "\\n\\n" + instruction`` when the prompt has a problem text, and an optional system
   prompt. These are the messages stored in the traces' ``messages`` column.
2. :func:`prompt_text` -- the model's chat template applied, with the generation prompt and an
   optional assistant prefill (R1 recommends starting the turn with ``<think>\\n`` so the model
   never skips its reasoning).

>>> build_messages([{"role": "user", "content": "What is 2 * 3?"}], problem="What is 2 * 3?",
...                instruction="Think.", system="Be brief.")
[{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'What is 2 * 3?\\n\\nThink.'}]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from reasonkit.errors import UserError

#: DeepSeek-R1's usage recommendation for math prompts.
R1_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
THINK_PREFILL = "<think>\n"


def build_messages(
    messages: Sequence[dict],
    *,
    problem: str | None = None,
    instruction: str | None = R1_INSTRUCTION,
    system: str | None = None,
) -> list[dict]:
    """The messages one prompt sends.

    With a ``problem`` text and an ``instruction``, the last user turn becomes
    ``f"{problem}\\n\\n{instruction}"`` (other turns are kept); prompts given as messages alone
    are sent as they are. A ``system`` prompt replaces the prompt's own system turn, or leads.

    A prompt never ends with an assistant turn (readers.read_prompts removes reference solutions):
    the teacher would be shown the answer, and the SFT row would hold two assistant turns.

    >>> build_messages([{"role": "user", "content": "hi"}], instruction="Think.")
    [{'role': 'user', 'content': 'hi'}]
    >>> build_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "42"}])
    Traceback (most recent call last):
    ...
    ValueError: a prompt ends with an assistant turn; read prompts with reasonkit.readers.read_prompts
    """
    out = [{"role": m["role"], "content": m["content"]} for m in messages]
    if out and out[-1]["role"] == "assistant":
        raise ValueError("a prompt ends with an assistant turn; read prompts with reasonkit.readers.read_prompts")
    if problem is not None and instruction:
        users = [i for i, m in enumerate(out) if m["role"] == "user"]
        turn = {"role": "user", "content": f"{problem}\n\n{instruction}"}
        if users:
            out[users[-1]] = turn
        else:
            out.append(turn)
    if system:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": system}
        else:
            out.insert(0, {"role": "system", "content": system})
    return out


def load_chat_template(path: str | os.PathLike | None) -> str | None:
    """The text of a Jinja chat-template override file (None: use the tokenizer's)."""
    if path is None:
        return None
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise UserError(f"--chat-template {path}: no such file") from None
    except OSError as e:
        raise UserError(f"--chat-template {path}: cannot read ({e.strerror})") from None
    if "{" not in text:
        raise UserError(f"--chat-template {path}: not a Jinja template (no {{ or {{% in it)")
    return text


def prompt_text(
    tokenizer,
    messages: Sequence[dict],
    *,
    chat_template: str | None = None,
    prefill: str = "",
    tools: Sequence[dict] | None = None,
) -> str:
    """The chat template applied with the generation prompt, then ``prefill``.

    A template that already opens the think block itself (R1's newer template, Qwen3's) is not
    given a second ``<think>``. ``tools``: JSON schemas the template shows the model; messages
    may then hold tool calls and tool turns in the stored shape (gen/tools/calls.py).
    """
    if chat_template is None and not getattr(tokenizer, "chat_template", None):
        raise UserError(
            f"{getattr(tokenizer, 'name_or_path', 'the teacher')}: tokenizer has no chat template; "
            "pass --chat-template FILE"
        )
    extra = {}
    if tools:
        from reasonkit.gen.tools.calls import template_messages

        messages, extra = template_messages(messages), {"tools": list(tools)}
    text = tokenizer.apply_chat_template(
        list(messages), chat_template=chat_template, tokenize=False, add_generation_prompt=True, **extra
    )
    if prefill and not text.rstrip().endswith(prefill.strip()):
        text += prefill
    return text


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of a rendered prompt. No special tokens are added: the template wrote them
    (a second BOS is what ``add_special_tokens=True`` would give a Llama-3 prompt)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
