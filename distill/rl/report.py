"""What a GRPO run reports: rewards per function, the groups that taught nothing, KL, clipping, lengths, time.

Added to report.json as ``grpo`` (the per-step values stay in ``history``), written out as report.md,
and drawn in rewards.png beside the loss curve. The figures, per step (TRL's logs):

- ``reward_<name>`` / ``reward_<name>_std``: each reward function's mean and std over the step's completions;
- ``frac_reward_zero_std``: the share of groups whose G rewards are all equal: their advantages are zero,
  so they cost a generation and teach nothing (a student that is always right, or always wrong);
- ``kl`` (beta > 0 only), ``clip_ratio`` (tokens whose ratio left the clip range), ``completion_length``
  and ``truncated_share`` (completions cut at max_completion_length);
- ``step_s`` and, inside it, ``generate_s``, ``reward_s`` and ``score_s`` (generation + rewards + the
  log-prob passes); the rest of a step is the forward and backward of the loss.

>>> records = [{"step": 1, "reward_accuracy": 0.25, "frac_reward_zero_std": 0.5, "step_s": 2.0, "generate_s": 1.5,
...             "reward_s": 0.01, "score_s": 1.6}, {"step": 2, "reward_accuracy": 0.5, "frac_reward_zero_std": 0.0,
...             "step_s": 2.0, "generate_s": 1.4, "reward_s": 0.01, "score_s": 1.5}]
>>> section = grpo_section(records, {"accuracy": 1.0}, beta=0.0)
>>> section["rewards"]["accuracy"], section["frac_reward_zero_std"], section["time_s"]["train"]
({'weight': 1.0, 'first': 0.25, 'final': 0.5}, 0.25, 0.9)
"""

from __future__ import annotations

import math
from pathlib import Path

from reasonkit.distill.records import evenly_spaced, final_window


def grpo_section(records: list[dict], rewards: dict, *, beta: float) -> dict:
    """report.json's ``grpo`` section from the per-step records."""

    def first(key):
        return next((r[key] for r in records if key in r and not math.isnan(r[key])), None)

    def mean(key):
        values = [r[key] for r in records if key in r and not math.isnan(r[key])]
        return round(sum(values) / len(values), 6) if values else None

    def total(key):
        return round(sum(r.get(key, 0.0) for r in records), 3)

    times = {
        "step": total("step_s"),
        "generate": total("generate_s"),
        "reward": total("reward_s"),
        "score": total("score_s"),
    }
    times["train"] = round(times["step"] - times["score"], 3)  # forward + backward + optimizer
    return {
        "rewards": {
            name: {
                "weight": float(weight),
                "first": first(f"reward_{name}"),
                "final": final_window(records, f"reward_{name}"),
            }
            for name, weight in rewards.items()
        },
        "reward_first": first("reward"),
        "reward_final": final_window(records, "reward"),
        "frac_reward_zero_std": mean("frac_reward_zero_std"),
        "kl_final": final_window(records, "kl") if beta > 0 else None,
        "clip_ratio": mean("clip_ratio"),
        "completion_length_first": first("completion_length"),
        "completion_length_final": final_window(records, "completion_length"),
        "truncated_share": mean("truncated_share"),
        "time_s": times,
        "time_share": {k: round(v / times["step"], 4) for k, v in times.items() if k != "step"}
        if times["step"]
        else {},
    }


def add_grpo(report: dict, records: list[dict], cfg, rollouts, out: Path) -> None:
    """Complete OUT/rollouts, add the ``grpo`` section to ``report``, draw rewards.png, write report.md."""
    section = grpo_section(records, cfg.rewards, beta=cfg.kl_beta)
    manifest = rollouts.finish(summary={"steps": report["steps"], "rewards": list(cfg.rewards)})
    section["rollouts"] = {"dir": str(rollouts.dir), "rows": manifest["rows"]}
    section.update(
        num_generations=cfg.num_generations, beta=cfg.kl_beta, loss_type=cfg.loss_type, scale_rewards=cfg.scale_rewards
    )
    if cfg.dynamic_sampling:
        section["dynamic_sampling"] = dynamic_section(records)
    report["grpo"] = section
    png = plot_rewards(out, records, list(cfg.rewards), f"grpo {Path(cfg.student).name} on {Path(cfg.data).name}")
    report["rewards_plot"] = str(png) if png else None
    report["report_md"] = str(write_markdown(out, report, records, list(cfg.rewards)))


def dynamic_section(records: list[dict]) -> dict:
    """DAPO's dynamic sampling over the run (distill/rl/dynamic.py): the prompts drawn to fill the batches, the
    groups trained on, and how many of those were flat groups standing in after the last round.

    >>> dynamic_section([{"prompts_drawn": 6, "groups_wanted": 2, "groups_filled_flat": 0, "sampling_rounds": 3}])
    {'prompts_drawn': 6, 'groups_trained': 2, 'prompts_per_group_trained': 3.0, 'flat_groups_trained': 0, 'flat_share_trained': 0.0, 'rounds_max': 3}
    """  # noqa: E501
    total = {
        k: int(sum(r.get(k, 0) for r in records)) for k in ("prompts_drawn", "groups_wanted", "groups_filled_flat")
    }
    groups = total["groups_wanted"]
    return {
        "prompts_drawn": total["prompts_drawn"],
        "groups_trained": groups,
        "prompts_per_group_trained": round(total["prompts_drawn"] / groups, 3) if groups else None,
        "flat_groups_trained": total["groups_filled_flat"],
        "flat_share_trained": round(total["groups_filled_flat"] / groups, 4) if groups else None,
        "rounds_max": int(max((r.get("sampling_rounds", 0) for r in records), default=0)),
    }


