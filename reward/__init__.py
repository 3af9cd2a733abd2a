"""What a completion is worth: one family for GRPO's rewards, reward models and scoring.

- ``reward.functions``: GRPO's reward functions in TRL's signature (a verifier's verdict as a number: the
  filter's extractor, Verifier and language ratio), ``make_rewards``
- ``reward.model``: the ``rm`` reward, a reward model scored through the scorer; ``reward.setup``: what a
  reward is built with; ``reward.completions``: a GRPO completion read as the filter reads a traces row
- ``reward.scorer``: a reward model (rm or prm) as a scoring function, shared by ``distill score``, the ``rm``
  reward and train's held-out scoring
- ``reward.steps``: a solution's steps as a PRM reads them (cut as label-steps cuts them, encoded as
  ``--method prm`` trains on them)

The stages that use the family import it from below: ``distill score`` (judges/score/), the ``rm`` and ``prm``
training rungs (distill/reward/) and GRPO (distill/rl/). It sits under the stage folders and over filters/
(the verifiers it turns into numbers), so no arrow runs back up.
"""
