"""DAPO's dynamic sampling for GRPO (Yu et al. 2025, "DAPO", sec. 3.2): ``distill train --method grpo
--dynamic-sampling``.

A group whose G completions all earn the same reward has zero advantage and teaches nothing; it still
costs its generation and its share of the batch. Dynamic sampling drops those groups and draws more
prompts until the batch holds as many groups with reward variance as it was built for. TRL 1.16's
GRPOTrainer does not offer it (it logs ``frac_reward_zero_std`` only), so :class:`DynamicSampling` wraps
TRL's ``_generate_and_score_completions``: each round generates and scores a batch of prompts exactly as
TRL does (and the rollouts log keeps every completion, dropped groups included), keeps its groups with
variance, and the kept groups of the rounds are joined into the one batch TRL then splits into steps.

Each group's advantages are its own (relative to its group's mean), so joining whole groups keeps them
exact; under ``scale_rewards="batch"`` each round's were scaled by its own batch's std. Prompts are drawn
from the training set with a generator seeded by (seed, step, round), so a resumed run draws the same.
At most :data:`MAX_ROUNDS` rounds: a set where nearly every prompt is all-right or all-wrong fills the rest
of the batch with flat groups (zero advantage, as TRL would have trained on them) rather than sampling
forever; the report counts the prompts drawn, the rounds and the groups so filled.

One process only (TRL splits a batch's groups across processes and gathers their rewards; dropping groups
in one process alone would tear them): refused otherwise before training (distill/config.py).

>>> flat_groups([[1.0], [1.0], [0.0], [1.0], [0.0], [0.0]], [1.0], group=2)
[True, False, True]
"""

from __future__ import annotations

import math

#: Rounds of sampling per generation batch at most (the first included): DAPO samples until the batch is full;
#: a bound keeps a set of nearly all flat prompts from sampling forever.
MAX_ROUNDS = 4


def flat_groups(
    rewards_per_func: list[list[float]], weights: list[float], group: int, tol: float = 1e-6
) -> list[bool]:
    """Per group of ``group`` consecutive completions: whether its weighted rewards are all equal (within
    ``tol``), i.e. its advantages are zero. NaN (a function's None) is left out of a sum, as TRL sums; a
    completion every function left unscored is left out of its group."""
    sums = []
    for scores in rewards_per_func:
        kept = [w * v for w, v in zip(weights, scores) if not math.isnan(v)]
        sums.append(sum(kept) if kept else None)
    groups = [[v for v in sums[i : i + group] if v is not None] for i in range(0, len(sums), group)]
    return [not g or max(g) - min(g) <= tol for g in groups]


def join_rows(parts: list[dict], rows: list[list[int]], pad_id: int) -> dict:
    """The ``rows`` of each part (TRL's generation output: tensors with a first dimension per completion),
    as one output: prompts left-padded to the longest, completions (and every per-token tensor) right-padded;
    ``num_items_in_batch`` recounted over the completion tokens kept."""
    import torch

    out = {}
    for key, first in parts[0].items():
        if key == "num_items_in_batch" or not isinstance(first, torch.Tensor) or first.dim() == 0:
            continue
        pieces = [p[key][torch.tensor(r, dtype=torch.long, device=first.device)] for p, r in zip(parts, rows)]
        if first.dim() == 2:
            width = max(x.shape[1] for x in pieces)
            pad = pad_id if key in ("prompt_ids", "completion_ids") else 0
            left = key.startswith("prompt")  # TRL left-pads prompts, right-pads completions
            pieces = [_pad(x, width, pad, left=left) for x in pieces]
        out[key] = torch.cat(pieces)
    mask = out["completion_mask"] * out["tool_mask"] if "tool_mask" in out else out["completion_mask"]
    out["num_items_in_batch"] = mask.sum()
    return out


def _pad(x, width: int, value, *, left: bool):
    import torch.nn.functional as F

    extra = width - x.shape[1]
    return F.pad(x, (extra, 0) if left else (0, extra), value=value) if extra else x


class DynamicSampling:
    """A GRPOTrainer mixin (before the trainer in the bases): see the module's docstring. Reads the rewards of
    each round from ``_rewards_per_func`` (distill/rl/grpo.py's RolloutGRPOTrainer keeps them)."""

    dynamic_sampling = False

    def _generate_and_score_completions(self, inputs):
        if not (self.dynamic_sampling and self.model.training):
            return super()._generate_and_score_completions(inputs)
        group = self.num_generations
        want = len(inputs) // group
        parts, rows, flat_rows, drawn = [], [], [], 0
        for round_ in range(MAX_ROUNDS):
            batch = inputs if round_ == 0 else self._draw(len(inputs), round_)
            output = super()._generate_and_score_completions(batch)
            drawn += len(batch) // group
            flags = flat_groups(self._rewards_per_func.tolist(), self.reward_weights.tolist(), group)
            parts.append(output)
            rows.append([g * group + k for g, flat in enumerate(flags) if not flat for k in range(group)])
            flat_rows.append([g * group + k for g, flat in enumerate(flags) if flat for k in range(group)])
            if sum(len(r) for r in rows) >= want * group:
                break
        kept = sum(len(r) for r in rows) // group
        filled = max(0, want - kept)  # flat groups standing in for the ones the rounds did not find
        rows = _take(rows, want * group) if not filled else _fill(rows, flat_rows, want * group)
        self._log_dynamic(drawn, len(parts), want, filled)
        return join_rows(parts, rows, self._tokenizer.pad_token_id)

    def _draw(self, count: int, round_: int) -> list[dict]:
        """``count // G`` prompts of the training set, each ``G`` times (as TRL's sampler repeats them)."""
        import torch

        generator = torch.Generator().manual_seed(hash((self.args.seed, self.state.global_step, round_)) % 2**31)
        picks = torch.randint(len(self.train_dataset), (count // self.num_generations,), generator=generator)
        return [self.train_dataset[int(i)] for i in picks for _ in range(self.num_generations)]

    def _log_dynamic(self, drawn: int, rounds: int, want: int, filled: int) -> None:
        metrics = self._metrics["train"]
        metrics["dynamic/prompts_drawn"].append(float(drawn))
        metrics["dynamic/rounds"].append(float(rounds))
        metrics["dynamic/groups_filled_flat"].append(float(filled))
        metrics["dynamic/groups_wanted"].append(float(want))


def _take(rows: list[list[int]], total: int) -> list[list[int]]:
    """The first ``total`` kept rows, round by round (whole groups: ``total`` is a multiple of G)."""
    out = []
    for r in rows:
        out.append(r[: max(0, total)])
        total -= len(out[-1])
    return out


def _fill(rows: list[list[int]], flat: list[list[int]], total: int) -> list[list[int]]:
    """Every kept row, then flat groups of the rounds up to ``total``."""
    short = total - sum(len(r) for r in rows)
    out = []
    for r, f in zip(rows, flat):
        extra = f[: max(0, short)]
        short -= len(extra)
        out.append(sorted(r + extra))
    return out
