"""SFT on reasoning traces with TRL's SFTTrainer: assistant-only loss, optional best-fit-decreasing packing.

Packing. TRL packs with best-fit decreasing (``packing_strategy="bfd"``) and then trains
padding-free: the whole batch is flattened into one row and ``position_ids`` mark where each
sequence restarts. That is the right thing under FlashAttention's varlen kernels, but under SDPA
(every CPU, and GPUs without flash-attn) the flattened row becomes one ``B*L x B*L`` block-diagonal
mask, so attention costs grow with the square of the whole batch: on this CPU it trained 3x *slower*
than plain padding. So without FlashAttention we keep TRL's BFD packing of the dataset but collate
row by row: each packed row is its own ``L``-token sequence, and position ids that restart at every
packed example make transformers build a per-row block-diagonal mask (no attention across examples).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from trl import SFTConfig, SFTTrainer

from reasonkit.distill import kd
from reasonkit.distill.levers import AUTO, is_flash_attention, resolve_attention, trl_levers


@dataclass
class RowPackedCollator:
    """Batches of BFD-packed rows: right-padded to the longest row, position ids restarting per example.

    No attention mask is returned: transformers then reads example boundaries from ``position_ids``
    (only without a KV cache, and TRL's compute_loss passes ``use_cache=False``).
    Padding continues the last example's positions, so it joins that example's segment, sits after
    every real token (causal attention never reaches back to it) and carries label -100.

    >>> c = RowPackedCollator(pad_token_id=0)
    >>> b = c([{"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "seq_lengths": [2, 1]}, {"input_ids": [8], "labels": [8], "seq_lengths": [1]}])
    >>> b["position_ids"].tolist(), b["labels"].tolist()
    ([[0, 1, 0], [0, 1, 2]], [[-100, 6, 7], [8, -100, -100]])
    """  # noqa: E501

    pad_token_id: int

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(e["input_ids"]) for e in examples)
        ids, labels, positions = [], [], []
        for e in examples:
            pad = width - len(e["input_ids"])
            pos = [i for n in e["seq_lengths"] for i in range(n)]
            start = pos[-1] + 1 if pos else 0
            ids.append(list(e["input_ids"]) + [self.pad_token_id] * pad)
            labels.append(list(e["labels"]) + [-100] * pad)
            positions.append(pos + list(range(start, start + pad)))
        return {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "labels": torch.tensor(labels, dtype=torch.long),
            "position_ids": torch.tensor(positions, dtype=torch.long),
        }


class _SFTTrainer(SFTTrainer):
    """SFTTrainer counting the real tokens of row-packed batches.

    TRL counts a batch without an attention mask as one flattened row (``position_ids.size(1)``);
    for row-packed batches the count is every non-pad token instead (the lint guarantees that the
    pad token is distinct from every token a real example contains as its stop token).
    """

    row_packed_pad_id: int | None = None
    #: ``--kd-weight``: the sparse forward KL's weight beside the cross-entropy (distill/kd.py); 0: plain SFT
    kd_weight: float = 0.0
    kd_alignment: dict | None = None

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self.kd_weight and not set(kd.TARGET_COLUMNS) <= set(self._signature_columns):
            self._signature_columns = [*self._signature_columns, *kd.TARGET_COLUMNS]  # the collator reads them

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.kd_weight:  # the targets go to our loss, never to the model's forward
            self._kd_targets = {k: inputs.pop(k) for k in kd.KD_KEYS}
        before = self._total_train_tokens
        result = super().compute_loss(
            model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
        )
        if self.row_packed_pad_id is not None and self.model.training:
            real = int((inputs["input_ids"] != self.row_packed_pad_id).sum())
            self._total_train_tokens = before + int(
                self.accelerator.gather_for_metrics(torch.tensor(real, device=inputs["input_ids"].device)).sum()
            )
            self._metrics["train"]["num_tokens"] = [self._total_train_tokens]
        return result

    def _kd_loss(self, outputs, labels, num_items_in_batch=None):
        """TRL's ``compute_loss_func``: it hands over the model's full logits (its fused head never builds them)."""
        loss, ce, kl, tokens = kd.kd_loss(
            outputs.logits, labels, self._kd_targets, self.kd_weight, num_items=num_items_in_batch
        )
        mode = "train" if self.model.training else "eval"
        for name, value in (("ce_loss", ce), ("kd_loss", kl)):
            self._metrics[mode][name].append(self.accelerator.gather_for_metrics(value.detach()).mean().item())
        self._metrics[mode]["kd_tokens"].append(float(self.accelerator.gather_for_metrics(tokens).sum()))
        return loss


def sft_arguments(cfg, args: dict) -> SFTConfig:
    """The SFTConfig; train.py builds it before loading the model, since under DeepSpeed ZeRO-3 the
    training arguments are what makes from_pretrained partition the weights as it loads them.

    ``padding_free`` with ``attn_implementation: auto`` holds where auto resolves to FlashAttention; where it resolves
    to SDPA (no flash-attn, or no GPU) it is turned off with a warning, and packed rows are collated row by row
    (RowPackedCollator: the module's docstring says why) rather than the run refused: auto asks for whatever runs.
    """
    levers = trl_levers(cfg)
    cuda = not args["use_cpu"]
    if levers.get("padding_free") and cfg.attn_implementation == AUTO and not _flash(cfg, cuda=cuda):
        import warnings

        warnings.warn(
            "padding_free is off for this run: attn_implementation auto resolved to sdpa here (flash-attn "
            "not importable, or no CUDA GPU), and under SDPA a flattened batch is one B*L x B*L attention "
            "mask; packed rows are collated row by row instead",
            stacklevel=2,
        )
        levers["padding_free"] = False
    return SFTConfig(**args, **levers, assistant_only_loss=True, packing=cfg.packing, packing_strategy="bfd")


def _flash(cfg, *, cuda: bool) -> bool:
    """Whether this step's model runs FlashAttention (``auto`` resolved on this device)."""
    return is_flash_attention(resolve_attention(cfg.attn_implementation, cuda=cuda))


def build_sft_trainer(cfg, model, tok, dataset, args: dict | SFTConfig, peft_config, callbacks) -> SFTTrainer:
    config = args if isinstance(args, SFTConfig) else sft_arguments(cfg, args)
    trainer = _SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    if cfg.packing and not _flash(cfg, cuda=not config.use_cpu):
        trainer.data_collator = RowPackedCollator(pad_token_id=tok.pad_token_id)
        trainer.row_packed_pad_id = tok.pad_token_id
    if cfg.kd_weight:
        with_teacher_targets(trainer, cfg, tok)
    return trainer


def with_teacher_targets(trainer: _SFTTrainer, cfg, tok) -> None:
    """``--kd-weight``: the tokenized rows get the teacher's aligned targets (distill/kd.py), the collator
    batches them, and the loss adds the sparse forward KL. TRL's full-logits hook (``compute_loss_func``)
    costs one more forward without gradients per step, for TRL's entropy and accuracy metrics."""
    vocab = trainer.model.get_output_embeddings().weight.shape[0]
    trainer.train_dataset, trainer.kd_alignment = kd.add_targets(trainer.train_dataset, tok, vocab, cfg.data)
    trainer.data_collator = kd.TargetCollator(trainer.data_collator)
    trainer.kd_weight = cfg.kd_weight
    trainer.compute_loss_func = trainer._kd_loss
