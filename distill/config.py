"""``distill train``'s settings: one frozen dataclass, checked before any model loads.

Light on purpose (no torch, no transformers): the CLI builds it from flags and ``--set key=value``,
and a recipe builds it from YAML with :func:`reasonkit.config.from_dict`, both before any heavy import.

>>> cfg = TrainConfig(method="sft", student="m", data="d", out="o")
>>> cfg.learning_rate, cfg.is_lora
(0.0002, True)
>>> TrainConfig(method="dpo", student="m", data="d", out="o", full=True).learning_rate
1e-06
>>> TrainConfig(method="sft", student="m", data="d", out="o", batch_size=0)
Traceback (most recent call last):
...
reasonkit.errors.FieldErrors: batch_size: must be >= 1, found 0
>>> g = TrainConfig(method="grpo", student="m", data="d", out="o")
>>> g.learning_rate, g.kl_beta, g.rewards, g.generation_batch_size()
(1e-05, 0.0, {'accuracy': 1.0, 'format': 0.2}, 8)
>>> TrainConfig(method="grpo", student="m", data="d", out="o", batch_size=4, num_generations=8)
Traceback (most recent call last):
...
reasonkit.errors.FieldErrors: num_generations: 8 must divide the generation batch (batch_size 4 x steps_per_generation 1 x 1 processes = 4 completions): every prompt's group of 8 completions must fit in it
"""  # noqa: E501

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Literal

from reasonkit.config import Checks, setting
from reasonkit.distill.trackers import REPORT_TO
from reasonkit.gen.render import R1_INSTRUCTION

#: Learning rates when ``lr`` is not given, by (method, full fine-tuning). LoRA wants roughly 10x the
#: full-parameter rate (its update is low-rank and starts at zero); DPO wants far less than SFT,
#: since it pushes log-ratios that grow without bound (TRL's DPO default is 1e-6 for full weights).
#: GRPO: TRL's default for full weights (1e-6, open-r1's and DeepSeek-R1's RL rate, whose policy-gradient
#: steps are noisy and compound over thousands of steps), and the usual 10x for LoRA ("LoRA Without
#: Regret" measured the best LoRA rate at ~10x the full one for RL as for SFT).
#: Reward models (rm, prm): TRL's RewardConfig default (1e-4) with LoRA, and 1e-5 for full weights (InstructGPT's
#: reward model trained at 9e-6): the head starts random, the body only needs nudging.
#: On-policy distillation: TRL's DistillationConfig default for full weights (1e-6), and 10x for LoRA.
DEFAULT_LR = {
    ("sft", False): 2e-4,
    ("sft", True): 2e-5,
    ("dpo", False): 2e-5,
    ("dpo", True): 1e-6,
    ("grpo", False): 1e-5,
    ("grpo", True): 1e-6,
    ("rm", False): 1e-4,
    ("rm", True): 1e-5,
    ("prm", False): 1e-4,
    ("prm", True): 1e-5,
    ("distill", False): 1e-5,
    ("distill", True): 1e-6,
}
#: beta when not given: DPO's temperature (TRL's 0.1); GRPO's KL weight, 0 = no reference model (TRL's default,
#: DAPO and Dr. GRPO drop the KL term; R1 used 0.001); distill's generalized JSD, 1 = reverse KL (TRL's default).
DEFAULT_BETA = {"sft": 0.1, "dpo": 0.1, "grpo": 0.0, "rm": 0.0, "prm": 0.0, "distill": 1.0}
#: GRPO rewards when none are named (reasonkit.reward.functions): R1-Zero's rule-based pair. Format weighs
#: 0.2 so a well-formed wrong answer never outscores a correct one, whatever its form.
DEFAULT_REWARDS = {"accuracy": 1.0, "format": 0.2}

#: Where GRPO's vLLM server is (vllm_mode server; TRL's GRPOConfig fields of the same names): they say where
#: completions are sampled, not what is trained, so they are not fingerprinted.
VLLM_SERVER_FIELDS = ("vllm_server_base_url", "vllm_server_host", "vllm_server_port", "vllm_server_timeout")
#: Fingerprinted as their product with the process count (the global batch): how a batch is split
#: between devices and accumulation steps changes memory, not the optimizer's steps, so a run that
#: hit OOM resumes with batch_size halved and grad_accum doubled, or on 4 GPUs instead of 8.
BATCH_SPLIT = ("batch_size", "grad_accum")


@dataclass(frozen=True, kw_only=True)
class LoraSettings:
    """LoRA through peft (distill/student.py); ignored with full=True."""

    lora_r: int = setting(16, "LoRA rank.")
    lora_alpha: int = setting(32, "LoRA alpha.")
    lora_dropout: float = setting(0.05, "LoRA dropout.")
    # peft's shorthand, or comma-separated module names
    target_modules: str = setting("all-linear", "LoRA target modules, comma-separated.")
    full: bool = setting(False, "Full fine-tuning instead of LoRA.")


