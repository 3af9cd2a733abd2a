"""``train(config) -> report``: SFT, DPO, GRPO, a reward model, a process reward model or on-policy distillation,
linted, checkpointed, resumable.

The recipe, in order: check the output directory (a finished run, a run to resume, or a clash);
read and validate the table; load the student's tokenizer and the chat template to train with;
lint the data against them (no weights loaded yet, so a bad dataset fails in seconds); load the
model on its device; train with TRL; save the adapter (or full model), optionally merge; write
report.json and loss.png.

On several processes (``launcher: accelerate``, or ``accelerate launch`` by hand: distill/launch.py)
every process runs this function and only the main one writes into OUT; the others wait at a
barrier. The training arguments exist before the model loads, so DeepSpeed ZeRO-3 partitions the
weights as they load instead of each process loading them whole.

OUT/
  train_config.json      the settings and data fingerprint of this run (what --resume must match)
  lint.json              the lint's findings and length statistics
  checkpoints/checkpoint-N/   Trainer checkpoints every save_steps (adapter, optimizer, RNG, state)
  adapter/               the LoRA adapter + tokenizer (peft, transformers, vLLM load it)   [LoRA]
  model/                 the full fine-tuned model + tokenizer                             [--full]
                         (rm, prm: a sequence/token-classification model; prm also reasonkit_prm.json)
  merged/                base + adapter folded into plain weights                          [--merge]
  rollouts/              GRPO: every sampled completion, its rewards and advantage (distill/rl/rollouts.py);
                         distill: every sampled completion and the teacher's log-prob of it (distill/onpolicy/)
  report.json, loss.png  (GRPO: also report.md, rewards.png: distill/rl/report.py; rm/prm: report.md with the
                         held-out figures: distill/reward/heads.py)
  launch.log             launcher accelerate: every process's output
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from reasonkit.distill import launch
from reasonkit.distill.config import TrainConfig
from reasonkit.errors import UserError
from reasonkit.store import fingerprint, fingerprint_path

RUN_FILE = "train_config.json"
CHECKPOINTS = "checkpoints"
#: Everything a run writes into OUT (and all that --overwrite removes; nothing else in OUT is touched).
OUTPUTS = (
    CHECKPOINTS,
    "adapter",
    "model",
    "merged",
    "rollouts",
    "report.json",
    "report.md",
    "loss.png",
    "rewards.png",
    "lint.json",
    RUN_FILE,
)
#: max_length when neither the user nor a shorter model context sets it.
DEFAULT_MAX_LENGTH = 4096
#: The methods that train on prompts, read and rendered as `distill generate` reads them, and sample completions.
ON_PROMPTS = ("grpo", "distill")


def train(cfg: TrainConfig, *, progress: bool = False, log: Callable[[str], None] | None = None) -> dict:
    """Run the training ``cfg`` describes and return its report (also written to OUT/report.json)."""
    say = log or (lambda _msg: None)
    sandbox_mode = _check_before_any_work(cfg)
    if not launch.launched():  # several GPUs, or other GPUs than this process sees: the processes accelerate starts
        placed = launch.layout(cfg, launch.visible_gpus(cfg))
        if placed.launch:
            return launch.run_launched(cfg, say, placed)
    out = Path(cfg.out)
    from reasonkit.identity import model_identity

    data_fp = fingerprint_path(cfg.data)
    # the student by content (weights and tokenizer hashed, a Hub id at its revision): checkpoints of
    # one base model cannot be resumed onto another that was saved under the same path
    student_id = model_identity(cfg.student)
    run_fp = fingerprint([cfg.fingerprinted(launch.world_size()), data_fp, student_id])
    main = launch.is_main()
    finished = _open_out(out, cfg, run_fp, data_fp, say, student_id, main=main)
    launch.barrier(cfg)  # the others start once the main process has cleared OUT (--overwrite) or merged
    if finished is not None:
        return finished

    _quiet_libraries()
    table, tok, note = _read(cfg, say)
    max_length, findings, lengths = _lint(cfg, out, table, tok, main, say)
    if main and not (out / RUN_FILE).exists():
        identity = {"fingerprint": run_fp, "data_fingerprint": data_fp, "student_identity": student_id}
        config = {**identity, "config": cfg.fingerprinted(launch.world_size())}
        (out / RUN_FILE).write_text(json.dumps(config, indent=2) + "\n")

    # The main process deletes torn checkpoints; the others skip the same ones (completeness is read
    # from files no one writes until training starts), so every process resumes from the same step.
    checkpoint = last_checkpoint(out / CHECKPOINTS, delete_torn=main) if cfg.resume else None
    if cfg.resume:
        say(f"resuming from {checkpoint}" if checkpoint else "no complete checkpoint yet: starting from step 0")
    from reasonkit.distill.lint import checks as lint

    extra = {
        "chat_template_note": note,
        "lint": lint.as_json(findings),
        "lengths": lengths,
        "fingerprint": run_fp,
        "data_fingerprint": data_fp,
        "student_identity": student_id,
        **({"sandbox": sandbox_mode} if sandbox_mode else {}),
    }
    import torch

    threads = torch.get_num_threads()
    try:
        return _run(cfg, out, table, tok, max_length, checkpoint, progress, say, extra)
    finally:
        torch.set_num_threads(threads)  # --set threads is for this run, not for whatever runs next in the process


def _read(cfg: TrainConfig, say) -> tuple:
    """The rows the method trains on and the student's tokenizer, its chat template resolved:
    (table, tokenizer, the note on the template, or None)."""
    from reasonkit.distill import data
    from reasonkit.distill.reward import heads

    head = heads.is_head(cfg.method)
    if cfg.method in ON_PROMPTS:  # prompts, read and rendered as `distill generate` does
        table = data.read_prompt_rows(cfg)
    elif head:  # pairs or steps; and a student that can take the head, checked before anything is written
        table = heads.module(cfg.method).read(cfg)
        heads.check_student(cfg)
    else:
        table = data.read_rows(cfg.data, cfg.method, allow_incomplete=cfg.allow_incomplete)
        if cfg.kd_weight:  # the teacher's log-probs, before anything is written (distill/kd.py)
            from reasonkit.distill.kd import check_columns

            check_columns(table.column_names, cfg.data)
    tok = data.load_tokenizer(cfg)
    note = data.resolve_template(tok, cfg) if not head or heads.module(cfg.method).needs_template(table) else None
    if head and tok.pad_token is None:  # the heads read the last non-pad token: padding must be told apart
        tok.pad_token = tok.eos_token
    if note:
        say(f"note: {note}")
    if cfg.method == "grpo" and cfg.tools:  # the tools load and the template can call them, before OUT is written
        from reasonkit.distill.rl.tools import check_tools

        check_tools(tok, cfg)
    return table, tok, note


def _lint(cfg: TrainConfig, out: Path, table, tok, main: bool, say) -> tuple[int, list, dict]:
    """The pre-training lint over the rows (OUT/lint.json; an error stops every process): (the max_length a
    step reads, the findings, the lengths measured)."""
    from reasonkit.distill import data
    from reasonkit.distill.lint import checks as lint

    positions = data.max_positions(cfg.student)
    max_length = cfg.max_length or min(DEFAULT_MAX_LENGTH, positions or DEFAULT_MAX_LENGTH)
    findings, lengths = [], {}
    if cfg.lint != "off":
        findings, lengths = lint.lint(
            tok, table, cfg, max_length=max_length, stops=data.stop_ids(tok, cfg.student), max_positions=positions
        )
    if main:  # every process lints (it is quick and enforce() must stop them all); one writes
        out.mkdir(parents=True, exist_ok=True)
        (out / "lint.json").write_text(
            json.dumps({"findings": lint.as_json(findings), "lengths": lengths}, indent=2) + "\n"
        )
    lint.enforce(findings, cfg.lint, str(out / "lint.json"))
    for f in findings:
        say(f"warning: lint ({f.check}): {f.message}")
    if cfg.method in ON_PROMPTS:  # what a step reads: the longest prompt and the completion
        max_length = (cfg.max_prompt_length or lengths.get("prompt_longest") or 0) + cfg.max_completion_length
    return max_length, findings, lengths


def _method(cfg, table, out: Path, checkpoint: Path | None, extra: dict, say) -> tuple:
    """What the method trains with: (the training rows, the held-out rows of a reward model or None, its scorer
    module or None, the function making the trainer's arguments, the one building the trainer, GRPO's rollouts
    writer or None)."""
    from reasonkit.distill.reward import heads

    scorer = heldout = rollouts = None
    if heads.is_head(cfg.method):
        scorer = heads.module(cfg.method)
        table, heldout = heads.split(table, cfg)
        arguments, build = scorer.arguments, scorer.build
    elif cfg.method == "sft":
        from reasonkit.distill.sft import build_sft_trainer as build
        from reasonkit.distill.sft import sft_arguments as arguments
    elif cfg.method == "dpo":
        from reasonkit.distill.dpo import build_dpo_trainer as build
        from reasonkit.distill.dpo import dpo_arguments as arguments
    elif cfg.method == "distill":  # on-policy distillation (distill/onpolicy/), sampling as GRPO does
        from reasonkit.distill.onpolicy.trainer import setup
        from reasonkit.distill.rl.vllm_support import use_vllm

        arguments, build, rollouts = setup(cfg, out, checkpoint, extra, say, use_vllm=use_vllm)
    else:
        from reasonkit.distill.rl.grpo import build_grpo_trainer, grpo_arguments

        arguments = functools.partial(grpo_arguments, longest_prompt=extra["lengths"].get("prompt_longest"))
        from reasonkit.distill.rl.rollouts import open_rollouts, rollout_stamp

        rollouts = open_rollouts(cfg, out, checkpoint, extra, say) if launch.is_main() else None
        build = functools.partial(build_grpo_trainer, rollouts=rollouts, stamp=rollout_stamp(cfg, extra))
    return table, heldout, scorer, arguments, build, rollouts


def _run(
    cfg, out: Path, table, tok, max_length: int, checkpoint: Path | None, progress: bool, say, extra: dict
) -> dict:
    from reasonkit.distill.report import Monitor, history, summary, write_report
    from reasonkit.distill.student import count_parameters, resolve_device, trainer_args

    device = resolve_device(cfg)
    monitor = Monitor(cfg.method, progress)
    table, heldout, scorer, arguments, build, rollouts = _method(cfg, table, out, checkpoint, extra, say)
    # Before the model: under accelerate's DeepSpeed ZeRO-3 the training arguments register the
    # DeepSpeed config that makes from_pretrained load each weight already partitioned
    # (transformers' is_deepspeed_zero3_enabled); loaded first, every process would hold it whole.
    args = arguments(cfg, trainer_args(cfg, device, out / CHECKPOINTS, max_length))
    if heldout is not None:
        trainer, before = _head_trainer(cfg, tok, table, heldout, scorer, build, args, device, monitor, max_length)
    else:
        trainer, before = _lm_trainer(cfg, tok, table, build, args, device, monitor), None
    _drop_printer(trainer)
    _trackers(trainer, cfg, out, extra)
    trainable, total = count_parameters(trainer.model)
    result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    # every process scores (under ZeRO-3/FSDP a forward needs them all); the main one reports
    after = scorer.held_out(trainer, heldout, cfg, cfg.batch_size, max_length) if heldout is not None else None

    final = out / ("model" if cfg.full else "adapter")
    if trainer.is_fsdp_enabled:  # sharded checkpoints resume; the final weights are gathered whole
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(final))  # every process takes part (FSDP/ZeRO gather); the main one writes
    if not trainer.is_world_process_zero():  # under accelerate launch: the other ranks are done
        return {"complete": True, "steps": trainer.state.global_step, "rank": trainer.args.process_index}
    merged = _finish_weights(cfg, final, out, device, say)

    records = history(trainer.state.log_history)
    runtime = float(result.metrics.get("train_runtime", monitor.elapsed))
    report = _report(
        cfg,
        out,
        trainer,
        rows=table.num_rows,
        weights=(final, merged),
        checkpoint=checkpoint,
        measured=_measured(monitor, runtime, device, records),
        parameters=(trainable, total),
        max_length=max_length,
        device=device,
        records=records,
        extra=extra,
    )
    _add_method_figures(report, cfg, out, records, rollouts)
    if heldout is not None:
        _add_heldout(report, out, table, heldout, before, after)
    write_report(out, report)
    for line in summary(report):
        say(line)
    return report


def _head_trainer(cfg, tok, table, heldout, scorer, build, args, device, monitor, max_length: int) -> tuple:
    """A reward model's trainer, and its held-out figures before training (the random head: the bar to clear)."""
    from reasonkit.distill.reward import heads

    model = heads.load_head_model(cfg, device, tok.pad_token_id)
    trainer = build(
        cfg,
        model,
        tok,
        scorer.dataset(table, cfg, tok, max_length),
        args,
        heads.head_lora(cfg) if cfg.is_lora else None,
        [monitor],
    )
    # the random head: the bar to clear (one process only: before training starts, ZeRO-3's weights are not gathered)
    before = scorer.held_out(trainer, heldout, cfg, cfg.batch_size, max_length) if launch.world_size() == 1 else None
    return trainer, before


