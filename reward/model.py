"""The GRPO reward ``rm``: a trained reward model's score of each completion (RLHF/RLAIF's RL stage).

``distill train --method grpo --reward rm=PATH`` (weight 1.0) or ``--reward rm=PATH:0.5`` (any weight;
``accuracy=1.0`` and the others combine with it as usual). PATH is what ``distill train --method rm``
wrote (a model directory or its LoRA adapter; a PRM's ``reward`` is its weakest step).

The completion is read as the filter reads a trace (reward/completions.py: the think split, a
prefilled ``<think>``) and scored by reward/scorer.py's :class:`~reasonkit.reward.scorer.Scorer` on
the assistant turn the prefs and sft tables carry, under the reward model's chat template, exactly as
``distill score`` scores a traces row: the number GRPO optimises is the number ``distill score`` writes
for the same completion (tests/reward/test_model.py checks it on a real run's rollouts). In a trainer the reward
model loads in the policy's dtype (bf16 on a GPU, where ``distill score`` loads fp32: the same number to bf16's
precision), so each of a run's processes holds half the memory fp32 would.

Why not TRL's own reward-model path (``reward_funcs="path"``): it scores the raw completion text as
the policy wrote it, while the reward model was trained (and ``distill score`` scores) on the
assistant turn rebuilt from reasoning and response; one scoring code keeps the two from drifting.

>>> parse_rm_flag("rm=runs/rm"), parse_rm_flag("rm=runs/rm:0.5")
(('runs/rm', 1.0), ('runs/rm', 0.5))
"""

from __future__ import annotations

from collections.abc import Sequence

from reasonkit.errors import UserError
from reasonkit.reward.setup import RewardSetup

NAME = "rm"


def parse_rm_flag(item: str) -> tuple[str, float]:
    """``rm=PATH`` -> (PATH, 1.0); ``rm=PATH:WEIGHT`` -> (PATH, WEIGHT) (a tail that is no number stays in the path).

    >>> parse_rm_flag("rm=")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: --reward rm=: name the reward model, rm=PATH or rm=PATH:WEIGHT
    """
    _, _, value = item.partition("=")
    path, sep, tail = value.rpartition(":")
    weight = 1.0
    if sep:
        try:
            weight = float(tail)
        except ValueError:
            path = value
    else:
        path = value
    if not path.strip():
        raise UserError(f"--reward {item}: name the reward model, rm=PATH or rm=PATH:WEIGHT")
    return path.strip(), weight


class ModelReward:
    """A reward model as a TRL reward function ``(prompts, completions, completion_ids, **columns)``.

    The model loads on the first call (so the object pickles, and a rollout worker loads its own);
    the path is checked when the object is built, before any training starts.
    """

    def __init__(
        self, path: str, setup=None, *, batch_size: int = 16, device: str | None = None, dtype: str = "float32"
    ):
        from reasonkit.reward.scorer import inspect_model

        self.spec = inspect_model(path)  # not a reward model: one line now, not a traceback at step 1
        self.__name__, self.path, self.setup = NAME, path, setup or RewardSetup()
        self.batch_size, self.device = batch_size, device
        # the weights' dtype: the policy's once a trainer takes the reward (:meth:`in_dtype_of`), so a GPU run's
        # reward model is bf16 in every process as its policy is, not fp32 (twice the memory --plan counts)
        self.dtype = dtype
        self._scorer = None

    def in_dtype_of(self, model) -> ModelReward:
        """This reward, loading in ``model``'s dtype (the policy's: bf16 on a GPU, fp32 on a CPU)."""
        self.dtype = str(model.dtype).removeprefix("torch.")
        return self

    @property
    def scorer(self):
        if self._scorer is None:
            from reasonkit.reward.scorer import Scorer

            self._scorer = Scorer(self.spec, device=self.device, dtype=self.dtype)
        return self._scorer

    def turns(
        self, prompts: Sequence, completions: Sequence, completion_ids: Sequence | None = None
    ) -> list[str | None]:
        """The assistant turn of each completion, as ``distill score`` reads a rollout's row."""
        from reasonkit.reward.completions import samples
        from reasonkit.think import join

        setup = self.setup
        parsed = samples(
            prompts,
            completions,
            completion_ids,
            prefilled=setup.prefilled,
            limit=setup.max_completion_length,
            eos_token_ids=setup.eos_token_ids,
        )
        return [join(s.reasoning, s.response).strip() or None for s in parsed]

    def __call__(
        self, prompts: Sequence, completions: Sequence, completion_ids: Sequence | None = None, **columns
    ) -> list[float | None]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        results = self.scorer.score(list(prompts), self.turns(prompts, completions, completion_ids), self.batch_size)
        return [reward for reward, _ in results]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_scorer": None}

    def __repr__(self) -> str:
        return f"ModelReward({self.path!r})"
