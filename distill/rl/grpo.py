"""GRPO with verifiable rewards on TRL's GRPOTrainer: the student samples, the verifiers score, the group compares.

For each prompt the policy samples ``num_generations`` (G) completions; each is scored by the reward
functions of reasonkit.reward.functions (the filter's own extractor, Verifier and language ratio, so a
reward and a ``distill filter`` verdict never disagree), weighted and summed; a completion's advantage
is its reward against its group's, ``A_i = (r_i - mean(r)) / (std(r) + 1e-4)`` with TRL's unbiased
std (``scale_rewards group``; ``batch`` divides by the whole batch's std, ``none`` by nothing), and the
clipped policy-gradient loss of ``loss_type`` is applied to every completion token. A group whose
rewards are all equal has zero advantage and teaches nothing; the report counts those groups.

Everything above is TRL's (tests/distill/rl/test_grpo_advantages.py checks the advantages it computes);
reasonkit adds, by subclassing without changing the loss:

- sampling from the policy itself: TRL's transformers generation runs inside the training step with
  dropout on and the LoRA adapter unmerged; ours samples in eval mode with the adapter merged where that
  is exact (fp32, unsharded; distill/sampling.py), as TRL's vLLM path does, 1.6x faster on the teacher;

- rollouts as data: every sampled completion, its per-function rewards and advantage, written to
  OUT/rollouts/ as a traces stage directory (distill/rl/rollouts.py);
- where the time goes: seconds in generation, in the reward functions and in the whole scoring pass
  (generation, rewards, log-prob passes) per step, logged beside TRL's ``step_time``;
- reward names as the user gave them (``rewards/accuracy/mean``, not the function's ``__name__``).

Device-aware defaults: on CPU TRL's transformers generation, fp32, no gradient checkpointing (TRL turns
bf16 and checkpointing on by default; student.trainer_args sets both explicitly); on CUDA, vLLM in
colocate mode (``use_vllm``: None = auto; a vLLM TRL cannot drive stops the run), in bf16 with checkpointing.
"""

from __future__ import annotations

import math
import time

from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from reasonkit.distill.levers import sampling_levers, trl_levers
from reasonkit.distill.rl.dynamic import DynamicSampling, flat_groups
from reasonkit.distill.sampling import SamplesFromThePolicy

#: TrainConfig fields passed to GRPOConfig under the same name and meaning.
SAME_NAMES = (
    "num_generations",
    "loss_type",
    "scale_rewards",
    "epsilon",
    "epsilon_high",
    "max_completion_length",
    "temperature",
    "top_p",
    "steps_per_generation",
    "num_iterations",
    "mask_truncated_completions",
)


def resolve_vllm(cfg, cuda: bool) -> bool:
    """``use_vllm`` as given, else on exactly when there is a GPU; a vLLM TRL cannot drive is refused
    either way on a GPU (distill/rl/vllm_support.py use_vllm says why: no silent fallback)."""
    from reasonkit.distill.rl.vllm_support import use_vllm

    return use_vllm(cfg, cuda)


def grpo_arguments(cfg, args: dict, *, longest_prompt: int | None = None) -> GRPOConfig:
    """The GRPOConfig, built before the model loads (ZeRO-3: see sft.sft_arguments).

    ``args``: student.trainer_args (device-aware precision and checkpointing, schedule, checkpoints).
    ``longest_prompt``: the lint's measure, sizing vLLM's context when ``max_prompt_length`` is not given.
    """
    args = {
        k: v for k, v in args.items() if k != "max_length"
    }  # GRPO has no max_length: prompts + max_completion_length
    levers = {k: v for k, v in trl_levers(cfg).items() if k in GRPOConfig.__dataclass_fields__}
    vllm = resolve_vllm(cfg, cuda=not args["use_cpu"])
    extra = sampling_levers(cfg, vllm=vllm, longest_prompt=longest_prompt)  # vLLM's settings, or generate's
    if cfg.tools:  # TRL's tool loop (distill/rl/tools.py)
        from reasonkit.distill.rl.tools import tool_calling_iterations

        extra["max_tool_calling_iterations"] = tool_calling_iterations(cfg)
    same = {name: getattr(cfg, name) for name in SAME_NAMES}
    return GRPOConfig(
        **args,
        **levers,
        **extra,
        **same,
        beta=cfg.kl_beta,
        use_vllm=vllm,
        reward_weights=[float(w) for w in cfg.rewards.values()],
    )