def summary_lines(section: dict) -> list[str]:
    """The lines printed at the end of a GRPO run."""

    def fmt(v):
        return "n/a" if v is None else f"{v:.3f}"

    rewards = ", ".join(f"{name} {fmt(r['first'])} -> {fmt(r['final'])}" for name, r in section["rewards"].items())
    lines = [f"rewards (first step -> last steps): {rewards}"]
    zero = section.get("frac_reward_zero_std")
    if zero is not None:
        lines.append(f"groups with zero reward variance (no signal): {zero:.0%} on average")
    dynamic = section.get("dynamic_sampling")
    if dynamic:
        lines.append(
            f"dynamic sampling: {dynamic['prompts_drawn']} prompts drawn for {dynamic['groups_trained']} groups "
            f"trained on, {dynamic['flat_groups_trained']} of them flat (after {dynamic['rounds_max']} rounds at most)"
        )
    t = section["time_s"]
    if t["step"]:
        lines.append(
            f"time: generation {t['generate'] / t['step']:.0%}, rewards {t['reward'] / t['step']:.1%}, "
            f"forward/backward {t['train'] / t['step']:.0%} of {t['step']:.1f} s"
        )
    lines.append(f"rollouts: {section['rollouts']['rows']} rows in {section['rollouts']['dir']}")
    return lines


def plot_rewards(out: Path, records: list[dict], names: list[str], title: str) -> Path | None:
    """rewards.png: rewards per function (mean, +-std band); zero-variance groups; length and truncation; KL and clipping."""  # noqa: E501
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    steps = [r["step"] for r in records]

    def series(key):
        return [r.get(key, float("nan")) for r in records]

    fig, axes = plt.subplots(4, 1, figsize=(7, 10), sharex=True)
    ax = axes[0]
    for name in names:
        mean, std = series(f"reward_{name}"), series(f"reward_{name}_std")
        ax.plot(steps, mean, lw=1.2, label=name)
        ax.fill_between(steps, [m - s for m, s in zip(mean, std)], [m + s for m, s in zip(mean, std)], alpha=0.15)
    ax.plot(steps, series("reward"), lw=1.2, color="black", ls="--", label="weighted sum")
    ax.set_ylabel("reward")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    axes[1].plot(steps, series("frac_reward_zero_std"), lw=1.2, color="tab:red")
    axes[1].set_ylabel("groups with\nzero variance")
    axes[1].set_ylim(-0.05, 1.05)
    axes[2].plot(steps, series("completion_length"), lw=1.2, label="mean completion length")
    axes[2].set_ylabel("tokens")
    twin = axes[2].twinx()
    twin.plot(steps, series("truncated_share"), lw=1.0, color="tab:orange", label="truncated share")
    twin.set_ylim(-0.05, 1.05)
    twin.set_ylabel("truncated", fontsize=8)
    axes[3].plot(steps, series("clip_ratio"), lw=1.2, label="clip ratio")
    if any(not math.isnan(v) for v in series("kl")):
        axes[3].plot(steps, series("kl"), lw=1.2, label="KL")
    axes[3].legend(fontsize=8)
    for a in axes:
        a.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    axes[-1].xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    fig.tight_layout()
    path = out / "rewards.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: Rows report.md's step table shows at most (evenly spaced); report.json keeps every step.
TABLE_ROWS = 40


def write_markdown(out: Path, report: dict, records: list[dict], names: list[str]) -> Path:
    """report.md: the run in a page (settings, rewards first -> last, time, a step table, the curves)."""
    g = report["grpo"]
    lines = [
        f"# GRPO: {report['student']} on {report['data']}",
        "",
        f"{report['steps']} steps, G {g['num_generations']}, beta {g['beta']}, loss {g['loss_type']}, "
        f"scale_rewards {g['scale_rewards']}; {g['rollouts']['rows']} rollouts in `{g['rollouts']['dir']}`.",
        "",
        *[f"- {line}" for line in summary_lines(g)],
        "",
    ]
    keys = [
        "loss",
        "reward",
        *[f"reward_{n}" for n in names],
        "frac_reward_zero_std",
        "kl",
        "clip_ratio",
        "completion_length",
        "truncated_share",
        "step_s",
    ]
    keys = [k for k in keys if any(k in r for r in records)]
    shown = evenly_spaced(records, TABLE_ROWS)
    lines += ["| step | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for r in shown:
        lines.append(f"| {r['step']} | " + " | ".join(f"{r[k]:.4g}" if k in r else "" for k in keys) + " |")
    lines += ["", "![loss](loss.png)", "", "![rewards](rewards.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
