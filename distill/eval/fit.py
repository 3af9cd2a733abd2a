"""Before an evaluation generates: does every problem's first prompt fit the model's context?

A prompt as long as ``max_model_len`` leaves no room for one token: the backend refuses it and the
problem would be scored as a sample with no answer, lowering pass@1 for a reason that is not the
model's. So ``distill eval`` renders every problem's first prompt as the backend will (the chat
template, the instruction, the tool schemas a tool-use eval shows the model), counts its tokens, and
refuses to start when one does not fit, naming the problems, unless ``--allow-overflow`` (then they
are counted as ``context_overflow`` in summary.json, apart from ``no_answer``). Later turns of a
tool-use trajectory can only be known while generating: gen/tools/loop.py ends such a trajectory
with finish reason ``context``, and they are counted the same way.

A server (``--backend openai``) renders with its own tokenizer: not checked here; its refusals are
errors the server reports.
"""

from __future__ import annotations

from reasonkit.errors import UserError

#: Problem ids named in the refusal (the rest are counted).
SHOWN = 5


def first_prompt_lengths(config, prompts, toolbox=None) -> dict[str, int]:
    """Tokens of every problem's first prompt, rendered as the generate stage renders it."""
    from transformers import AutoTokenizer

    from reasonkit.gen.render import THINK_PREFILL, build_messages, encode, prompt_text

    tokenizer = AutoTokenizer.from_pretrained(config.model)
    tools = toolbox.schemas() if toolbox is not None else None
    prefill = THINK_PREFILL if config.prefill_think else ""
    problems = (
        prompts.column("problem").to_pylist() if "problem" in prompts.column_names else [None] * prompts.num_rows
    )
    lengths = {}
    for pid, messages, problem in zip(
        prompts.column("id").to_pylist(), prompts.column("messages").to_pylist(), problems
    ):
        messages = build_messages(messages, problem=problem, instruction=config.instruction, system=config.system)
        lengths[pid] = len(encode(tokenizer, prompt_text(tokenizer, messages, prefill=prefill, tools=tools)))
    return lengths


def context_length(config) -> int | None:
    """The ``max_model_len`` the samples will be made in: the flag's, else the model's own."""
    if config.max_model_len is not None:
        return config.max_model_len
    from reasonkit.gen.preflight import model_length

    return model_length(config.model)[0]


def check_fit(config, prompts, toolbox=None) -> int | None:
    """The context length, after refusing (exit 2) an evaluation whose problems' first prompts do
    not all fit it, unless ``config.allow_overflow``; None where it is not known here (a server)."""
    if config.backend == "openai":
        return None
    limit = context_length(config)
    if not limit:
        return None
    lengths = first_prompt_lengths(config, prompts, toolbox)
    over = {pid: n for pid, n in lengths.items() if n >= limit}
    if over and not config.allow_overflow:
        shown = ", ".join(f"{pid} ({n} tokens)" for pid, n in list(over.items())[:SHOWN])
        more = f" and {len(over) - SHOWN} more" if len(over) > SHOWN else ""
        raise UserError(
            f"{config.data}: the first prompt of {len(over)} of {len(lengths)} problems does not fit max_model_len "
            f"{limit} tokens: {shown}{more}. Raise --max-model-len, shorten the prompts (or the tool prompt), or pass "
            "--allow-overflow to evaluate anyway and count them as context_overflow"
        )
    return limit
