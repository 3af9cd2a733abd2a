"""On-policy distillation (``distill train --method distill``): the student samples, the teacher scores every
token, the loss is TRL's generalized JSD between them (TRL's DistillationTrainer; Agarwal et al. 2024).
Its settings are TrainConfig's (distill/config.py OnPolicySettings, and GRPO's sampling fields).

vocab.py      student and teacher must share a vocabulary: checked on the tokenizers, before any weight loads
served.py     a teacher behind vLLM's server: its root URL, its model, the vocabulary probe
scoring.py    the teacher's log-prob of each completion, from the hidden states its forward computed
trainer.py    TRL's trainers (a local teacher, or one behind vLLM's server) keeping rollouts and timing steps
rollouts.py   every sampled completion with the teacher's log-prob sum, in OUT/rollouts (distill/rollout_log.py)
report.py     report.json's ``distill`` section and report.md: divergence, tokens sampled and scored, time split
"""