# long: TRL's GRPO trainer assembled in order (rewards, arguments, vLLM, callbacks), each reading the last
def build_grpo_trainer(
    cfg,
    model,
    tok,
    dataset,
    args: dict | GRPOConfig,
    peft_config,
    callbacks,
    *,
    rollouts=None,
    stamp: dict | None = None,
    record: bool = True,
) -> RolloutGRPOTrainer:
    """The trainer, its reward functions built from ``cfg.rewards``.

    ``record``: gather every generation's rollouts (all processes must agree); ``rollouts``: the
    :class:`reasonkit.distill.rl.rollouts.RolloutLog` the main process writes them to (None on the others);
    ``stamp``: the ``teacher`` and ``gen_config`` values its rows carry.
    """
    from reasonkit.distill.rl.tools import tool_functions
    from reasonkit.reward.functions import make_rewards
    from reasonkit.reward.model import ModelReward
    from reasonkit.think import opens_think

    config = args if isinstance(args, GRPOConfig) else grpo_arguments(cfg, args)
    # the rewards see what the trainer sees: whether the template opens <think> in the generation prompt
    # (completions then start inside it) and which tokens end a completion (TRL's eos_token_ids)
    probe = tok.apply_chat_template(
        [{"role": "user", "content": "1 + 1?"}], tokenize=False, add_generation_prompt=True
    )
    eos = model.generation_config.eos_token_id
    eos_ids = {tok.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}
    funcs, weights = make_rewards(
        dict(cfg.rewards),
        max_completion_length=cfg.max_completion_length,
        lang=cfg.lang,
        verifier=cfg.verifier,
        prefilled=opens_think(probe),
        eos_token_ids=eos_ids,
        reward_model=cfg.reward_model,
        trajectory=bool(cfg.tools),
    )
    if weights != list(config.reward_weights):
        raise ValueError(f"reward weights {weights} differ from the config's {config.reward_weights}")
    # a reward model scores in the policy's dtype: bf16 on a GPU (fp32 would hold twice the memory in every process)
    funcs = [f.in_dtype_of(model) if isinstance(f, ModelReward) else f for f in funcs]
    trainer = (DynamicGRPOTrainer if cfg.dynamic_sampling else RolloutGRPOTrainer)(
        model=model,
        reward_funcs=list(funcs),
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=callbacks,
        tools=tool_functions(cfg) if cfg.tools else None,  # TRL's tool loop (distill/rl/tools.py)
    )
    # TRL names a reward by its function's __name__; the user named it in --reward, and the report,
    # the logs (rewards/<name>/mean) and the rollouts' reward_<name> columns all use that name
    trainer.reward_func_names = list(cfg.rewards)
    trainer.keep_rollouts = record
    trainer.rollout_log = rollouts
    trainer.rollout_stamp = dict(stamp or {})
    trainer.add_callback(CommitRollouts(trainer, cfg.rollouts_every))
    if cfg.dynamic_sampling and trainer.accelerator.num_processes > 1:  # distill/rl/dynamic.py says why
        from reasonkit.errors import UserError

        raise UserError(
            f"--dynamic-sampling runs in one process; this run has {trainer.accelerator.num_processes} "
            "(drop it, or train on one GPU)"
        )
    trainer.dynamic_sampling = cfg.dynamic_sampling
    return trainer


