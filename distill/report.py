"""What a training run tells its user: a live progress bar, report.json, a loss-curve PNG, a summary.

report.json keeps every logged step (the Trainer logs each one), so the curve of a run that was
killed and resumed is whole: the checkpoint carries the history of the steps before it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from reasonkit.distill.dpo_movement import movement_line
from reasonkit.ticker import Ticker, is_terminal

#: TRL's log keys -> the report's names.
_STEP_KEYS = {
    "loss": "loss",
    "learning_rate": "lr",
    "grad_norm": "grad_norm",
    "num_tokens": "tokens",
    "mean_token_accuracy": "token_accuracy",
    # SFT with --kd-weight (distill/kd.py): the loss's two terms, and the tokens that had a teacher target
    "ce_loss": "ce_loss",
    "kd_loss": "kd_loss",
    "kd_tokens": "kd_tokens",
    "rewards/accuracies": "reward_accuracy",
    "rewards/margins": "reward_margin",
    "rewards/chosen": "reward_chosen",
    "rewards/rejected": "reward_rejected",
    # DPO only, on the last step: mean |log pi/pi_ref| per completion token (distill/dpo_movement.py)
    "log_ratio_chosen": "log_ratio_chosen",
    "log_ratio_rejected": "log_ratio_rejected",
    "log_ratio_pairs": "log_ratio_pairs",
    # GRPO (TRL's GRPOTrainer; per-function rewards "rewards/<name>/mean|std" become reward_<name>[_std])
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",  # groups whose G rewards are all equal: zero advantage
    # --dynamic-sampling (distill/rl/dynamic.py), per generation batch: prompts drawn, rounds, groups trained on
    "dynamic/prompts_drawn": "prompts_drawn",
    "dynamic/rounds": "sampling_rounds",
    "dynamic/groups_wanted": "groups_wanted",
    "dynamic/groups_filled_flat": "groups_filled_flat",
    "kl": "kl",
    "entropy": "entropy",
    "clip_ratio/region_mean": "clip_ratio",
    "clip_ratio/low_mean": "clip_ratio_low",
    "clip_ratio/high_mean": "clip_ratio_high",
    "completions/mean_length": "completion_length",
    "completions/clipped_ratio": "truncated_share",  # completions cut at max_completion_length
    "step_time": "step_s",
    # rm (TRL's RewardTrainer): the batch's pair accuracy and mean r_chosen - r_rejected; prm (plain Trainer): tokens
    "accuracy": "reward_accuracy",
    "margin": "reward_margin",
    "mean_reward": "reward_mean",
    "num_input_tokens_seen": "tokens",
    "time/generate": "generate_s",  # distill/rl/grpo.py: seconds in generation, the reward functions, the scoring pass
    "time/reward": "reward_s",
    "time/score": "score_s",
    # on-policy distillation (distill/onpolicy/trainer.py): the teacher's time, the tokens sampled and scored
    "time/teacher": "teacher_s",
    "distill/student_tokens": "student_tokens",
    "distill/teacher_tokens": "teacher_tokens",
    "distill/teacher_input_tokens": "teacher_input_tokens",
    "distill/teacher_logprob_per_token": "teacher_logprob_per_token",
    # GRPO with tools (TRL's tool loop): calls run per completion, and the share of them that failed
    "tools/call_frequency": "tool_calls_per_completion",
    "tools/failure_frequency": "tool_failure_share",
}


class Monitor(TrainerCallback):
    """Times the run, counts its tokens, and shows its progress with loss and tokens/s: a rich bar on a
    terminal when ``progress`` (the process that speaks for the run), plain lines (reasonkit/ticker.py) from
    the main process when stderr is not a terminal, whatever ``progress`` says: a step inside ``distill run``
    or a launched process is as long, and its log as silent without them."""

    def __init__(self, method: str, progress: bool):
        self.method, self.show = method, progress
        self.started = self.tokens = self.cpu_s = 0.0
        self.start_step = 0
        self._bar = self._task = self._ticker = None
        self._stats = ""

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()
        self.cpu_s = -time.process_time()
        self.start_step = state.global_step
        if state.is_world_process_zero and not is_terminal(sys.stderr):
            self._ticker = Ticker(self.method, state.max_steps, "steps", done=state.global_step, write=_plain_writer())
        elif self.show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn(f"[bold]{self.method}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.method, total=state.max_steps, completed=state.global_step, stats="")

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs:
            return
        self.tokens = float(logs.get("num_tokens", logs.get("num_input_tokens_seen", self.tokens)))
        self._stats = stats_text(logs, self.tokens_per_s)
        if self._bar is not None:
            self._bar.update(self._task, completed=state.global_step, stats=self._stats)
        if self._ticker is not None:
            self._ticker.update(state.global_step, figures=self._stats)

    def on_train_end(self, args, state, control, **kwargs):
        self.cpu_s += time.process_time()  # CPU seconds of the training loop: immune to other processes' load
        if self._bar is not None:
            self._bar.update(self._task, completed=state.global_step)
            self._bar.stop()
        if self._ticker is not None:
            self._ticker.done = state.global_step
            self._ticker.close()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started if self.started else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed if self.elapsed > 0 else 0.0


def stats_text(logs: dict, tokens_per_s: float) -> str:
    """What a progress line shows of a logged step: loss and tokens/s, DPO's and the reward model's pair
    accuracy, GRPO's mean reward.

    >>> stats_text({"loss": 0.41234, "rewards/accuracies": 0.75}, 1234.5)
    'loss 0.4123, 1,234 tok/s, acc 0.75'
    """
    stats = f"loss {float(logs['loss']):.4f}, {tokens_per_s:,.0f} tok/s"
    accuracy = logs.get("rewards/accuracies", logs.get("accuracy"))  # DPO's, the reward model's
    if accuracy is not None:
        stats += f", acc {float(accuracy):.2f}"
    if logs.get("reward") is not None:  # GRPO
        stats += f", reward {float(logs['reward']):.3f}"
    return stats


def _plain_writer():
    """How a plain line reaches the user: printed to stderr; from a process ``distill train`` launched
    (distill/launch.py), marked, since only marked lines of its output pass on to the user's stderr."""
    from reasonkit.distill.launch import LAUNCHED, PROGRESS_MARK

    prefix = PROGRESS_MARK if os.environ.get(LAUNCHED) == "1" else ""
    return lambda line: print(prefix + line, file=sys.stderr, flush=True)