def _lm_trainer(cfg, tok, table, build, args, device, monitor):
    """The trainer of a method that trains the student's language model head (sft, dpo, grpo, distill)."""
    from reasonkit.distill.data import to_dataset
    from reasonkit.distill.student import load_model, lora_config

    model = load_model(cfg, device)
    dataset = to_dataset(table, cfg.method, logprobs=cfg.kd_weight > 0)
    return build(cfg, model, tok, dataset, args, lora_config(cfg), [monitor])


def _finish_weights(cfg, final: Path, out: Path, device, say) -> Path | None:
    """After the saved weights: a process reward model's step separator file, and the merged model when asked
    (its path, or None)."""
    from reasonkit.distill.student import merge_adapter

    if cfg.method == "prm":
        from reasonkit.distill.reward import heads

        heads.write_prm_file(final, cfg.step_separator)
    if cfg.merge and cfg.full:
        say(f"note: --full trains every weight; {final} already is a plain model, nothing to merge")
    elif cfg.merge:
        return merge_adapter(final, out / "merged", device.bf16 and device.kind == "cuda", cfg.method)
    return None


def _report(
    cfg,
    out: Path,
    trainer,
    *,
    rows: int,
    weights: tuple,
    checkpoint: Path | None,
    measured: dict,
    parameters: tuple[int, int],
    max_length: int,
    device,
    records: list[dict],
    extra: dict,
) -> dict:
    """report.json's common part, in its order: what was trained, where the weights are, the steps, the measured
    figures, the setup and the history. ``weights``: (the final weights' directory, the merged model or None)."""
    from reasonkit.distill.levers import resolve_attention
    from reasonkit.hardware import machine, versions

    final, merged = weights
    return {
        "method": cfg.method,
        "student": cfg.student,
        "data": cfg.data,
        "rows": rows,
        "complete": True,
        "adapter": None if cfg.full else str(final),
        "model": str(final) if cfg.full else None,
        "merged": str(merged) if merged else None,
        "steps": trainer.state.global_step,
        "epochs": round(float(trainer.state.epoch or 0), 4),
        "resumed_from_step": int(checkpoint.name.split("-")[1]) if checkpoint else None,
        **measured,
        "trainable_parameters": parameters[0],
        "total_parameters": parameters[1],
        "max_length": max_length,
        "learning_rate": cfg.learning_rate,
        "device": device.as_dict(),
        "hardware": machine(gpu=device.kind == "cuda"),  # CPU model and kernels, threads, GPU and driver
        "attn_implementation": resolve_attention(cfg.attn_implementation, cuda=device.kind == "cuda"),  # auto resolved
        "history": records,
        **extra,
        **(getattr(trainer, "kd_alignment", None) or {}),  # --kd-weight: the teacher's targets aligned (distill/kd.py)
        "config": dataclasses.asdict(cfg),
        "versions": versions(),
        "report": str(out / "report.json"),
    }


