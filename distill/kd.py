"""Knowledge distillation from stored teacher log-probs: ``distill train --method sft --kd-weight W``.

The loss is TRL's SFT cross-entropy plus ``W`` times a sparse forward KL to the teacher's top-K targets
that ``distill generate --logprobs K`` stored (schema.LOGPROB_COLUMNS), per completion token::

    q = softmax(teacher top-K log-probs)               the stored targets, renormalised over their K ids
    KL_t = sum_k q_k (log q_k - log p_student(id_k))   p_student over the whole vocabulary

Both sums run over the batch's tokens and divide by the same count (the label tokens, as TRL's
cross-entropy does, so gradient accumulation weighs them alike). The KL is never negative: the student's
K probabilities sum to at most 1 (Gibbs' inequality).

Alignment. TRL tokenizes each sft row with the student's chat template (the assistant turn as the filter
wrote it: R1's ``<think>`` layout, stripped); the teacher's targets belong to the tokens it generated
(``completion_ids``). The assistant tokens of the row (labels other than -100) and the generated tokens
are aligned as sequences (difflib's matching blocks over token ids, the contiguous run found first):
a target applies to the trained token it matched, every other trained token gets the cross-entropy
alone (the template's end-of-turn tokens, a ``<think>\\n`` the template or the prefill added, text the
filter's layout rewrote, a word the tokenizer splits another way). The share of targets aligned is
reported; under :data:`MIN_ALIGNED` the run stops naming the first row that differs (another tokenizer,
or a table whose text is not the teacher's), since KD on a few scattered tokens is not what was asked.

>>> align([9, 5, 6, 7, 2], [5, 6, 7])
[(1, 0), (2, 1), (3, 2)]
>>> align([9, 5, 6, 8, 7], [5, 6, 7, 3])
[(1, 0), (2, 1), (4, 2)]
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from reasonkit.errors import UserError
from reasonkit.schema import missing_logprob_columns

#: What the collated batch carries beside TRL's inputs: the targets, by token position.
KD_KEYS = ("kd_ids", "kd_logprobs", "kd_mask")
#: The aligned share of the teacher's targets below which the run stops (see the module's docstring).
MIN_ALIGNED = 0.9
#: The per-row columns the aligned dataset carries into the collator.
TARGET_COLUMNS = ("kd_positions", "kd_target_ids", "kd_target_logprobs")


def align(trained: Sequence[int], generated: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``: trained token ``i`` is generated token ``j`` (equal ids, in order)."""
    trained, generated = list(trained), list(generated)
    n = len(generated)
    if n:  # the common case: the generated tokens are one run inside the trained ones
        for start in (i for i, t in enumerate(trained) if t == generated[0]):
            if trained[start : start + n] == generated:
                return [(start + j, j) for j in range(n)]
    matcher = difflib.SequenceMatcher(None, trained, generated, autojunk=False)
    return [(i + d, j + d) for i, j, size in matcher.get_matching_blocks() for d in range(size)]


def check_columns(names: list[str], source: str) -> None:
    """A table for ``--kd-weight`` holds the teacher's log-prob columns: else one line naming both."""
    missing = missing_logprob_columns(names)
    if missing:
        raise UserError(
            f"{source}: --kd-weight needs the teacher's log-prob columns {', '.join(missing)} "
            "(distill generate --logprobs K, then distill filter, carries them)"
        )


def row_targets(example: dict) -> dict:
    """One tokenized row's targets by token position (a ``datasets.map`` function), and its counts."""
    positions = [t for t, label in enumerate(example["labels"]) if label != -100]
    trained = [example["input_ids"][t] for t in positions]
    generated = example["completion_ids"] or []
    pairs = align(trained, generated)
    target_ids = [example["logprob_ids"][j] for _, j in pairs]
    return {
        "kd_positions": [positions[i] for i, _ in pairs],
        "kd_target_ids": target_ids,
        "kd_target_logprobs": [[float(v) for v in example["logprobs"][j]] for _, j in pairs],
        # the counts add_targets sums, so it never reads the targets themselves back into Python
        "kd_aligned": len(pairs),
        "kd_expected": min(len(trained), len(generated)),
        "kd_top_id": max((max(ids) for ids in target_ids if ids), default=-1),
    }


