"""The pre-training lint for GRPO (and on-policy distillation): what would make a run sample, score and learn
nothing, caught before it starts.

GRPO trains on the student's own samples, so the checks are about sampling, not about a dataset's
assistant turns:

- ``eos_stop``: the chat template must end an assistant turn with a token generation stops at, or a
  completion can never end on its own: every sample runs to ``max_completion_length`` and is cut
  (the student's ``eos_turn_end`` finding names the template's end-of-turn token when it knows it);
- ``context``: the longest prompt plus ``max_completion_length`` must fit the student's positions;
- ``prompt_length``: prompts longer than ``max_prompt_length`` (when given: it sizes vLLM's context);
- ``group``: ``num_generations`` must divide the generation batch on this many processes, and the
  table must hold the prompts of one generation batch (TRL's sampler drops an incomplete batch, so a
  smaller table would train zero steps);
- ``no_gold``: prompts without an answer, when the accuracy reward is asked for (it cannot score them);
- the student's ``eos_turn_end`` and the ``memory`` estimate, as for SFT.

On-policy distillation (``--method distill``) samples one completion a prompt and has no rewards: its group is 1
and the reward checks (``format_reward``, ``no_gold``) do not apply.

With ``--tools`` the prompts are measured as TRL renders them, the tools' schemas in the preamble; whether
the template can call tools at all (TRL's ``supports_tool_calling``, a response parser, prefix preservation)
is no finding ``lint=warn`` could train past: distill/rl/tools.py's ``check_tools`` refuses it first.

>>> from types import SimpleNamespace
>>> cfg = SimpleNamespace(num_generations=8, batch_size=4, grad_accum=1, steps_per_generation=None)
>>> group_finding(cfg, world_size=1, prompts=100).message
'num_generations 8 must divide the generation batch (batch_size 4 x 1 processes x steps_per_generation 1 = 4 completions); choose a batch_size (or grad_accum) that is a multiple of 8'
>>> group_finding(SimpleNamespace(num_generations=4, batch_size=16, grad_accum=1, steps_per_generation=None), world_size=1, prompts=3).check
'group'
"""  # noqa: E501

from __future__ import annotations

import pyarrow as pa

from reasonkit.distill.lint.base import Finding, chat_ids, sample_rows, stop_at_end


def lint_prompts(
    tok, table: pa.Table, cfg, *, stops: set[int], max_positions: int | None, world_size: int = 1
) -> tuple[list[Finding], dict]:
    """All findings on ``table`` (data.read_prompt_rows: id, prompt, answer) and the prompt-length statistics."""
    from reasonkit.distill.lint.memory import memory_finding
    from reasonkit.distill.lint.student import student_findings

    findings = student_findings(tok, cfg, max_length=0, max_positions=None, stops=stops)  # context: checked below
    rows = list(sample_rows(table, cfg.lint_rows))
    lengths = prompt_lengths(tok, table.column("prompt").to_pylist(), _tools(cfg))
    stats = _prompt_stats(lengths, cfg.max_completion_length)
    longest = stats["prompt_longest"]
    if rows and "eos_turn_end" not in {f.check for f in findings}:
        stop = _turn_stop(tok, rows[0][1]["prompt"], stops)
        if stop is not None:
            findings.append(stop)
    findings += _length_findings(table, cfg, lengths, longest, max_positions)
    teacher = teacher_context_finding(cfg, longest)
    findings += [teacher] if teacher else []
    rewards = cfg.rewards if cfg.method == "grpo" else {}  # distill: the teacher is the target, not a reward
    if rows and "format" in rewards and not trained_by_reasonkit(cfg.student):
        text = tok.apply_chat_template(rows[0][1]["prompt"], tokenize=False, add_generation_prompt=True)
        unmet = format_unmet(text, knows_think="<think>" in tok.get_vocab())
        if unmet:
            findings.append(Finding("format_reward", unmet))
    group = group_finding(cfg, world_size=world_size, prompts=table.num_rows) if cfg.method == "grpo" else None
    group = group or batch_finding(cfg, world_size=world_size, prompts=table.num_rows)
    findings += [group] if group else []
    gold = _gold_finding(rows) if "accuracy" in rewards else None
    findings += [gold] if gold else []
    memory = memory_finding(
        cfg, max_length=longest + cfg.max_completion_length, longest=longest + cfg.max_completion_length
    )
    findings += [memory] if memory else []
    return findings, stats