def _add_method_figures(report: dict, cfg, out: Path, records: list[dict], rollouts) -> None:
    """The loss plot, and GRPO's or on-policy distillation's figures from its rollouts."""
    from reasonkit.distill.report import plot

    png = plot(out, records, cfg.method, f"{cfg.method} {Path(cfg.student).name} on {Path(cfg.data).name}")
    report["plot"] = str(png) if png else None
    if rollouts is not None and cfg.method == "distill":
        from reasonkit.distill.onpolicy.report import add_onpolicy

        add_onpolicy(report, records, cfg, rollouts, out)
    elif rollouts is not None:
        from reasonkit.distill.rl.report import add_grpo

        add_grpo(report, records, cfg, rollouts, out)


def _add_heldout(report: dict, out: Path, table, heldout, before, after) -> None:
    """A reward model's held-out rows and figures, before and after training, and its report.md."""
    from reasonkit.distill.reward import heads

    report.update(
        rows=table.num_rows + heldout.num_rows,
        train_rows=table.num_rows,
        heldout_rows=heldout.num_rows,
        heldout_before=before,
        heldout=after,
    )
    report["report_md"] = str(heads.write_markdown(out, report))


def _measured(monitor, runtime: float, device, records: list[dict]) -> dict:
    """The report's measured figures, in its order: time, tokens, CPU, peak memory, and the loss and reward curves'
    first, last and final-window values."""
    from reasonkit.distill.records import final_window
    from reasonkit.distill.report import peak_memory

    peak, peak_kind = peak_memory(device.kind)
    return {
        "train_runtime_s": round(runtime, 3),
        "tokens": int(monitor.tokens),
        "tokens_per_s": round(monitor.tokens / runtime, 1) if runtime > 0 else 0.0,
        "train_cpu_s": round(monitor.cpu_s, 3),
        "peak_memory_bytes": peak,
        "peak_memory_kind": peak_kind,
        "loss_first": records[0]["loss"] if records else None,
        "loss_final": records[-1]["loss"] if records else None,
        "loss_final_window": final_window(records, "loss"),
        "reward_accuracy": final_window(records, "reward_accuracy"),
        "reward_margin": final_window(records, "reward_margin"),
    }