@dataclass(frozen=True, kw_only=True)
class GrpoSettings:
    """GRPO's own settings (TRL's GRPOTrainer; distill/rl/grpo.py): fingerprinted for GRPO runs only."""

    # GRPO (TRL's GRPOTrainer; distill/rl/grpo.py). batch_size counts completions, as TRL's does: a step of
    # batch_size 8 x grad_accum 8 trains on 64 completions, i.e. 8 prompts of num_generations 8.
    # G, completions per prompt: the group whose rewards are compared
    num_generations: int = setting(8, "GRPO: completions sampled per prompt, G.")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = setting("dapo", "GRPO loss.")
    scale_rewards: Literal["group", "batch", "none"] = setting(
        "group", "GRPO: divide advantages by the group's reward std, the batch's, or nothing."
    )
    # the clip range of the probability ratio
    epsilon: float = setting(0.2, "GRPO: clip range of the probability ratio.")
    epsilon_high: float | None = None  # None: epsilon; DAPO's clip-higher uses 0.28
    max_completion_length: int = setting(256, "GRPO, distill: tokens per sampled completion.")
    # distill: also the temperature of both distributions in the divergence (TRL's)
    temperature: float = setting(1.0, "GRPO, distill: sampling temperature.")
    top_p: float = 1.0
    rewards: dict = field(default_factory=lambda: dict(DEFAULT_REWARDS))  # name -> weight (reward/functions.py)
    reward_model: str | None = None  # the rm reward's model (--reward rm=PATH[:WEIGHT]; reward/model.py)
    lang: str = "en"  # the language reward's target
    verifier: Literal["math", "int", "exact"] = (
        "math"  # the accuracy reward's Verifier, as `distill filter --verifier`
    )
    steps_per_generation: int | None = None  # None: grad_accum (TRL's); one generation feeds this many steps
    num_iterations: int = 1  # optimizer passes over each generation (mu in the GRPO paper)
    mask_truncated_completions: bool = False  # DAPO: completions cut at max_completion_length train nothing
    dynamic_sampling: bool = setting(
        False,
        "GRPO: DAPO's dynamic sampling: groups whose rewards are all equal are dropped and more prompts drawn until "
        "the batch is full (distill/rl/dynamic.py; one process).",
        flag="--dynamic-sampling/--no-dynamic-sampling",
    )
    instruction: str | None = R1_INSTRUCTION  # appended to a prompt's problem text, as `distill generate` does
    system: str | None = None


@dataclass(frozen=True, kw_only=True)
class GrpoRunSettings:
    """Where and how GRPO samples (its vLLM, rollouts' commits): not what is trained, never fingerprinted."""

    max_prompt_length: int | None = None  # None: the longest prompt (the lint measures it); sizes vLLM's context
    use_vllm: bool | None = None  # None: on when CUDA is there and vllm imports
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = 0.3
    # vllm_mode server: the `trl vllm-serve` to sample from, by URL ("http://node1:8000") or by host and port (None:
    # TRL's defaults, 0.0.0.0:8000), and how long to wait for it to come up (None: TRL's 240 s; a 7B loads in ~1 min)
    vllm_server_base_url: str | None = None
    vllm_server_host: str | None = None
    vllm_server_port: int | None = None
    vllm_server_timeout: float | None = None
    # commit OUT/rollouts every N steps, at every checkpoint and at the end (None: checkpoints and end only); a
    # step of 512 R1-length completions holds ~16 MB of text, so waiting for a checkpoint would hold gigabytes
    rollouts_every: int | None = 10


@dataclass(frozen=True, kw_only=True)
class GrpoToolSettings:
    """GRPO with tools: fingerprinted when a run names tools."""

    # GRPO with tools: TRL's tool loop (GRPOTrainer(tools=...)) runs the shipped tools between the policy's turns,
    # as `distill generate --tools` does; the observations' tokens are masked out of the loss (distill/rl/tools.py)
    # comma-separated: search,python (gen/tools/base.py)
    tools: str | None = setting(
        None,
        "GRPO: comma-separated tools the policy calls between its turns (search,python), run by TRL's "
        "tool loop as `distill generate --tools` runs them; tool results are masked out of the loss [none].",
    )
    # the search tool's passages: JSONL or Parquet with id and contents
    corpus: str | None = setting(None, "GRPO --tools search: the passages, JSONL or Parquet with id and contents.")
    # assistant turns per completion (TRL's max_tool_calling_iterations = max_turns - 1)
    max_turns: int = setting(8, "GRPO --tools: assistant turns per completion.")
    tool_timeout: float = 10.0  # seconds per python call
    # passages per search observation, as generate and eval show them (the agent teacher reads 1)
    search_k: int = setting(3, "GRPO --tools search: passages per observation.")