def add_targets(dataset, tok, vocab_size: int, source: str):
    """TRL's tokenized dataset (``input_ids``, ``labels`` + the log-prob columns) with each row's aligned
    targets; returns ``(dataset, report)``. Stops when the targets name ids past the student's vocabulary or
    too few align (the module's docstring)."""
    dataset = dataset.map(row_targets, desc="Aligning the teacher's log-probs")
    aligned, expected = sum(dataset["kd_aligned"]), sum(dataset["kd_expected"])
    top = max(dataset["kd_top_id"], default=-1)
    if top >= vocab_size:
        raise UserError(
            f"{source}: the teacher's log-probs name token {top}, past the student's vocabulary of {vocab_size}: "
            "--kd-weight needs a teacher and a student that share a tokenizer"
        )
    share = aligned / expected if expected else 1.0
    if share < MIN_ALIGNED:
        raise UserError(f"{source}: {first_difference(dataset, tok, share)}")
    report = {"kd_targets_aligned": aligned, "kd_targets": expected, "kd_aligned_share": round(share, 4)}
    keep = ["input_ids", "labels", *TARGET_COLUMNS] + (
        ["seq_lengths"] if "seq_lengths" in dataset.column_names else []
    )
    return dataset.select_columns(keep), report


def first_difference(dataset, tok, share: float) -> str:
    """Why the targets do not align, from the first row where they differ."""
    for row in dataset:
        trained = [t for t, label in zip(row["input_ids"], row["labels"]) if label != -100]
        generated = row["completion_ids"] or []
        if len(row["kd_positions"]) < min(len(trained), len(generated)):
            at = next((i for i, (a, b) in enumerate(zip(trained, generated)) if a != b), 0)
            return (
                f"only {share:.0%} of the teacher's log-prob targets align with the student's tokens (at least "
                f"{MIN_ALIGNED:.0%} needed); first row that differs: its assistant tokens from {at} read "
                f"{tok.decode(trained[at : at + 8])!r}, the teacher generated {tok.decode(generated[at : at + 8])!r} "
                "(another tokenizer, or text that is not the teacher's completion)"
            )
    return f"only {share:.0%} of the teacher's log-prob targets align with the student's tokens"


def collate_targets(examples: list[dict], width: int) -> dict:
    """The batch's targets as dense ``[batch, width, K]`` tensors (``kd_mask`` marks the real entries)."""
    import torch

    k = max((len(ids) for e in examples for ids in e["kd_target_ids"]), default=1) or 1
    ids = torch.zeros((len(examples), width, k), dtype=torch.long)
    values = torch.zeros((len(examples), width, k), dtype=torch.float32)
    mask = torch.zeros((len(examples), width, k), dtype=torch.bool)
    for b, e in enumerate(examples):
        for t, top, lps in zip(e["kd_positions"], e["kd_target_ids"], e["kd_target_logprobs"]):
            if t < width and top:
                ids[b, t, : len(top)] = torch.tensor(top)
                values[b, t, : len(lps)] = torch.tensor(lps)
                mask[b, t, : len(top)] = True
    return {"kd_ids": ids, "kd_logprobs": values, "kd_mask": mask}


class TargetCollator:
    """TRL's collator for the trained columns, then the KD targets by token position beside them."""

    def __init__(self, base):
        self.base = base

    def __call__(self, examples: list[dict]) -> dict:
        plain = [{k: v for k, v in e.items() if k not in TARGET_COLUMNS} for e in examples]
        batch = self.base(plain)
        return {**batch, **collate_targets(examples, batch["input_ids"].shape[1])}


def sparse_forward_kl(log_probs, ids, teacher_logprobs, mask):
    """Per position ``sum_k q_k (log q_k - log_probs[id_k])``, ``q`` the teacher's masked top K renormalised;
    0 where a position has no target. ``log_probs``: the student's ``[..., vocab]`` log-softmax."""
    import torch

    student = log_probs.gather(-1, ids)
    has = mask.any(-1, keepdim=True)
    lq = teacher_logprobs.float().masked_fill(~mask, float("-inf"))
    lq = lq - torch.where(has, torch.logsumexp(lq, -1, keepdim=True), torch.zeros_like(has, dtype=lq.dtype))
    q = torch.where(mask, lq.exp(), torch.zeros_like(lq))
    return (q * (torch.where(mask, lq, torch.zeros_like(lq)) - torch.where(mask, student, torch.zeros_like(lq)))).sum(
        -1
    )


def kd_loss(logits, labels, targets: dict, weight: float, num_items=None) -> tuple:
    """``(loss, ce, kl, kd_tokens)``: cross-entropy over the labels plus ``weight`` x the sparse forward KL, both
    summed over tokens and divided by ``num_items`` (the label tokens; TRL's count across accumulation)."""
    import torch

    log_probs = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # position t-1 predicts token t
    labels = labels[:, 1:]
    trained = labels != -100
    ce = -log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    ce = (ce * trained).sum()
    kl = sparse_forward_kl(log_probs, *(targets[k][:, 1:] for k in KD_KEYS))
    kd_tokens = targets["kd_mask"][:, 1:].any(-1) & trained
    kl = (kl * kd_tokens).sum()
    count = torch.as_tensor(num_items if num_items is not None else trained.sum(), device=ce.device).clamp(min=1)
    return (ce + weight * kl) / count, ce / count, kl / count, kd_tokens.sum()