def _trackers(trainer, cfg: TrainConfig, out: Path, extra: dict) -> None:
    """--report-to: the run's protocol (settings, data and student identities, versions) as each tracker's config."""
    from reasonkit.distill.trackers import attach
    from reasonkit.hardware import versions

    protocol = {
        "method": cfg.method,
        "config": cfg.fingerprinted(launch.world_size()),
        "fingerprint": extra["fingerprint"],
        "data": cfg.data,
        "data_fingerprint": extra["data_fingerprint"],
        "student": cfg.student,
        "student_identity": extra["student_identity"],
        "versions": versions(),
    }
    attach(trainer, cfg.trackers, protocol, out)


def _check_before_any_work(cfg: TrainConfig) -> str | None:
    """What this machine must offer the run, checked before the data is read or OUT written; returns the sandbox
    mode a GRPO run with code rewards or the python tool will use (None: it runs no program)."""
    from reasonkit.distill.rl.vllm_support import require_vllm

    require_vllm(cfg)  # here, not in TrainConfig: a recipe for a GPU machine validates on any machine
    from reasonkit.distill.trackers import require

    require(cfg.trackers)  # a tracker not installed: one line naming its extra, nothing written
    if cfg.method == "distill":  # a vocabulary the teacher does not share: one line, before any weight loads
        from reasonkit.distill.onpolicy.vocab import check_vocabulary

        check_vocabulary(cfg)
    sandbox_mode = None
    if cfg.method == "grpo" and ("code" in cfg.rewards or "python" in (cfg.tools or "").split(",")):
        from reasonkit.sandbox.stage import require_sandbox

        sandbox_mode = require_sandbox(
            "distill train --method grpo" + (" --reward code" if "code" in cfg.rewards else " --tools python")
        )
    if (
        cfg.method == "grpo" and cfg.reward_model
    ):  # --reward rm=PATH that is no reward model: one line, nothing written
        from reasonkit.reward.scorer import inspect_model

        inspect_model(cfg.reward_model)
    return sandbox_mode


