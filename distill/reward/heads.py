"""What the two reward-model methods share: a scoring head on the student, the held-out split, the merge.

``--method rm`` puts a one-output sequence-classification head on the student (the reward of a whole
completion, read at its last token); ``--method prm`` a two-class token-classification head (good/bad
per step, read at each step's last token). Both start from a causal-LM directory: transformers drops
the LM head and initialises ``score`` at random, so the head must train and be saved with LoRA
(peft's ``modules_to_save``). The saved config names the head's architecture, ``num_labels`` and
``pad_token_id``, so ``AutoModelForSequenceClassification`` / ``AutoModelForTokenClassification``
load the output directory as it is (reward/scorer.py does).

>>> held_out_rows(["a", "b", "c", "d", "a"], share=0.5, seed=2)  # two of the four prompts; both rows of "a"
[0, 3, 4]
>>> held_out_rows(["a", "b"], share=0.0, seed=0)
[]
"""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from types import SimpleNamespace

from reasonkit.errors import UserError

# A PRM's reading instructions, saved beside its weights: how the scorer (reward/scorer.py) joins the steps.
from reasonkit.reward.scorer import PRM_FILE

#: method -> (transformers auto class, num_labels, peft task type, the model types that have the head)
HEADS = {
    "rm": ("AutoModelForSequenceClassification", 1, "SEQ_CLS", "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"),
    "prm": ("AutoModelForTokenClassification", 2, "TOKEN_CLS", "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"),
}


def is_head(method: str) -> bool:
    return method in HEADS


def held_out_rows(groups: list, share: float, seed: int) -> list[int]:
    """Row indices held out: a seeded ``share`` of the distinct ``groups`` (the prompt ids), whole.

    Rows of one prompt stay on one side, so a held-out pair never shares its prompt with a trained one.
    At least one group stays in training; with ``share`` > 0 and two groups or more, at least one is held out.
    """
    distinct = sorted(set(groups), key=str)
    if share <= 0 or len(distinct) < 2:
        return []
    k = min(len(distinct) - 1, max(1, round(len(distinct) * share)))
    chosen = set(random.Random(seed).sample(distinct, k))
    return [i for i, g in enumerate(groups) if g in chosen]


def split(table, cfg):
    """(train rows, held-out rows) of ``table`` by :func:`held_out_rows` on its ``id`` column (else row order)."""
    import pyarrow as pa

    groups = table.column("id").to_pylist() if "id" in table.column_names else list(range(table.num_rows))
    held = held_out_rows(groups, cfg.eval_share, cfg.seed)
    keep = sorted(set(range(table.num_rows)) - set(held))
    return table.take(pa.array(keep, pa.int64())), table.take(
        pa.array(held, pa.int64())
    )  # typed: an empty list is too


def check_student(cfg) -> None:
    """One line, before anything is written, when the student's architecture has no head of this method's kind."""
    import transformers
    from transformers import AutoConfig

    from reasonkit.distill.data import model_ref

    name, _, _, types = HEADS[cfg.method]
    try:
        config = AutoConfig.from_pretrained(model_ref(cfg.student))
    except (OSError, ValueError) as e:
        raise UserError(f"{cfg.student}: cannot load the student's config ({str(e).splitlines()[0]})") from None
    if config.model_type not in getattr(transformers.models.auto.modeling_auto, types):
        raise UserError(
            f"{cfg.student}: model type {config.model_type!r} has no {name.removeprefix('AutoModelFor')} head in "
            f"transformers, which --method {cfg.method} trains"
        )


def load_head_model(cfg, device, pad_token_id: int | None, path: str | None = None):
    """The student (or ``path``) with this method's head: num_labels and pad_token_id set on its config."""
    import torch
    import transformers

    from reasonkit.distill.data import model_ref
    from reasonkit.distill.levers import resolve_attention

    name, labels = HEADS[cfg.method][:2]
    transformers.set_seed(getattr(cfg, "seed", 0))  # the new head's random init: the same run draws the same head
    cuda = device is not None and device.kind == "cuda"
    dtype = torch.bfloat16 if cuda and device.bf16 else torch.float32
    attention = resolve_attention(cfg.attn_implementation, cuda=cuda)  # auto: FlashAttention 2 or SDPA
    with _quiet_head_init():
        try:
            return getattr(transformers, name).from_pretrained(
                path or model_ref(cfg.student),
                num_labels=labels,
                pad_token_id=pad_token_id,
                dtype=dtype,
                attn_implementation=attention,
            )
        except (OSError, ValueError) as e:
            raise UserError(
                f"{path or cfg.student}: cannot load the student as {name} ({str(e).splitlines()[0]})"
            ) from None