def _tools(cfg) -> list | None:
    """GRPO's tool functions, whose schemas the chat template renders into every prompt (None without tools)."""
    if not getattr(cfg, "tools", None):
        return None
    from reasonkit.distill.rl.tools import tool_functions

    return tool_functions(cfg)


def _prompt_stats(lengths: list[int], max_completion_length: int) -> dict:
    """The prompt-length statistics lint.json records.

    >>> _prompt_stats([5, 1, 9], 16)
    {'prompts': 3, 'prompt_median': 5, 'prompt_p95': 9, 'prompt_longest': 9, 'max_completion_length': 16}
    """
    ordered = sorted(lengths) or [0]
    return {
        "prompts": len(lengths),
        "prompt_median": ordered[len(ordered) // 2],
        "prompt_p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "prompt_longest": ordered[-1],
        "max_completion_length": max_completion_length,
    }


def _length_findings(table: pa.Table, cfg, lengths: list[int], longest: int, max_positions: int | None) -> list:
    """Prompts over max_prompt_length, and the longest prompt plus a completion past the student's context."""
    findings = []
    if cfg.max_prompt_length is not None:
        over = [i for i, n in enumerate(lengths) if n > cfg.max_prompt_length]
        if over:
            findings.append(
                Finding(
                    "prompt_length",
                    (
                        f"{len(over)} of {len(lengths)} prompts are longer than max_prompt_length "
                        f"{cfg.max_prompt_length} tokens "
                        f"(longest {longest}); raise it or drop them; first: row {over[0]} (id "
                        f"{table.column('id')[over[0]].as_py()!r})"
                    ),
                )
            )
    if max_positions is not None and longest + cfg.max_completion_length > max_positions:
        findings.append(
            Finding(
                "context",
                (
                    f"the longest prompt ({longest} tokens) plus max_completion_length {cfg.max_completion_length} "
                    "exceeds the "
                    f"student's context ({max_positions} positions); lower --max-completion-length to "
                    f"{max(1, max_positions - longest)} or extend the context (distill prepare-student "
                    "--max-positions)"
                ),
            )
        )
    return findings


def _gold_finding(rows: list[tuple[int, dict]]) -> Finding | None:
    """The sampled prompts without a gold answer, which the accuracy reward cannot score."""
    missing = [(i, row["id"]) for i, row in rows if not (row["answer"] or "").strip()]
    if not missing:
        return None
    return Finding(
        "no_gold",
        (
            f"{len(missing)} of {len(rows)} prompts have no answer, so the accuracy reward cannot score "
            "their "
            f"completions (None: no signal); first: row {missing[0][0]} (id {missing[0][1]!r})"
        ),
    )


def prompt_lengths(tok, prompts: list[list[dict]], tools: list | None = None) -> list[int]:
    """Tokens of every prompt as TRL renders it (chat template, generation prompt, the ``tools``' schemas): all of
    them, not a sample, since the longest sizes vLLM's context. Rendered one by one, tokenized in one batch."""
    texts = [tok.apply_chat_template(p, tools=tools, tokenize=False, add_generation_prompt=True) for p in prompts]
    return [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def group_finding(cfg, *, world_size: int, prompts: int) -> Finding | None:
    """TRL's rule, checked with the real process count: a generation batch holds whole groups of G."""
    steps = cfg.steps_per_generation or cfg.grad_accum
    batch = cfg.batch_size * world_size * steps
    if batch % cfg.num_generations:
        return Finding(
            "group",
            (
                f"num_generations {cfg.num_generations} must divide the generation batch (batch_size {cfg.batch_size} "
                "x "
                f"{world_size} processes x steps_per_generation {steps} = {batch} completions); choose a batch_size "
                f"(or grad_accum) that is a multiple of {cfg.num_generations}"
            ),
        )
    needed = batch // cfg.num_generations
    if prompts < needed:
        return Finding(
            "group",
            (
                f"{prompts} prompts, but one generation batch samples {needed} distinct prompts ({batch} completions "
                "/ "
                f"num_generations {cfg.num_generations}): TRL would train zero steps; add prompts or lower batch_size"
            ),
        )
    return None


def teacher_context_finding(cfg, longest: int) -> Finding | None:
    """On-policy distillation's local teacher reads every prompt and completion whole: the longest must fit its
    positions too (a served teacher's own ``max_model_len`` refuses it there)."""
    if getattr(cfg, "method", None) != "distill" or not cfg.teacher:
        return None
    from reasonkit.distill.data import max_positions

    positions = max_positions(cfg.teacher)
    if positions is None or longest + cfg.max_completion_length <= positions:
        return None
    return Finding(
        "context",
        f"the longest prompt ({longest} tokens) plus max_completion_length {cfg.max_completion_length} exceeds the "
        f"teacher's context ({positions} positions, {cfg.teacher}); lower --max-completion-length to "
        f"{max(1, positions - longest)}",
    )


def batch_finding(cfg, *, world_size: int, prompts: int) -> Finding | None:
    """On-policy distillation's rule (TRL's sampler drops an incomplete generation batch): the table must hold the
    prompts of one generation batch (batch_size x processes x grad_accum, one completion each).

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(method="distill", batch_size=4, grad_accum=2)
    >>> batch_finding(cfg, world_size=1, prompts=5).message[:40]
    '5 prompts, but one generation batch samp'
    """
    if cfg.method != "distill":
        return None
    needed = cfg.batch_size * world_size * cfg.grad_accum
    if prompts >= needed:
        return None
    return Finding(
        "group",
        f"{prompts} prompts, but one generation batch samples {needed} (batch_size {cfg.batch_size} x {world_size} "
        f"processes x grad_accum {cfg.grad_accum}, one completion each): TRL would train zero steps; add prompts or "
        "lower batch_size",
    )


def _turn_stop(tok, prompt: list[dict], stops: set[int]) -> Finding | None:
    """An ``eos_stop`` finding when the tokens the template puts after an assistant turn hold no stop token."""
    before = chat_ids(tok, prompt, add_generation_prompt=True)
    whole = chat_ids(tok, [*prompt, {"role": "assistant", "content": "42"}])
    if whole[: len(before)] != before:
        return None  # the template renders the prompt differently once answered: the SFT lint's territory
    if stop_at_end(tok, whole[len(before) :], stops) is not None:
        return None
    names = ", ".join(repr(tok.convert_ids_to_tokens(i)) for i in sorted(stops)) or "none"
    return Finding(
        "eos_stop",
        (
            f"the chat template ends an assistant turn with {tok.decode(whole[len(before) :][-3:])!r}, which holds no "
            "stop "
            f"token (generation stops at {names}): no completion could end before max_completion_length; make the "
            "turn "
            "end with EOS (distill prepare-student --template ...) or pass --set chat_template=FILE.jinja"
        ),
    )


def format_unmet(prompt_text: str, *, knows_think: bool = False) -> str | None:
    """Why the format reward (a closed ``<think>`` block, then a boxed answer) is ~always 0 for a policy whose
    prompts render like ``prompt_text``, or None when the policy can meet it: the template opens the block in the
    generation prompt (R1's, QwQ's), the prompt (system, instruction, template text) asks for ``<think>`` by name,
    or the policy was trained to write it (``knows_think``: ``<think>`` is a token of its vocabulary). An instruct
    model none of this holds for (Qwen2.5-7B-Instruct) almost never writes the tag, so every group scores 0 on
    format: the reward teaches nothing while its weight dilutes the others.

    >>> format_unmet("<|im_start|>user\\n1 + 1?<|im_end|>\\n<|im_start|>assistant\\n")[:44]
    'the format reward needs a <think> block, but'
    >>> format_unmet("Think inside <think> </think> tags.\\nUser: 1 + 1?\\nAssistant:") is None
    True
    >>> format_unmet("<|user|>1 + 1?<|end|><|assistant|>", knows_think=True) is None
    True
    """
    from reasonkit.think import opens_think

    if knows_think or opens_think(prompt_text) or "<think>" in prompt_text:
        return None
    return (
        "the format reward needs a <think> block, but the chat template does not open one, the prompt never "
        "asks for it and the vocabulary has no <think> token (rendered prompt: ..."
        + prompt_text[-80:].replace("\n", "\\n")
        + "): it would score ~0 on every completion; ask for <think> in `system` or `instruction`, use a template "
        "that opens it, or drop format from rewards"
    )


def trained_by_reasonkit(student: str) -> bool:
    """Whether ``student`` is the model or merge a reasonkit train step wrote (its OUT holds train_config.json):
    such a student learnt its format from its data (SFT on think traces writes ``<think>`` unprompted), so
    what its prompt names says nothing about what it writes."""
    from pathlib import Path

    return (Path(student).expanduser().parent / "train_config.json").is_file()