# -- the output directory ------------------------------------------------------------------------
def _open_out(
    out: Path, cfg: TrainConfig, run_fp: str, data_fp: str, say, student_id: str | None = None, main: bool = True
) -> dict | None:
    """Check OUT before any work; returns the report of a finished run being resumed, else None.

    Every process checks (the checks only read, and a clash must stop them all); only ``main``
    clears OUT for --overwrite or merges a finished run.
    """
    run_file = out / RUN_FILE
    if cfg.overwrite:
        if main:
            _clear(out)
        return None
    if not run_file.exists():
        if any((out / name).exists() for name in (CHECKPOINTS, "adapter", "model", "rollouts")):
            raise UserError(f"{out}: holds training outputs but no {RUN_FILE}; pass --overwrite to replace them")
        return None
    if not cfg.resume:
        raise UserError(
            f"{out}: holds a training run already; pass --resume to continue it, --overwrite to start over, or choose "
            "another --out"
        )
    previous = json.loads(run_file.read_text())
    if previous.get("fingerprint") != run_fp:
        mine = json.loads(json.dumps(cfg.fingerprinted(launch.world_size())))
        theirs = previous.get("config", {})
        diffs = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        if previous.get("data_fingerprint") != data_fp:
            diffs.append("the data's contents")
        if previous.get("student_identity") != student_id and mine.get("student") == theirs.get("student"):
            diffs.append(
                f"the student's weights ({previous.get('student_identity') or 'unrecorded'}, now {student_id})"
            )
        raise UserError(
            f"{out}: was started with different settings ({', '.join(diffs)}); --resume continues only the same "
            "run: pass --overwrite to start over, or choose another --out"
        )
    report_file = out / "report.json"
    if not report_file.exists():
        return None
    report = json.loads(report_file.read_text())
    if main and cfg.merge and report.get("adapter") and not report.get("merged"):
        from reasonkit.distill.report import write_report
        from reasonkit.distill.student import merge_adapter

        report["merged"] = str(
            merge_adapter(
                Path(report["adapter"]),
                out / "merged",
                report["device"]["bf16"] and report["device"]["kind"] == "cuda",
                report["method"],
            )
        )
        write_report(out, report)
    say(f"{out}: finished already ({report['steps']} steps); nothing to resume")
    return report