@dataclass(frozen=True, kw_only=True)
class ScorerSettings:
    """The reward models' own settings: fingerprinted for rm and prm runs only."""

    # Reward models: rm (TRL's RewardTrainer, distill/reward/rm.py) and prm (token classification, distill/reward/prm.py).  # noqa: E501
    # share of the rows held out (seeded) for the report's held-out accuracy; 0: none
    eval_share: float = setting(0.1, "rm, prm: share of the prompts held out for the report's accuracy.")
    # rm: the loss is -log sigmoid(r_c - r_r - m) with m = margin_scale x (chosen_score - rejected_score) where both
    # scores are present (0 where not); 0 turns margins off. pairs writes 1/0 (verified), judge its rubric's points.
    margin_scale: float = setting(
        1.0, "rm: margin = this x (chosen_score - rejected_score) where both are given; 0: no margin."
    )
    # rm: + coef x mean(r^2), rewards near zero (TRL; 0.01 suggested)
    center_rewards_coefficient: float | None = setting(
        None, "rm: TRL's weight on mean(reward^2), rewards near zero [off; 0.01 suggested]."
    )
    # prm: joins the steps; each step's label sits on its last token (the separator's)
    step_separator: str = setting(
        "\n",
        "prm: the text joining the steps, as label-steps' --separator (\\n, \\t read as "
        "newline, tab); each step is labelled at its last token [newline].",
        show_default=False,
    )


@dataclass(frozen=True, kw_only=True)
class OnPolicySettings:
    """On-policy distillation's teacher (``--method distill``, distill/onpolicy/): fingerprinted for distill runs only.

    It samples with GRPO's fields under TRL's names (``temperature``, ``top_p``, ``max_completion_length``,
    ``instruction``, ``system``, ``use_vllm`` and the vLLM fields); ``beta`` is TRL's DistillationConfig beta, the
    interpolation of the generalized JSD (0 forward KL, 0.5 JSD, 1 reverse KL), not a KL penalty.
    """

    # a model directory or Hub id sharing the student's vocabulary (TRL's teacher_model_name_or_path)
    teacher: str | None = setting(
        None,
        "distill: the teacher model directory or Hub id; a copy in every training process scores each token the "
        "student samples (TRL's DistillationTrainer). Same vocabulary as the student.",
    )
    # where, not what (not fingerprinted): the served model's name is recorded in the report
    teacher_url: str | None = setting(
        None,
        "distill: the teacher behind vLLM's OpenAI-compatible server (http://host:8000) instead of a local copy; "
        "its top-k log-probs per token are the target (TRL's server distillation).",
    )
    # --teacher-url: the teacher's tokens a position (vLLM's prompt_logprobs) the loss spans; beta > 0 needs 1
    # (TRL's ServerDistillationConfig loss_top_k)
    loss_top_k: int = 1
    # --teacher-url: a bucket for the probability mass outside the top-k (TRL's loss_add_tail)
    loss_add_tail: bool = True


@dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """How the run is launched: not fingerprinted (the global batch is, instead)."""

    # Several processes (distill/launch.py). "accelerate": training runs as a subprocess under
    # `accelerate launch` with num_processes processes (None: every GPU of `gpus`) and an accelerate
    # config: a shipped one by name (ddp, fsdp, zero3: recipes/accelerate/) or a YAML path. "auto": the same on
    # a machine with more than one GPU of `gpus` (TRL's SFT, DPO and reward trainers refuse to run in one process
    # that sees several GPUs: nn.DataParallel), in this process otherwise. "none": one process (on the first GPU of
    # `gpus`). batch_size x grad_accum x (num_processes, else 1) is the global batch: on another process count the
    # per-device batch and accumulation are split again to keep it (launch.layout).
    launcher: Literal["auto", "none", "accelerate"] = "auto"
    num_processes: int | None = None  # every machine's together, as accelerate counts them
    accelerate_config: str | None = None
    # The GPUs to train on, by index among those this process sees ([0, 1] or "0,1"; the only ones the training
    # processes see); None: every visible GPU.
    gpus: list[int] | str | None = None
    # Several machines (accelerate launch on each, distill/launch.py): machine_rank, the main machine's address and
    # port; None: from Slurm's environment (SLURM_NODEID, MASTER_ADDR or the job's first node, MASTER_PORT or 29500)
    num_machines: int = 1
    machine_rank: int | None = None
    main_process_ip: str | None = None
    main_process_port: int | None = None


def field_names(group: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(group))


#: Keys that do not change what a run computes; a resumed run may differ from its start in these.
NOT_FINGERPRINTED = (
    "resume",
    "overwrite",
    "merge",
    "threads",
    "lint",
    "lint_rows",
    "save_total_limit",
    "report_to",
    "dataset_num_proc",
    "gpu_memory_gb",
    *field_names(GrpoRunSettings),
)
#: GRPO with tools (distill/rl/tools.py).
TOOL_FIELDS = field_names(GrpoToolSettings)
#: GRPO's own settings: left out of the fingerprint of the other methods' runs, whose computation they do not touch.
GRPO_FIELDS = (*field_names(GrpoSettings), *TOOL_FIELDS)
#: The reward models' own settings (distill/reward/rm.py, distill/reward/prm.py): left out of the other methods' fingerprints.  # noqa: E501
SCORER_FIELDS = field_names(ScorerSettings)
#: On-policy distillation's teacher: left out of the other methods' fingerprints, whose computation it does not
#: touch; distill samples with GRPO's sampling fields (the others of GRPO_FIELDS are left out of its own).
ONPOLICY_FIELDS = field_names(OnPolicySettings)
DISTILL_SAMPLING = ("max_completion_length", "temperature", "top_p", "instruction", "system")
#: How the run is launched (distill/launch.py). Not fingerprinted: what they change about the
#: training is the global batch, and :meth:`TrainConfig.fingerprinted` records that instead.
LAUNCH_FIELDS = field_names(LaunchSettings)