class RolloutGRPOTrainer(SamplesFromThePolicy, GRPOTrainer):
    """TRL's GRPOTrainer that keeps its rollouts and times generation and rewards; the numbers are TRL's.

    Each override calls TRL's method and only reads what it returns, so the rewards, advantages and loss
    of given samples are exactly a plain GRPOTrainer's; the samples come from the policy in eval mode
    (distill/sampling.py), without the dropout noise TRL's transformers generation samples with.
    """

    rollout_log = None
    keep_rollouts = False
    rollout_stamp: dict = {}

    def _generate(self, prompts):
        start = time.perf_counter()
        result = super()._generate(prompts)
        self._timed("generate", start)
        self._sampled = result  # prompt_ids, completion_ids, tool_mask, completions, ...
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        start = time.perf_counter()
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._timed("reward", start)
        self._rewards_per_func = rewards  # (completions of every process, functions); NaN where a function said None
        return rewards

    def _generate_and_score_completions(self, inputs):
        start = time.perf_counter()
        output = super()._generate_and_score_completions(inputs)
        self._timed("score", start)
        mode = "train" if self.model.training else "eval"
        logged = self._metrics[mode].get("frac_reward_zero_std")
        if logged and getattr(self, "_rewards_per_func", None) is not None:
            # TRL tests std == 0 with torch.isclose (atol 1e-8); the std of equal sums such as 1.0 + 0.2
            # comes out ~1e-8, not 0, so its share read 0% for any non-dyadic weight: count it here
            logged[-1] = zero_variance_share(
                self._rewards_per_func.tolist(), self.reward_weights.tolist(), self.num_generations
            )
        if self.model.training and self.keep_rollouts:
            self._record(inputs, output)
        return output

    def _timed(self, what: str, start: float) -> None:
        mode = "train" if self.model.training else "eval"
        self._metrics[mode][f"time/{what}"].append(time.perf_counter() - start)

    def _record(self, inputs: list[dict], output: dict) -> None:
        """Rows for OUT/rollouts from this generation; every process takes part in the gathers."""
        from accelerate.utils import gather_object

        prompt_ids, completion_ids, tool_mask, completions = self._sampled[:4]
        stops = {*self.eos_token_ids, self._tokenizer.pad_token_id}
        if self.tools:  # trajectories rows: every turn, call and observation
            from reasonkit.distill.rl.tools import trajectory_rows

            local = trajectory_rows(inputs, completions, prompt_ids, completion_ids, tool_mask, stops, self.tools)
        else:
            local = [
                rollout_row(x, c, p, ids, stops)
                for x, c, p, ids in zip(inputs, completions, prompt_ids, completion_ids, strict=True)
            ]
        rows = gather_object(local)  # every process's completions, in the order TRL gathered the rewards
        advantages = self.accelerator.gather(output["advantages"]).tolist()
        rewards = self._rewards_per_func.tolist()
        if self.rollout_log is None:
            return
        from reasonkit.think import split

        weights = self.reward_weights.tolist()
        step = self.state.global_step + 1  # the optimizer step this generation first trains
        for i, row in enumerate(rows):
            scores = [None if math.isnan(v) else v for v in rewards[i]]
            reasoning, response = split(row["completion"], prefilled=self._prefilled(inputs[0]["prompt"]))
            if self.tools:  # the final answer as the accuracy reward reads it; the messages hold every turn
                del row["completion"]
            else:
                row["reasoning"] = reasoning
            row.update(  # sample: numbered by the log, per prompt over the run (rollouts.py)
                response=response,
                step=step,
                advantage=advantages[i],
                **self.rollout_stamp,
                # TRL's sum: weighted, None rewards left out, None when every function said None
                reward=None
                if all(s is None for s in scores)
                else sum(w * s for w, s in zip(weights, scores) if s is not None),
                **{f"reward_{name}": s for name, s in zip(self.reward_func_names, scores, strict=True)},
            )
        self.rollout_log.add(rows)

    def _prefilled(self, prompt: list[dict]) -> bool:
        """Whether the chat template opens ``<think>`` in the generation prompt (R1's, QwQ's): the completion then
        starts inside the block, as think.py's split needs to know. The template decides, so once a run."""
        if not hasattr(self, "_opens_think"):
            from reasonkit.think import opens_think

            text = self._tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            self._opens_think = opens_think(text)
        return self._opens_think


class DynamicGRPOTrainer(DynamicSampling, RolloutGRPOTrainer):
    """``--dynamic-sampling``: each round of DAPO's sampling is a RolloutGRPOTrainer generation (its rollouts
    kept, its rewards read), the batch joined from their groups with reward variance (distill/rl/dynamic.py)."""


class CommitRollouts(TrainerCallback):
    """Commits the buffered rollouts before each checkpoint is written (and every ``every`` steps, and at
    the end): a kill loses only rows of steps after the last checkpoint, which the resumed run samples again."""

    def __init__(self, trainer: RolloutGRPOTrainer, every: int | None):
        self.trainer, self.every = trainer, every

    def on_step_end(self, args, state, control, **kwargs):
        log = self.trainer.rollout_log
        if log is not None and (control.should_save or (self.every and state.global_step % self.every == 0)):
            log.commit()

    def on_train_end(self, args, state, control, **kwargs):
        from reasonkit.reward import functions as rewards

        if self.trainer.rollout_log is not None:
            self.trainer.rollout_log.commit()
        rewards.close()  # the verifier's process pool (it restarts if another run needs it)


def zero_variance_share(
    rewards_per_func: list[list[float]], weights: list[float], group: int, tol: float = 1e-6
) -> float:
    """The share of groups (``group`` consecutive completions) whose weighted rewards are all equal
    (within ``tol``): their advantages are zero. NaN (a function's None) is left out of a sum, as
    TRL sums; a completion every function left unscored is left out of its group.

    >>> zero_variance_share([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]], [1.0, 0.2], group=2)
    0.5
    """
    flags = flat_groups(rewards_per_func, weights, group, tol)
    return sum(flags) / len(flags) if flags else 0.0


def rollout_row(example: dict, completion, prompt_ids, completion_ids, stops: set) -> dict:
    """A rollout's row before its rewards: the completion's text read as the rewards read it
    (reward/completions.py: a split-off ``reasoning_content`` is put back as a think block).

    >>> r = rollout_row({"id": "p", "prompt": []}, [{"role": "assistant", "content": "4", "reasoning_content": "2+2"}], [1], [5, 2], {2})
    >>> r["completion"], r["finish_reason"]
    ('<think>\\n2+2\\n</think>\\n\\n4', 'stop')
    """  # noqa: E501
    from reasonkit.reward.completions import completion_text

    return {
        "id": example["id"],
        "messages": example["prompt"],
        "answer": example.get("answer"),
        "source": example.get("source"),
        "completion": completion_text(completion),
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": len(completion_ids),
        "finish_reason": "stop" if completion_ids and completion_ids[-1] in stops else "length",
    }