def _clear(out: Path) -> None:
    for name in OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def last_checkpoint(directory: Path, *, delete_torn: bool = True) -> Path | None:
    """The newest complete checkpoint under ``directory``; newer torn ones are deleted (``delete_torn``).

    The Trainer writes a checkpoint's weights, optimizer and RNG state first and trainer_state.json
    last, so a checkpoint killed mid-write lacks a readable trainer_state.json; resuming from it
    would crash, so the run goes back to the previous complete one.
    """
    if not directory.is_dir():
        return None
    found = sorted(
        (int(p.name.split("-")[1]), p) for p in directory.glob("checkpoint-*") if p.name.split("-")[1].isdigit()
    )
    for _step, path in reversed(found):
        if is_complete(path):
            return path
        if delete_torn:
            shutil.rmtree(path)
    return None


#: Files that hold a checkpoint's weights when the Trainer saves a plain (or DDP) model.
_WEIGHTS = (
    "adapter_model.safetensors",
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.bin",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def is_complete(path: Path) -> bool:
    """Whether the checkpoint ``path`` can be resumed: trainer_state.json (written last) is readable
    and the weights and optimizer state are there in one of the layouts the Trainer saves:

    - plain or DDP: weights (``model.safetensors``, ``adapter_model.safetensors``...) and ``optimizer.pt``;
    - DeepSpeed: ``global_step<N>/`` holding the ZeRO optimizer shards (``*optim_states.pt``), the
      weights inside it too (ZeRO-3 without 16-bit gathering writes no other weights file);
    - FSDP: ``pytorch_model_fsdp*`` (a file, or a torch.distributed.checkpoint folder with its
      ``.metadata``) and ``optimizer*.bin`` or an ``optimizer_<i>/`` folder with its ``.metadata``
      (accelerate's save_fsdp_model/save_fsdp_optimizer).
    """
    try:
        json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    if any((path / w).exists() for w in _WEIGHTS) and (path / "optimizer.pt").exists():
        return True
    if any(any(step.glob("*optim_states.pt")) for step in path.glob("global_step*") if step.is_dir()):
        return True
    return any(_saved(p) for p in path.glob("pytorch_model_fsdp*")) and any(
        _saved(p) for p in path.glob("optimizer*") if p.name != "optimizer.pt"
    )


def _saved(path: Path) -> bool:
    """A file, or a torch.distributed.checkpoint folder whose .metadata (written last) is there."""
    return path.is_file() or (path / ".metadata").is_file()


# -- plumbing ------------------------------------------------------------------------------------
def _quiet_libraries() -> None:
    """The Monitor's bar replaces the per-map and per-load tqdm bars of datasets and transformers."""
    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()


def _drop_printer(trainer) -> None:
    """``disable_tqdm`` makes the Trainer print every log dict; the Monitor reports instead."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
