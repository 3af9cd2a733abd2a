"""How a policy samples on TRL's transformers path, for GRPO (distill/rl/grpo.py) and on-policy distillation
(distill/onpolicy/trainer.py): from the policy itself, in eval mode (no dropout), the LoRA adapter merged where
the round trip is exact, as TRL's vLLM path samples.

TRL's GRPOTrainer and DistillationTrainer both generate inside the training step with the model in train mode,
through ``_generate_single_turn``; :class:`SamplesFromThePolicy` wraps that method in :func:`sampling_policy`.
"""

from __future__ import annotations

from contextlib import contextmanager


class SamplesFromThePolicy:
    """A mixin for a TRL trainer with ``_generate_single_turn`` and ``use_vllm``: its transformers generation
    samples from the policy in eval mode, the adapter merged where :func:`merges_exactly` says the round trip is
    exact and the weights are not sharded (DeepSpeed, FSDP: TRL gathers them to merge; left alone)."""

    def _generate_single_turn(self, *args, **kwargs):
        if self.use_vllm:  # vLLM samples from merged weights without dropout already (TRL merges at each sync)
            return super()._generate_single_turn(*args, **kwargs)
        with sampling_policy(self.accelerator.unwrap_model(self.model), merge=self._merge_for_sampling()):
            return super()._generate_single_turn(*args, **kwargs)

    def _merge_for_sampling(self) -> bool:
        if not hasattr(self, "_merge_ok"):
            sharded = self.is_deepspeed_enabled or self.is_fsdp_enabled
            self._merge_ok = not sharded and merges_exactly(self.accelerator.unwrap_model(self.model))
        return self._merge_ok


def merges_exactly(model) -> bool:
    """Whether ``model`` is a PEFT model whose adapter merges and unmerges back to its weights within fp32
    rounding (~1e-8 of a weight after 1,000 round trips): every frozen weight fp32. bf16 weights would
    drift by up to half a bf16 ulp a round trip, and a quantized base cannot be merged losslessly."""
    import torch

    frozen = [p.dtype for p in model.parameters() if not p.requires_grad]
    return hasattr(model, "merge_adapter") and bool(frozen) and all(d == torch.float32 for d in frozen)


@contextmanager
def sampling_policy(model, *, merge: bool):
    """The policy as it samples in TRL's transformers generation: in eval mode (no dropout) and, with ``merge``,
    the LoRA adapter merged into the base weights; train mode and the unmerged adapter restored after.

    TRL samples inside the training step with the model in train mode, so LoRA's dropout perturbs every
    sampled token and the unmerged adapter costs two extra matmuls a layer: on the 1.1M teacher one
    ``generate`` of 8 x 135 tokens takes 0.74 CPU-s against 0.45 merged in eval mode (bench/grpo.py). TRL's
    vLLM path samples the same way: it merges the adapter for every weight sync and vLLM has no dropout.
    The loss's forward still runs in train mode; what is trained is unchanged, only the samples lose
    dropout's noise.
    """
    import torch

    training = model.training
    model.eval()
    if merge:
        with torch.no_grad():
            model.merge_adapter()
    try:
        yield model
    finally:
        if merge:
            with torch.no_grad():
                model.unmerge_adapter()
        model.train(training)
