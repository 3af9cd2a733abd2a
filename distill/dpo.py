"""DPO on preference pairs with TRL's DPOTrainer.

The reference model is the student itself with its LoRA adapters disabled: no second copy of the
weights in memory, and the reference is exactly the starting point of the policy. With ``--full``
there are no adapters to disable, so TRL loads a frozen copy of the student as the reference, or
with ``--precompute-ref`` scores every pair with the untouched student once before training and
keeps only those numbers.

The loss (``--loss sigmoid``) of a pair is ``-log sigmoid(beta * ((logp_c - ref_c) - (logp_r - ref_r)))``
where ``logp`` sums the policy's log-probabilities of the completion tokens (everything after the
prompt the chat template renders with its generation prompt) and ``ref`` the same under the
reference; tests/distill/test_dpo.py recomputes it independently. ``--loss ipo`` is IPO's squared
loss on length-normalised log-ratios. ``--set rpo_alpha=A`` adds ``A`` times the chosen
completion's mean token NLL (TRL's ``"sft"`` loss term), as RPO does.

When training ends, distill/dpo_movement.py measures how far the policy moved from the reference
(mean |log pi/pi_ref| per completion), so a run that barely changed the model says so in its report.
"""

from __future__ import annotations

from transformers import TrainerCallback
from trl import DPOConfig, DPOTrainer

from reasonkit.distill.dpo_movement import measure
from reasonkit.distill.levers import trl_levers


def dpo_arguments(cfg, args: dict) -> DPOConfig:
    """The DPOConfig, built before the model loads (ZeRO-3: see sft.sft_arguments)."""
    # TRL combines loss terms by weight; "sft" is the NLL of the chosen completion.
    losses, weights = ([cfg.loss, "sft"], [1.0, cfg.rpo_alpha]) if cfg.rpo_alpha else ([cfg.loss], None)
    return DPOConfig(
        **args,
        **trl_levers(cfg),
        beta=cfg.kl_beta,
        loss_type=losses,
        loss_weights=weights,
        precompute_ref_log_probs=cfg.precompute_ref,
    )


def build_dpo_trainer(cfg, model, tok, dataset, args: dict | DPOConfig, peft_config, callbacks) -> DPOTrainer:
    config = args if isinstance(args, DPOConfig) else dpo_arguments(cfg, args)
    trainer = DPOTrainer(
        model=model,
        ref_model=None,  # LoRA: the base with adapters disabled; full: TRL loads a frozen copy
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    trainer.add_callback(Movement(trainer))
    return trainer


class Movement(TrainerCallback):
    """Measures :func:`measure` when training ends and adds it to the last logged step."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_train_end(self, args, state, control, **kwargs):
        figures = measure(self.trainer)
        if figures is None:
            return
        last = next((e for e in reversed(state.log_history) if "loss" in e), None)
        if last is not None:
            last.update(figures)
