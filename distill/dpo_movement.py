"""How far DPO moved the policy from its reference, measured once when training ends.

A DPO run can end with a fine-looking loss curve and a model that is, for practical purposes, the
one it started from (a few steps at a small learning rate on a zero-initialised LoRA). The figure
that says so is the log-ratio DPO itself optimises: per completion, ``log pi(y|x) - log pi_ref(y|x)``
summed over the completion's tokens (TRL's prompt/completion boundary, which
tests/distill/test_dpo.py checks against an independent tokenisation), divided by its token count so
that a 100-token and a 4000-token trace are on one scale (IPO's length normalisation). Its mean
absolute value over the first ``MAX_PAIRS`` training pairs, for the chosen and for the rejected
completions, goes into the last step's record of the Trainer's log history, so report.json's
``history`` carries it.

Below ``MOVED_LITTLE`` nats a token on both, the run "moved the model little": the completions'
probabilities changed by under about 1% a token (e^0.01 = 1.01). The report says so in words
(distill/report.py, recipes/report.py).
Light on purpose (torch is imported inside :func:`measure`): recipes/report.py reads the figures
without loading a training stack; the callback that calls :func:`measure` lives in distill/dpo.py.
"""

from __future__ import annotations

#: pairs measured at the end (forward passes of policy and reference over them: seconds, not minutes)
MAX_PAIRS = 64
#: nats per completion token: below this on chosen and rejected, the report says DPO moved the model little
MOVED_LITTLE = 0.01
#: the keys added to the final step's record (distill/report.py's ``history`` keeps them)
KEYS = ("log_ratio_chosen", "log_ratio_rejected", "log_ratio_pairs")


def completion_logps(model, batch):
    """Summed log-probabilities of each sequence's completion tokens (``completion_mask``), chosen rows
    and rejected rows, as DPO's collator lays them out (chosen first); plain torch on the logits."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["input_ids"][:, 1:]
    mask = batch["completion_mask"][:, 1:].to(logits.dtype)
    token_logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (token_logps * mask).sum(dim=1).chunk(2)


def measure(trainer, max_pairs: int = MAX_PAIRS) -> dict | None:
    """Mean |log pi/pi_ref| per token on chosen and rejected completions of the first pairs, or None
    where the model is sharded over processes (a forward on one rank alone would wait for the others)."""
    import torch

    if trainer.args.world_size > 1:
        return None
    dataset, model = trainer.train_dataset, trainer.model
    n = min(len(dataset), max_pairs)
    size = trainer.args.per_device_train_batch_size
    chosen, rejected = [], []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, n, size):
                batch = trainer._prepare_inputs(
                    trainer.data_collator([dataset[i] for i in range(start, min(n, start + size))])
                )
                policy_c, policy_r = completion_logps(model, batch)
                if "ref_chosen_logps" in batch:  # --precompute-ref: the numbers the loss used
                    ref_c, ref_r = batch["ref_chosen_logps"], batch["ref_rejected_logps"]
                else:  # TRL's own reference: adapters disabled, or the frozen copy
                    ref_c, ref_r = trainer.compute_ref_log_probs(model, batch)
                tokens_c, tokens_r = batch["completion_mask"][:, 1:].sum(dim=1).clamp(min=1).chunk(2)
                chosen += ((policy_c - ref_c.to(policy_c)).abs() / tokens_c).tolist()
                rejected += ((policy_r - ref_r.to(policy_r)).abs() / tokens_r).tolist()
    finally:
        model.train(was_training)
    return {"log_ratio_chosen": sum(chosen) / n, "log_ratio_rejected": sum(rejected) / n, "log_ratio_pairs": n}


def moved_little(record: dict) -> bool | None:
    """Whether a step record's log-ratios are both under :data:`MOVED_LITTLE` (None: not measured)."""
    if "log_ratio_chosen" not in record:
        return None
    return max(record["log_ratio_chosen"], record["log_ratio_rejected"]) < MOVED_LITTLE


def movement_line(report: dict) -> str | None:
    """How far a DPO run moved the policy from its reference, in words (None: not measured).

    >>> r = {"steps": 5, "history": [{"step": 5, "log_ratio_chosen": 0.0031, "log_ratio_rejected": 0.002}]}
    >>> movement_line(r)
    'DPO moved the model little: 5 steps, mean |log pi/pi_ref| 0.0031 chosen, 0.002 rejected a token (under 0.01)'
    >>> r["history"][-1].update(log_ratio_chosen=0.25, log_ratio_rejected=0.4)
    >>> movement_line(r)
    'DPO moved the model: 5 steps, mean |log pi/pi_ref| 0.25 chosen, 0.4 rejected a token'
    """
    last = (report.get("history") or [{}])[-1]
    little = moved_little(last)
    if little is None:
        return None
    figures = (
        f"{report['steps']} steps, mean |log pi/pi_ref| {last['log_ratio_chosen']:.3g} chosen, "
        f"{last['log_ratio_rejected']:.3g} rejected a token"
    )
    return (
        f"DPO moved the model little: {figures} (under {MOVED_LITTLE:g})"
        if little
        else f"DPO moved the model: {figures}"
    )