@contextlib.contextmanager
def _quiet_head_init():
    """Loading a causal LM under a classification head reports the new ``score`` and the unused ``lm_head``:
    expected, so silenced (TRL's own context for sequence classification, transformers' verbosity for tokens)."""
    from transformers.utils import logging as hf_logging
    from trl.trainer.reward_trainer import suppress_seqcls_warning

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with suppress_seqcls_warning():
            yield
    finally:
        hf_logging.set_verbosity(level)


def head_lora(cfg):
    """peft's LoRA for a head model: the task type peft wraps it as, and the random ``score`` head trained whole."""
    from peft import LoraConfig

    modules = (
        cfg.target_modules
        if cfg.target_modules == "all-linear"
        else [m.strip() for m in cfg.target_modules.split(",") if m.strip()]
    )
    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=modules,
        bias="none",
        task_type=HEADS[cfg.method][2],
        modules_to_save=["score"],
    )


def merge_head_adapter(method: str, adapter_dir: Path, out_dir: Path, bf16: bool) -> Path:
    """Fold a head model's saved LoRA adapter (and its trained ``score``) into a plain model directory.

    peft's AutoPeftModelFor*Classification would rebuild the base with transformers' default two
    labels; the base is loaded here with the head's own ``num_labels`` and ``pad_token_id`` instead.
    """
    import torch
    from peft import PeftConfig, PeftModel
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(adapter_dir))
    base = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
    model = load_head_model(
        SimpleNamespace(method=method, student=base, attn_implementation="sdpa"), None, tok.pad_token_id
    )
    model = PeftModel.from_pretrained(
        model.to(torch.bfloat16 if bf16 else torch.float32), str(adapter_dir)
    ).merge_and_unload()
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))
    copy_prm_file(adapter_dir, out_dir)
    return out_dir


def write_prm_file(model_dir: Path, separator: str) -> None:
    """``reasonkit_prm.json``: how a scorer must present steps to this PRM (reward/steps.py's encode_steps)."""
    (model_dir / PRM_FILE).write_text(
        json.dumps(
            {
                "step_separator": separator,
                "labels": {"0": "bad", "1": "good"},
                "format": "[bos] prompt, then each step followed by step_separator, every piece tokenised on its own "
                "without "
                "special tokens; a step's score is softmax(logits)[1] at its last token "
                "(reasonkit.distill.reward.prm.encode_steps)",
            },
            indent=2,
        )
        + "\n"
    )


def copy_prm_file(src: Path, dst: Path) -> None:
    if (src / PRM_FILE).is_file():
        (dst / PRM_FILE).write_text((src / PRM_FILE).read_text())


def module(method: str):
    """distill/reward/rm.py or distill/reward/prm.py: read, needs_template, lengths, arguments, dataset, build, held_out, markdown."""  # noqa: E501
    if method == "rm":
        from reasonkit.distill.reward import rm as chosen
    else:
        from reasonkit.distill.reward import prm as chosen
    return chosen


def write_markdown(out: Path, report: dict) -> Path:
    """report.md: what was trained, the held-out figures before and after, and where the model is."""
    c = report["config"]
    kind = "Reward model" if report["method"] == "rm" else "Process reward model"
    lines = [
        f"# {kind}: {Path(report['student']).name} on {Path(report['data']).name}",
        "",
        f"{report['rows']} rows ({report['train_rows']} trained, {report['heldout_rows']} held out), "
        f"{report['steps']} steps, "
        f"{'full fine-tuning' if c['full'] else 'LoRA r ' + str(c['lora_r'])}, lr {report['learning_rate']}, "
        f"{report['train_runtime_s']:.1f} s",
        "",
    ]
    if report.get("loss_first") is not None:
        lines += [f"Loss {report['loss_first']:.4f} -> {report['loss_final']:.4f}", ""]
    lines += module(report["method"]).markdown(report)
    for key in ("model", "adapter", "merged"):
        if report.get(key):
            lines.append(f"- {key}: `{report[key]}`")
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