@dataclass(frozen=True)
class TrainConfig(
    LoraSettings,
    GrpoSettings,
    GrpoRunSettings,
    GrpoToolSettings,
    ScorerSettings,
    OnPolicySettings,
    LaunchSettings,
):
    method: Literal["sft", "dpo", "grpo", "rm", "prm", "distill"] = setting(
        help="SFT on sft rows, DPO on prefs rows, GRPO on prompts with verifiable answers, a reward model (rm) on "
        "prefs rows, a process reward model (prm) on steps rows, or on-policy distillation (distill) from --teacher "
        "on prompts."
    )
    # a model directory or Hub id (not a LoRA adapter: merge it first)
    student: str = setting(help="Student model directory or Hub id.")
    # sft: an sft table; dpo: a prefs table (a stage directory, or Parquet/JSONL in that format); grpo: prompts
    # read as `distill generate` reads them (Parquet/JSONL/CSV, a stage directory, a Hub dataset id); rm: a prefs
    # table or TRL's standard (string) prefs; prm: a steps table (prompt, completions, labels: stepwise supervision)
    data: str = setting(
        help="An sft (SFT) or prefs (DPO, rm) stage directory, or Parquet/JSONL in that format; GRPO: prompts as "
        "`distill generate` reads them (Parquet/JSONL/CSV, a stage directory, a Hub id) with an answer column; rm "
        "also "
        "takes TRL's string prefs (prompt/chosen/rejected strings); prm: a steps table (prompt, completions, labels)."
    )
    out: str = setting(
        help="Output directory: adapter/ (or model/ with --full), checkpoints/, report.json, loss.png (rm/prm: "
        "report.md with held-out accuracy)."
    )

    # Schedule. max_steps, when given, overrides epochs.
    epochs: float = setting(1.0, "Passes over the data.")
    max_steps: int | None = setting(None, "Optimizer steps (overrides --epochs).")
    # None: DEFAULT_LR for (method, full)
    lr: float | None = setting(
        None,
        "Peak learning rate [sft 2e-4 / dpo 2e-5 / grpo, distill 1e-5 / rm, prm 1e-4 with LoRA; "
        "2e-5 / 1e-6 / 1e-6 / 1e-5 full].",
    )
    batch_size: int = setting(8, "Examples (DPO: pairs; GRPO: completions) per device per step.")
    grad_accum: int = setting(1, "Gradient accumulation steps.")
    # None: min(4096, the student's max_position_embeddings)
    max_length: int | None = setting(None, "Token limit per example [min(4096, the student's context)].")
    # SFT only: best-fit-decreasing packing into rows of max_length
    packing: bool = setting(False, "SFT: pack examples best-fit decreasing.", flag="--packing/--no-packing")
    # SFT only: distill/kd.py; the sft table carries the teacher's top-K (distill generate --logprobs)
    kd_weight: float = setting(
        0.0, "SFT: weight of a sparse forward KL to the teacher's stored top-K log-probs beside the cross-entropy."
    )
    warmup: float = 0.03  # a ratio of the steps when < 1, else a step count
    lr_scheduler: str = "cosine"
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0

    # DPO (and beta for GRPO)
    # None: DEFAULT_BETA[method]; DPO's temperature, GRPO's KL weight
    beta: float | None = setting(
        None,
        "DPO beta [0.1]; GRPO: KL weight to the reference [0: no reference model]; distill: the generalized JSD, 0 "
        "forward KL, 0.5 JSD, 1 reverse KL [1].",
    )
    loss: Literal["sigmoid", "ipo"] = setting("sigmoid", "DPO loss.")
    # reference log-probs computed once before training
    precompute_ref: bool = setting(False, "DPO: score pairs with the reference once, before training.")
    # RPO (Pang et al. 2024, arXiv 2404.19733): add rpo_alpha x the NLL of the chosen completion.
    # Plain DPO can lower the chosen answer's likelihood while the margin grows; on near-identical
    # pairs (a slip in one digit) that erodes the shared procedure. The NLL term anchors it.
    rpo_alpha: float = 0.0

    # Output, checkpoints, resume
    # also write OUT/merged: the adapter folded into the base weights
    merge: bool = setting(False, "Also write OUT/merged: the adapter folded into the weights.")
    resume: bool = setting(False, "Continue the run in OUT from its last complete checkpoint.")
    overwrite: bool = setting(False, "Delete the run in OUT and start over.")
    seed: int = setting(0, "Seed for data order and initialisation.")
    save_steps: int = 200
    save_total_limit: int = 2
    # trackers to log the run to (distill/trackers.py): tensorboard, wandb, trackio, mlflow, several at once (a list or
    # "tensorboard,wandb"); None or "none": none. Each is an extra, checked before any work.
    report_to: list[str] | str | None = setting(
        None,
        "Log the training curves and the run's protocol to a tracker, repeatable (each an extra: pip "
        "install 'reasonkit[wandb]'); TensorBoard writes OUT/tensorboard [none].",
        choices=REPORT_TO,
        multiple=True,
    )

    # Template and the pre-training lint
    chat_template: str | None = None  # a .jinja file with {% generation %} markers, replacing the student's
    pad_token: str | None = None  # a token already in the vocabulary to pad with (must not be EOS)
    lint: Literal["error", "warn", "off"] = "error"
    lint_rows: int = 2000  # rows the lint tokenizes (evenly spaced) on a large dataset
    max_truncated_share: float = 0.05  # lint fails when more examples than this exceed max_length

    # Device. None means device-aware: CUDA -> bf16 + gradient checkpointing; CPU -> fp32, neither.
    device: Literal["auto", "cpu", "cuda"] = "auto"
    bf16: bool | None = None
    gradient_checkpointing: bool | None = None
    # sdpa, flash_attention_2 (pip install flash-attn: a source build), a kernels-community/ hub kernel, or auto:
    # FlashAttention 2 where flash-attn imports on a GPU, SDPA otherwise (levers.resolve_attention; the train report
    # records the one used), so a recipe runs on a node where flash-attn did not build
    attn_implementation: str = "sdpa"
    threads: int | None = None  # torch CPU threads; 1 is fastest for tiny models on a busy machine
    allow_incomplete: bool = False  # train on an unfinished stage directory

    # Memory levers for long traces (R1's run to 16k-32k tokens), passed to TRL (distill/levers.py);
    # the lint estimates the peak per GPU with them (distill/lint/memory.py).
    use_liger_kernel: bool = False  # Liger's fused linear cross-entropy: the logits are never whole in memory
    padding_free: bool = False  # SFT with packing: TRL's flattened batches (FlashAttention's varlen kernels)
    lr_scheduler_kwargs: dict | None = None  # e.g. {min_lr_rate: 0.1} for lr_scheduler cosine_with_min_lr
    gradient_checkpointing_kwargs: dict | None = None  # e.g. {use_reentrant: false}
    dataset_num_proc: int | None = None  # processes tokenizing the dataset
    gpu_memory_gb: float | None = (
        None  # the GPU the lint's memory estimate must fit (None: torch.cuda's, when present)
    )

    def __post_init__(self) -> None:
        check = Checks()
        self._check_counts(check)
        self._check_objective(check)
        self._check_levers(check)
        check.run(lambda: self.trackers)  # a name that is no tracker
        self._check_distill(check)
        if self.method == "grpo":
            self._check_grpo(check)
        else:
            check(
                not (self.tools or self.corpus),
                "tools",
                f"tools and corpus apply to --method grpo (SFT reads the tools a trajectory was generated with "
                f"from its table), found method {self.method}",
            )
        self._check_launch(check)
        check.done()

    def _check_counts(self, check: Checks) -> None:
        for name in (
            "lora_r",
            "lora_alpha",
            "batch_size",
            "grad_accum",
            "save_steps",
            "save_total_limit",
            "lint_rows",
        ):
            check(getattr(self, name) >= 1, name, f"must be >= 1, found {getattr(self, name)}")
        for name in ("max_steps", "max_length", "threads", "num_processes", "dataset_num_proc"):
            value = getattr(self, name)
            check(value is None or value >= 1, name, f"must be >= 1 when given, found {value}")
        check(self.epochs > 0, "epochs", f"must be > 0, found {self.epochs}")
        check(self.lr is None or self.lr > 0, "lr", f"must be > 0, found {self.lr}")
        check(0 <= self.lora_dropout < 1, "lora_dropout", f"must be in [0, 1), found {self.lora_dropout}")
        check(self.warmup >= 0, "warmup", f"must be >= 0, found {self.warmup}")
        check(0 <= self.eval_share < 1, "eval_share", f"must be in [0, 1), found {self.eval_share}")
        check(
            0 <= self.max_truncated_share <= 1,
            "max_truncated_share",
            f"must be in [0, 1], found {self.max_truncated_share}",
        )

    def _check_objective(self, check: Checks) -> None:
        """What the loss and the data need: beta, RPO, packing, the reward models' margins, the PRM's steps."""
        check(not (self.method == "dpo" and self.kl_beta <= 0), "beta", f"must be > 0 for DPO, found {self.kl_beta}")
        check(self.kl_beta >= 0, "beta", f"must be >= 0, found {self.kl_beta}")
        check(self.rpo_alpha >= 0, "rpo_alpha", f"must be >= 0, found {self.rpo_alpha}")
        check(
            not self.packing or self.method == "sft",
            "packing",
            "applies to --method sft only (DPO pairs are scored whole)",
        )
        check(
            not self.dynamic_sampling or self.method == "grpo",
            "dynamic_sampling",
            f"applies to --method grpo (its groups of num_generations), not {self.method}",
        )
        check(
            not self.kd_weight
            or (self.method == "sft" and self.kd_weight > 0 and not self.packing and not self.use_liger_kernel),
            "kd_weight",
            f"applies to --method sft without packing or use_liger_kernel, as a weight > 0, found {self.kd_weight} "
            "(its targets sit at each row's token positions, which packing moves; the KL needs the full logits)",
        )
        check(
            self.margin_scale >= 0 and (self.center_rewards_coefficient or 0) >= 0,
            "margin_scale",
            f"margin_scale and center_rewards_coefficient must be >= 0, found {self.margin_scale} and "
            f"{self.center_rewards_coefficient}",
        )
        check(
            bool(self.step_separator),
            "step_separator",
            "must not be empty (the PRM reads each step's label at its last token)",
        )

    def _check_launch(self, check: Checks) -> None:
        """The launcher, the processes and the machines, and the GPUs they name."""
        check(
            self.launcher == "accelerate" or not (self.num_processes or self.num_machines != 1),
            "launcher",
            "num_processes and num_machines apply with launcher: accelerate only",
        )
        check(
            not (self.launcher == "none" and self.accelerate_config),
            "accelerate_config",
            "applies with launcher: accelerate or auto only",
        )
        machines_ok = self.num_machines >= 1 and (
            self.machine_rank is None or 0 <= self.machine_rank < self.num_machines
        )
        check(
            machines_ok,
            "num_machines",
            f"num_machines must be >= 1 and machine_rank in [0, num_machines), found {self.num_machines} "
            f"and {self.machine_rank}",
        )
        try:
            gpus = self.gpu_indices
        except ValueError as e:
            check(False, "gpus", str(e))
            gpus = None
        if not machines_ok:  # the counts below divide by num_machines
            return
        check(
            gpus is None or not self.num_processes or len(gpus) * self.num_machines == self.num_processes,
            "gpus",
            f"gpus {self.gpus} on each of {self.num_machines} machine(s) is "
            f"{len(gpus or ()) * self.num_machines} processes, but num_processes is {self.num_processes}; "
            "expected them equal (or leave one unset)",
        )
        check(
            not (self.num_processes and self.num_processes % self.num_machines),
            "num_processes",
            f"num_processes {self.num_processes} (every machine's) must be a multiple of num_machines "
            f"{self.num_machines}",
        )

    def _check_levers(self, check: Checks) -> None:
        from reasonkit.distill.levers import AUTO, is_flash_attention

        check(
            self.gpu_memory_gb is None or self.gpu_memory_gb > 0,
            "gpu_memory_gb",
            f"must be > 0 when given, found {self.gpu_memory_gb}",
        )
        check(
            self.lr_scheduler != "cosine_with_min_lr"
            or bool({"min_lr", "min_lr_rate"} & set(self.lr_scheduler_kwargs or {})),
            "lr_scheduler",
            "cosine_with_min_lr needs lr_scheduler_kwargs with min_lr_rate (a share of the peak, "
            "open-r1: 0.1) or min_lr",
        )
        if not self.padding_free:
            return
        check(
            self.method == "sft" and self.packing,
            "padding_free",
            "applies to --method sft with packing (TRL 1.16 cannot cut unpacked "
            "padding-free rows to max_length, and its DPO trainer has padding-free disabled)",
        )
        check(
            is_flash_attention(self.attn_implementation) or self.attn_implementation == AUTO,
            "padding_free",
            f"needs a FlashAttention attn_implementation (flash_attention_2, "
            f"kernels-community/flash-attn3, ..., or auto: padding-free where it resolves to "
            f"FlashAttention), found {self.attn_implementation!r}: under it a flattened batch is one "
            "B*L x B*L attention mask",
        )

    def _check_grpo(self, check: Checks) -> None:
        check(
            self.num_generations >= 2,
            "num_generations",
            f"must be >= 2 (GRPO compares each completion with the others of its group), found {self.num_generations}",
        )
        for name in ("max_completion_length", "num_iterations"):
            check(getattr(self, name) >= 1, name, f"must be >= 1, found {getattr(self, name)}")
        for name in ("max_prompt_length", "steps_per_generation", "rollouts_every"):
            value = getattr(self, name)
            check(value is None or value >= 1, name, f"must be >= 1 when given, found {value}")
        check(
            self.epsilon > 0 and (self.epsilon_high is None or self.epsilon_high >= self.epsilon),
            "epsilon",
            f"epsilon must be > 0 and epsilon_high >= epsilon, found {self.epsilon} and {self.epsilon_high}",
        )
        check(
            self.temperature > 0 and 0 < self.top_p <= 1,
            "temperature",
            f"temperature must be > 0 and top_p in (0, 1], found {self.temperature} and {self.top_p}",
        )
        check(
            0 < self.vllm_gpu_memory_utilization <= 1,
            "vllm_gpu_memory_utilization",
            f"must be in (0, 1], found {self.vllm_gpu_memory_utilization}",
        )
        self._check_vllm_server(check)
        self._check_rewards(check)
        self._check_tools(check)
        processes = self.num_processes or 1  # the processes the batch counts; launch.layout keeps it on any other
        batch = self.generation_batch_size(processes)
        check(
            self.num_generations < 1 or not batch % self.num_generations,
            "num_generations",
            f"{self.num_generations} must divide the generation batch (batch_size {self.batch_size} x "
            f"steps_per_generation {self.steps_per_generation or self.grad_accum} x {processes} processes = "
            f"{batch} completions): every prompt's group of {self.num_generations} completions must fit in it",
        )

    def _check_distill(self, check: Checks) -> None:
        """On-policy distillation's teacher and divergence; the teacher fields belong to --method distill."""
        if self.method != "distill":
            given = [name for name in ("teacher", "teacher_url") if getattr(self, name)]
            check(
                not given,
                given[0] if given else "teacher",
                f"applies to --method distill only, found method {self.method}",
            )
            return
        check(
            bool(self.teacher) != bool(self.teacher_url),
            "teacher",
            "--method distill needs a teacher: --teacher MODEL (scored here) or --teacher-url URL (a vLLM server)"
            if not (self.teacher or self.teacher_url)
            else "--teacher or --teacher-url, not both (one teacher scores the student's tokens)",
        )
        check(
            self.kl_beta <= 1,
            "beta",
            f"for --method distill beta interpolates the divergence (0 forward KL, 0.5 JSD, 1 reverse KL) and must "
            f"be in [0, 1], found {self.kl_beta}",
        )
        check(
            self.max_completion_length >= 1,
            "max_completion_length",
            f"must be >= 1, found {self.max_completion_length}",
        )
        check(
            self.temperature > 0 and 0 < self.top_p <= 1,
            "temperature",
            f"temperature must be > 0 and top_p in (0, 1], found {self.temperature} and {self.top_p}",
        )
        url = self.teacher_url
        check(
            url is None or url.startswith(("http://", "https://")),
            "teacher_url",
            f"must be an http:// or https:// URL (e.g. http://node1:8000), found {url!r}",
        )
        check(self.loss_top_k >= 1, "loss_top_k", f"must be >= 1 (a served teacher's top-k), found {self.loss_top_k}")
        check(
            not (url and self.kl_beta > 0 and self.loss_top_k != 1),
            "loss_top_k",
            f"with --teacher-url and beta > 0 the loss is over the teacher's top-1 token (TRL's server distillation), "
            f"found loss_top_k {self.loss_top_k}; set beta 0 (forward KL) for a top-k support",
        )

    def _check_rewards(self, check: Checks) -> None:
        from reasonkit.reward.functions import REWARDS

        known = ", ".join(sorted(REWARDS))
        check(bool(self.rewards), "rewards", f"name at least one reward ({known})")
        check(
            ("rm" in self.rewards) == (self.reward_model is not None),
            "rewards",
            "the rm reward and reward_model come together (--reward rm=PATH or rm=PATH:WEIGHT)",
        )
        for name, weight in self.rewards.items():
            check(name in REWARDS or name == "rm", "rewards", f"unknown reward {name!r}; expected one of {known}")
            check(
                not isinstance(weight, bool) and isinstance(weight, (int, float)),
                f"rewards.{name}",
                f"the weight must be a number, found {weight!r}",
            )

    def _check_tools(self, check: Checks) -> None:
        """The tool settings that can be judged without loading anything (the corpus is read by the tool)."""
        from reasonkit.gen.tools.base import TOOL_NAMES

        check(
            self.max_turns >= 1,
            "max_turns",
            f"must be >= 1 (assistant turns per completion), found {self.max_turns}",
        )
        check(self.search_k >= 1, "search_k", f"must be >= 1 (passages per search observation), found {self.search_k}")
        check(self.tool_timeout > 0, "tool_timeout", f"must be > 0 seconds, found {self.tool_timeout}")
        names = self.tool_names
        tools = ", ".join(TOOL_NAMES)
        check(self.tools is None or bool(names), "tools", f"no tool named; expected a comma-separated list of {tools}")
        for name in names:
            check(name in TOOL_NAMES, "tools", f"unknown tool {name!r}; expected one of {tools}")
        check(
            "search" not in names or bool(self.corpus),
            "tools",
            "search needs a corpus (--corpus FILE: JSONL or Parquet with id and contents)",
        )
        check(
            not self.corpus or "search" in names,
            "corpus",
            f"{self.corpus}: only the search tool reads a corpus; add search to --tools",
        )

    @property
    def gpu_indices(self) -> list[int] | None:
        """``gpus`` as a list of distinct indices: ``"0, 2"`` -> ``[0, 2]``; None when unset.

        >>> TrainConfig(method="sft", student="m", data="d", out="o", gpus="0,2").gpu_indices
        [0, 2]
        """
        if self.gpus is None:
            return None
        items = self.gpus.split(",") if isinstance(self.gpus, str) else list(self.gpus)
        try:
            indices = [int(str(i).strip()) for i in items if str(i).strip()]
        except ValueError:
            indices = []
        if not indices or min(indices) < 0 or len(set(indices)) != len(indices):
            raise ValueError(
                f"gpus must name distinct GPU indices (0, 1, ...) among the visible ones, found {self.gpus!r}"
            )
        return indices

    @property
    def tool_names(self) -> list[str]:
        """``tools`` as a list: ``" search, python"`` -> ``["search", "python"]``."""
        return [n.strip() for n in (self.tools or "").split(",") if n.strip()]

    def _check_vllm_server(self, check: Checks) -> None:
        """The server settings TRL would ignore or fail on only once training starts."""
        given = [k for k in VLLM_SERVER_FIELDS if getattr(self, k) is not None]
        check(
            not given or self.vllm_mode == "server",
            "vllm_mode",
            f"{', '.join(given)} apply with vllm_mode: server, found vllm_mode {self.vllm_mode}",
        )
        check(
            self.vllm_server_base_url is None or (self.vllm_server_host is None and self.vllm_server_port is None),
            "vllm_server_base_url",
            "vllm_server_base_url or vllm_server_host/vllm_server_port, not both (TRL ignores the host and "
            "port when a base URL is given)",
        )
        url = self.vllm_server_base_url
        check(
            url is None or url.startswith(("http://", "https://")),
            "vllm_server_base_url",
            f"must be an http:// or https:// URL (e.g. http://node1:8000), found {url!r}",
        )
        port = self.vllm_server_port
        check(
            port is None or (not isinstance(port, bool) and 1 <= port <= 65535),
            "vllm_server_port",
            f"must be a TCP port, 1 to 65535, found {port}",
        )
        check(
            self.vllm_server_timeout is None or self.vllm_server_timeout > 0,
            "vllm_server_timeout",
            f"must be > 0 seconds, found {self.vllm_server_timeout}",
        )

    def generation_batch_size(self, world_size: int = 1) -> int:
        """Completions sampled at once (TRL's generation_batch_size): per device x processes x steps per generation."""
        return self.batch_size * world_size * (self.steps_per_generation or self.grad_accum)

    @property
    def kl_beta(self) -> float:
        """beta as the run uses it: the given value, else the method's default (DEFAULT_BETA)."""
        return self.beta if self.beta is not None else DEFAULT_BETA[self.method]

    @property
    def trackers(self) -> tuple[str, ...]:
        from reasonkit.distill.trackers import names

        return names(self.report_to)

    @property
    def is_lora(self) -> bool:
        return not self.full

    @property
    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else DEFAULT_LR[(self.method, self.full)]

    def fingerprinted(self, world_size: int = 1) -> dict:
        """The settings that decide what a run computes (the resume check compares these).

        ``world_size``: the processes training together; the global batch (per device x processes
        x accumulation) is fingerprinted, not how it is split.

        >>> a = TrainConfig(method="sft", student="m", data="d", out="o", batch_size=8).fingerprinted(world_size=2)
        >>> b = TrainConfig(method="sft", student="m", data="d", out="o", batch_size=4, grad_accum=4).fingerprinted()
        >>> a == b, a["global_batch_size"]
        (True, 16)
        """
        data = dataclasses.asdict(self)
        for name in _float_fields():  # warmup=0 from Python and warmup: 0.0 from YAML/--set are one setting
            if isinstance(data[name], int) and not isinstance(data[name], bool):
                data[name] = float(data[name])
        for key in (
            *NOT_FINGERPRINTED,
            *LAUNCH_FIELDS,
            *BATCH_SPLIT,
            *(GRPO_FIELDS if self.method not in ("grpo", "distill") else ()),
            *(k for k in GRPO_FIELDS if self.method == "distill" and k not in DISTILL_SAMPLING),
            *(ONPOLICY_FIELDS if self.method != "distill" else ("teacher_url",)),  # where, not what
            *(SCORER_FIELDS if self.method not in ("rm", "prm") else ()),
        ):
            data.pop(key)
        if (
            self.method == "grpo" and self.corpus
        ):  # the search tool's passages by content, as generate fingerprints them
            from reasonkit.store import fingerprint_path

            data["corpus"] = fingerprint_path(self.corpus)
        if self.method == "distill" and self.teacher:  # the teacher by content, as the student is (train.py)
            from reasonkit.identity import model_identity

            data["teacher"] = model_identity(self.teacher)
        data["beta"] = self.kl_beta  # resolved: a run started with the default resumes when it is written out
        data["global_batch_size"] = self.batch_size * self.grad_accum * world_size
        return data


@functools.cache
def _float_fields() -> frozenset[str]:
    """TrainConfig's fields that hold a float (``float``, ``float | None``), from its resolved types."""
    hints = typing.get_type_hints(TrainConfig)
    return frozenset(name for name, hint in hints.items() if hint is float or float in typing.get_args(hint))
