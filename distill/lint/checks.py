"""The pre-training lint: the data/template mistakes that silently waste a run, caught before it starts.

Each check below is something users of open-r1 and LLaMA-Factory lost runs to; none of them makes
training crash, they make it learn the wrong thing while the loss curve looks fine:

- ``pad_eos``: the pad token is EOS (or missing, so EOS is used), and collators that mask pad ids
  out of the loss mask the EOS with them: the student never learns to stop.
- ``no_assistant_tokens``: an example whose assistant-token mask is all zero (no assistant turn, or a
  template whose ``{% generation %}`` block is missing or misplaced) contributes nothing.
- ``truncation``: too many examples longer than ``max_length``: their ends (the answer, the EOS)
  are cut off, so the student learns to ramble and never conclude.
- ``no_eos_end``: the trained span of an assistant turn does not end in an end-of-turn token.
- ``think_prefill``: the data and the template disagree about who writes ``<think>``: a template that
  prefills it at generation over data that lacks it (or the reverse), or one that strips the
  reasoning out of assistant turns (DeepSeek-R1-Distill's own template does).
- the student's own problems (``context``, ``eos_turn_end``, ``generation_markers``: distill/lint/student.py)
  and ``memory``: the estimated peak per GPU exceeds the GPU (distill/lint/memory.py).

GRPO's prompts have checks of their own (distill/lint/prompt.py: the turn must stop, prompts fit, G divides the batch).

The lint tokenizes with the tokenizer only (no weights), on at most ``lint_rows`` evenly spaced rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa

from reasonkit.distill.lint.base import Finding, chat_ids, sample_rows, stop_at_end
from reasonkit.errors import UserError

OPEN, CLOSE = "<think>", "</think>"


@dataclass
class _Tally:
    """Rows failing one check: how many, and the first one (for the message)."""

    count: int = 0
    first: str = ""

    def add(self, where: str) -> None:
        self.count += 1
        self.first = self.first or where


def _scan(tok, rows, cfg, *, max_length: int, stops: set[int], unready: set[str]) -> tuple:
    """One pass over the sampled rows: (the tallies of each per-row check, the distinct reasons a think prefill is
    wrong, first seen first, every example's length, the stop tokens that end the trained turns, the truncated)."""
    from reasonkit.distill.data import uses_tools

    tallies = {name: _Tally() for name in ("no_assistant_tokens", "no_eos_end", "think_prefill", "no_tool_schemas")}
    think_why: list[str] = []
    lengths: list[int] = []
    turn_ends: set[int] = set()
    truncated = _Tally()
    for index, row in rows:
        where = f"row {index} (id {row['id']!r})"
        if cfg.method == "sft" and not row.get("tools") and uses_tools(row["messages"]):
            tallies["no_tool_schemas"].add(where)
        for ids, trained, prompt, content, empty_why in trained_sequences(tok, row, cfg.method):
            lengths.append(len(ids))
            if len(ids) > max_length:
                truncated.add(where)
            if "generation_markers" in unready:
                continue
            if not trained:
                tallies["no_assistant_tokens"].add(f"{where}: {empty_why}")
                continue
            end = stop_at_end(tok, trained, stops)
            if end is None:
                if "eos_turn_end" not in unready:  # the student check named the cause already
                    tallies["no_eos_end"].add(where)
            else:
                turn_ends.add(end)
            why = _think_issue(tok, prompt, content)
            if why:
                tallies["think_prefill"].add(where)
                think_why += [why] if why not in think_why else []
    return tallies, think_why, lengths, turn_ends, truncated


def _row_findings(tok, cfg, tallies: dict, think_why: list[str], n: int) -> list[Finding]:
    """The per-row checks' findings: how many of the ``n`` examples each caught, and the first."""
    found = []
    messages = {
        "no_assistant_tokens": "have no assistant tokens to train on (assistant mask all zero)",
        "no_eos_end": "have assistant turns whose trained tokens do not end in the end-of-turn token "
        f"{tok.eos_token!r}, so the student never learns to stop"
        + (" (the template must put it inside {% generation %})" if cfg.method == "sft" else ""),
        "no_tool_schemas": "call tools but carry no tool schemas (TRL's 'tools' column: the JSON schemas the model "
        "was "
        "shown), so the student would train on prompts without the tool list it is given at inference",
    }
    for name, tally in tallies.items():
        if tally.count and name in messages:
            found.append(Finding(name, f"{tally.count} of {n} examples {messages[name]}; first: {tally.first}"))
    if think_why:
        found.append(
            Finding(
                "think_prefill",
                f"{tallies['think_prefill'].count} of {n} examples: {think_why[0]}; first: "
                f"{tallies['think_prefill'].first}",
            )
        )
    return found


def lint(
    tok, table: pa.Table, cfg, *, max_length: int, stops: set[int], max_positions: int | None
) -> tuple[list[Finding], dict]:
    """All findings on ``table`` (validated sft or prefs rows; GRPO's prompts: distill/lint/prompt.py) and the length statistics."""  # noqa: E501
    from reasonkit.distill.lint.student import student_findings

    if cfg.method in ("grpo", "distill"):  # prompts, sampled from
        from reasonkit.distill.launch import world_size
        from reasonkit.distill.lint.prompt import lint_prompts

        return lint_prompts(tok, table, cfg, stops=stops, max_positions=max_positions, world_size=world_size())
    if cfg.method in ("rm", "prm"):  # a scoring head: no turn to end, no template markers; lengths only
        return _lint_head(tok, table, cfg, max_length)

    findings = student_findings(tok, cfg, max_length=max_length, max_positions=max_positions, stops=stops)
    unready = {f.check for f in findings}  # the per-row checks would repeat these on every row
    scan = _scan(tok, sample_rows(table, cfg.lint_rows), cfg, max_length=max_length, stops=stops, unready=unready)
    tallies, think_why, lengths, turn_ends, truncated = scan
    n = len(lengths)
    from reasonkit.distill.prepare.templates import turn_end_token

    turn_ends.add(tok.convert_tokens_to_ids(turn_end_token(tok)) if turn_end_token(tok) else None)
    pad = _pad_finding(tok, {tok.eos_token_id, *turn_ends} - {None})
    findings[len(unready) : len(unready)] = (
        [pad] if pad else []
    )  # after the student's own problems, which may cause it
    findings += _row_findings(tok, cfg, tallies, think_why, n)
    stats = _length_stats(lengths, max_length, truncated.count)
    findings += _truncation(truncated, n, stats, cfg, "would lose their endings")
    from reasonkit.distill.lint.memory import memory_finding

    memory = memory_finding(cfg, max_length=max_length, longest=stats["longest"])  # only with a GPU to fit
    findings += [memory] if memory else []
    return findings, stats


def _truncation(truncated: _Tally, n: int, stats: dict, cfg, consequence: str) -> list[Finding]:
    share = truncated.count / max(1, n)
    if share <= cfg.max_truncated_share:
        return []
    return [
        Finding(
            "truncation",
            f"{truncated.count} of {n} examples ({share:.0%}) are longer than --max-length {stats['max_length']} "
            "tokens "
            f"(longest {stats['longest']}, 95th percentile {stats['p95']}) and {consequence}; raise "
            f"--max-length or drop long traces (the limit is --set max_truncated_share={cfg.max_truncated_share}); "
            f"first: {truncated.first}",
        )
    ]


def _lint_head(tok, table: pa.Table, cfg, max_length: int) -> tuple[list[Finding], dict]:
    """rm/prm: how many examples exceed max_length (TRL's RewardTrainer drops such pairs; a PRM row loses its last labels)."""  # noqa: E501
    from reasonkit.distill.reward.heads import module

    picks = [i for i, _ in sample_rows(table.select(["id"]), cfg.lint_rows)]
    per_row = 2 if cfg.method == "rm" else 1  # a pair is two sequences
    lengths = module(cfg.method).lengths(tok, table.take(picks), cfg)
    truncated = _Tally()
    for k, length in enumerate(lengths):
        if length > max_length:
            index = picks[k // per_row]
            truncated.add(f"row {index} (id {table.column('id')[index].as_py()!r})")
    stats = _length_stats(lengths, max_length, truncated.count)
    consequence = (
        "would be left out of training (TRL's RewardTrainer drops pairs longer than max_length)"
        if per_row == 2
        else "would lose the labels of their last steps"
    )
    return _truncation(truncated, len(lengths), stats, cfg, consequence), stats


def enforce(findings: Sequence[Finding], mode: str, where: str) -> None:
    """``mode`` "error" turns findings into one UserError line; "warn" and "off" let training go on."""
    if mode != "error" or not findings:
        return
    more = f" (+{len(findings) - 1} more in {where})" if len(findings) > 1 else ""
    raise UserError(f"lint ({findings[0].check}): {findings[0].message}{more}; --set lint=warn trains anyway")


def as_json(findings: Sequence[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]


# -- the checks ---------------------------------------------------------------------------------
def _pad_finding(tok, eos: set[int]) -> Finding | None:
    """The pad token must not be EOS nor the token that ends the trained turns (``eos``). Another stop
    token of the generation config may pad (Qwen2.5-Instruct pads with <|endoftext|>, ends turns with
    <|im_end|>): masking it masks nothing the student must learn."""
    if tok.pad_token_id is not None and tok.pad_token_id not in eos:
        return None
    what = (
        "the tokenizer has no pad token (trainers pad with EOS)"
        if tok.pad_token_id is None
        else f"the pad token {tok.pad_token!r} is the EOS token"
    )
    avoid = eos | {tok.bos_token_id}
    special = [
        t
        for t in dict.fromkeys(tok.all_special_tokens + list(tok.get_added_vocab()))
        if tok.convert_tokens_to_ids(t) not in avoid
    ]
    special.sort(key=lambda t: "pad" not in t.lower())
    hint = f" (candidates: {', '.join(special[:3])})" if special else " (add one to the tokenizer first)"
    return Finding(
        "pad_eos",
        f"{what}: collators that mask pad ids out of the loss mask EOS with them and the student never learns "
        f"to stop; pass --set pad_token=TOKEN naming a distinct token of the vocabulary{hint}",
    )


def trained_sequences(tok, row: dict, method: str):
    """(ids, trained ids, prompt messages, assistant content, why-empty) per sequence the trainer will see: what the
    lint reads of ``row``, tokenized as TRL tokenizes it for ``method`` (a DPO row: one per side)."""
    if method == "sft":
        from reasonkit.distill.data import chat_inputs

        # a tool-use conversation as TRL renders it: calls as objects, its tools shown
        messages, tools = chat_inputs(row)
        out = tok.apply_chat_template(
            messages, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
        trained = _last_span(ids, mask)
        roles = [m["role"] for m in messages]
        why = (
            "no assistant turn in messages"
            if "assistant" not in roles
            else "the chat template marks none of its tokens"
        )
        turns = [i for i, r in enumerate(roles) if r == "assistant"]
        content = messages[turns[-1]]["content"] if turns else ""
        yield ids, trained, messages[: turns[-1]] if turns else messages, content, why
        return
    prompt = row["prompt"]
    if isinstance(prompt, str):  # TRL's string prefs (Step-DPO): tokenized as TRL does, EOS appended to each side
        prompt_ids, eos = list(tok(prompt)["input_ids"]), tok.eos_token or ""
        for side in ("chosen", "rejected"):
            ids = list(tok(prompt + row[side] + ("" if row[side].endswith(eos) else eos))["input_ids"])
            start = next(
                (i for i, (a, b) in enumerate(zip(prompt_ids, ids)) if a != b), min(len(prompt_ids), len(ids))
            )
            yield ids, ids[start:], prompt, row[side], f"the {side} completion adds no tokens after the prompt"
        return
    prompt_ids = chat_ids(tok, prompt, add_generation_prompt=True)
    for side in ("chosen", "rejected"):
        ids = chat_ids(tok, prompt + row[side])
        start = next((i for i, (a, b) in enumerate(zip(prompt_ids, ids)) if a != b), min(len(prompt_ids), len(ids)))
        content = next((m["content"] for m in reversed(row[side]) if m["role"] == "assistant"), "")
        yield ids, ids[start:], prompt, content, f"the {side} completion adds no tokens after the prompt"


def _last_span(ids: list[int], mask: list[int]) -> list[int]:
    """The tokens of the last run of mask 1s (the final assistant turn's trained tokens)."""
    end = max((i for i, m in enumerate(mask) if m), default=-1)
    if end < 0:
        return []
    start = end
    while start > 0 and mask[start - 1]:
        start -= 1
    return ids[start : end + 1]


def _think_issue(tok, prompt: list[dict], content: str) -> str | None:
    """How the template and this assistant turn disagree about ``<think>``, or None."""
    if isinstance(prompt, str):  # a rendered prompt (string prefs) holds its own <think>: no template applies
        return None
    generation = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    prefill = generation.rstrip().endswith(OPEN)
    opens, closes = content.lstrip().startswith(OPEN), CLOSE in content
    if not (prefill or opens or closes):
        return None
    full = tok.apply_chat_template(prompt + [{"role": "assistant", "content": content}], tokenize=False)
    if closes:
        reasoning = content.split(CLOSE)[0].replace(OPEN, "").strip()
        if reasoning and reasoning not in full:
            return "the chat template strips the reasoning between <think> and </think> from assistant turns, so the student would learn answers without reasoning (use a template that keeps it)"  # noqa: E501
    if prefill and not opens:
        return "the chat template prefills <think> at generation but the assistant turns do not start with <think>, so at inference the student sees a prefix it never trained on (prepend '<think>\\n' to the data or use a template without the prefill)"  # noqa: E501
    if not prefill and closes and not opens:
        return "assistant turns close </think> without opening <think> (written under a prefill) but the student's template does not prefill it, so the student would learn to skip the opening tag (prepend '<think>\\n' to the data)"  # noqa: E501
    before = tok.apply_chat_template(prompt, tokenize=False).count(OPEN)
    if full.count(OPEN) - before > content.count(OPEN):
        return "the chat template inserts its own <think> into assistant turns on top of the one in the data"
    return None


def _length_stats(lengths: list[int], max_length: int, truncated: int) -> dict:
    ordered = sorted(lengths) or [0]
    return {
        "checked": len(lengths),
        "max_length": max_length,
        "truncated": truncated,
        "median": ordered[len(ordered) // 2],
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "longest": ordered[-1],
    }