def history(log_history: list[dict]) -> list[dict]:
    """Per-step records (step, loss, lr, ... reward accuracy) from the Trainer's log history."""
    steps: dict[int, dict] = {}
    for entry in log_history:
        if "loss" not in entry:
            continue
        record = {"step": int(entry["step"])}
        for key, name in _STEP_KEYS.items():
            if key in entry and entry[key] is not None:  # TRL logs None for a metric with no value this step
                record[name] = float(entry[key])
        for key, value in entry.items():  # GRPO's per-function rewards
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "rewards" and parts[2] in ("mean", "std") and value is not None:
                record[f"reward_{parts[1]}" + ("_std" if parts[2] == "std" else "")] = float(value)
        steps[record["step"]] = record  # a step logged again after a resume: keep the latest
    return [steps[s] for s in sorted(steps)]


def peak_memory(device_kind: str) -> tuple[int, str]:
    """(bytes, what was measured): CUDA's peak allocation, else this process's peak resident set."""
    if device_kind == "cuda":
        import torch

        return int(torch.cuda.max_memory_allocated()), "cuda_max_allocated"
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale), "process_max_rss"


def write_report(out: Path, report: dict) -> Path:
    path = out / "report.json"
    tmp = path.with_name(".report.json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(path)
    return path


def plot(out: Path, records: list[dict], method: str, title: str) -> Path | None:
    """loss.png: the per-step loss; for DPO a second panel with reward accuracy and margin."""
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    steps = [r["step"] for r in records]
    pairs = method in ("dpo", "rm")  # a second panel: how often the chosen completion wins, and by how much
    panels = 2 if pairs else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7, 3.2 * panels), squeeze=False, sharex=True)
    ax = axes[0][0]
    ax.plot(steps, [r["loss"] for r in records], lw=1.2)
    ax.set_ylabel("loss")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if pairs:
        ax2 = axes[1][0]
        ax2.plot(steps, [r.get("reward_accuracy", float("nan")) for r in records], label="reward accuracy", lw=1.2)
        ax2.plot(steps, [r.get("reward_margin", float("nan")) for r in records], label="reward margin", lw=1.2)
        ax2.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax2.legend(fontsize=8)
        ax2.grid(alpha=0.3)
    axes[-1][0].set_xlabel("step")
    axes[-1][0].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    fig.tight_layout()
    path = out / "loss.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summary(report: dict) -> list[str]:
    """The lines printed at the end of a run."""
    lines = [
        f"{report['method']}: {report['steps']} steps in {report['train_runtime_s']:.1f} s, "
        f"{report['tokens_per_s']:,.0f} tokens/s, peak memory {report['peak_memory_bytes'] / 2**20:,.0f} MiB",
        f"loss {report['loss_first']:.4f} -> {report['loss_final']:.4f}"
        if report["loss_first"] is not None
        else "loss: not logged",
    ]
    if report["method"] in ("dpo", "rm") and report.get("reward_accuracy") is not None:
        lines.append(
            f"reward accuracy {report['reward_accuracy']:.3f}, margin {report['reward_margin']:.4f} (last steps)"
        )
    if report["method"] == "dpo" and (line := movement_line(report)):  # distill/dpo_movement.py
        lines.append(line)
    if report.get("heldout"):
        lines.append(heldout_line(report))
    if report.get("grpo"):
        from reasonkit.distill.rl.report import summary_lines

        lines += summary_lines(report["grpo"])
    if report.get("distill"):
        from reasonkit.distill.onpolicy.report import summary_lines as distill_lines

        lines += distill_lines(report["distill"])
    for key in ("adapter", "model", "merged"):
        if report.get(key):
            lines.append(f"{key}: {report[key]}")
    lines.append(f"report: {report['report']}")
    return lines


def heldout_line(report: dict) -> str:
    """The held-out figures of a reward model (rm: pairs ranked right; prm: steps and first errors), before -> after."""  # noqa: E501
    h, b = report["heldout"], report.get("heldout_before") or {}
    if report["method"] == "rm":
        if not h.get("pairs"):
            return "held-out: no pair short enough to score"
        return (
            f"held-out pairs {h['pairs']}: accuracy {b.get('pair_accuracy', float('nan')):.3f} -> "
            f"{h['pair_accuracy']:.3f}, "
            f"mean margin {b.get('mean_margin', float('nan')):.3f} -> {h['mean_margin']:.3f}"
        )
    if not h.get("steps"):
        return "held-out: no step short enough to score"
    return (
        f"held-out steps {h['steps']} in {h['rows']} solutions: step accuracy "
        f"{b.get('step_accuracy', float('nan')):.3f} -> "
        f"{h['step_accuracy']:.3f} (all good {h['all_good_step_accuracy']:.3f}), first-error accuracy "
        f"{b.get('first_error_accuracy', float('nan')):.3f} -> {h['first_error_accuracy']:.3f} (all good "
        f"{h['all_good_first_error_accuracy']:.3f})"
    )
