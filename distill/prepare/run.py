"""``distill prepare-student``: make a base model trainable on long chat traces, in a new directory.

Qwen2.5-Math-1.5B, the student of DeepSeek-R1-Distill-Qwen-1.5B, is a 4,096-position base model whose
EOS (``<|endoftext|>``) is not the token that ends its chat turns (``<|im_end|>``) and whose template
marks no assistant tokens. Trained as is on 16k-token R1 traces it truncates them, never learns to
stop (generation ends at EOS, the turns end elsewhere) and cannot use assistant-only loss. DeepSeek
and open-r1 first extended its positions and RoPE theta (open-r1: 32,768 positions, theta 300,000).
This step does the same, and the two other fixes, without touching a weight:

- ``config.json``: ``max_position_embeddings``, RoPE theta and/or scaling, ``eos_token_id`` = turn end;
- ``generation_config.json``: ``eos_token_id`` = [turn end, the old EOS], so generation stops at either;
- the tokenizer: EOS = turn end, pad = the old EOS (distinct from EOS, so EOS is never masked as pad),
  ``model_max_length``, and a chat template of the model's family with ``{% generation %}`` markers
  (distill/prepare/templates.py) that keeps the model's own default system prompt;
- weights are hard-linked (copied across filesystems), never rewritten; other folders (Llama's
  ``original/``) are left out.

    distill prepare-student Qwen/Qwen2.5-Math-1.5B --out students/qwen-math-32k \\
        --max-positions 32768 --rope-theta 300000 --template chatml

The result is an ordinary model directory (transformers, vLLM, peft load it); ``prepare.json`` in it
records the source, its identity and every change. A rerun with the same settings returns at once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from reasonkit.config import load_json_object
from reasonkit.distill.prepare.config import PrepareConfig, parse_rope_scaling
from reasonkit.errors import UserError

RECORD = "prepare.json"
#: Files hard-linked rather than copied: the weights (never written here).
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
#: Files the tokenizer's save writes afresh: copying the old ones would leave stale templates behind.
_REWRITTEN = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
    "generation_config.json",
    RECORD,
)


def prepare_student(cfg: PrepareConfig, *, log: Callable[[str], None] | None = None) -> dict:
    """Write the prepared student to ``cfg.out``; returns what changed (also in OUT/prepare.json)."""
    from reasonkit.identity import model_identity

    out = Path(cfg.out)
    source = _source_dir(cfg.model)
    identity = model_identity(cfg.model)
    record = out / RECORD
    if out.exists() and not cfg.overwrite:
        previous = load_json_object(record) if record.is_file() else None
        if previous and previous.get("settings") == cfg.settings() and previous.get("source_identity") == identity:
            return previous
        what = (
            "was prepared with other settings or from another model"
            if previous
            else "exists and is not a prepared student"
        )
        raise UserError(f"{out}: {what}; pass --overwrite to replace it, or choose another --out")

    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    linked = _link_files(source, tmp)
    changes = _rewrite(source, tmp, cfg)
    result = {
        "model": str(out),
        "source": cfg.model,
        "source_identity": identity,
        "settings": cfg.settings(),
        "linked_weights": linked,
        **changes,
    }
    (tmp / RECORD).write_text(json.dumps(result, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return result


# -- steps ---------------------------------------------------------------------------------------
def _source_dir(model: str) -> Path:
    path = Path(os.path.expanduser(model))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{model}: not a model directory (no config.json)")
        return path
    from reasonkit.identity import looks_like_hub_id

    if not looks_like_hub_id(model):
        raise UserError(f"{model}: no such model directory")
    from huggingface_hub import snapshot_download

    try:  # offline (HF_HUB_OFFLINE=1): the local cache, as `huggingface-cli download` left it
        return Path(
            snapshot_download(
                model, allow_patterns=["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken"]
            )
        )
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"{model}: cannot fetch the model ({first})") from None


def _link_files(source: Path, dest: Path) -> int:
    """Hard-link the weights (copy when linking fails), copy the small files; returns the linked count."""
    linked = 0
    for path in sorted(source.iterdir()):
        if path.name.startswith(".") or path.name in _REWRITTEN or not path.is_file():
            continue
        real = path.resolve()  # the Hub cache's snapshot entries are symlinks to blobs
        if path.name.endswith(_WEIGHTS):
            try:
                os.link(real, dest / path.name)
                linked += 1
                continue
            except OSError:
                pass
        shutil.copyfile(real, dest / path.name)
    return linked


def _template(tok, vocab: dict, cfg: PrepareConfig) -> tuple:
    """The chat template and turn-end token ``cfg`` asks for, checked against the vocabulary: (the family or None,
    the template's text, the turn-end token)."""
    from reasonkit.distill.prepare.templates import FAMILIES, detect_family, own_default_system

    family = None
    if cfg.template == "auto":
        family = detect_family(vocab)
        if family is None:
            raise UserError(
                f"{cfg.model}: no known chat family in its vocabulary (looked for {', '.join(FAMILIES)}); "
                "pass --template FILE.jinja (with {% generation %} markers) and --eos TOKEN"
            )
    elif cfg.template in FAMILIES:
        family = FAMILIES[cfg.template]
        missing = [t for t in family.markers if t not in vocab]
        if missing:
            raise UserError(f"--template {cfg.template}: {cfg.model}'s vocabulary lacks {', '.join(missing)}")
    if family is not None:
        template = family.template(own_default_system(tok, family))
    elif cfg.template == "keep":  # a student reasonkit trained already has its marked template and EOS
        template = tok.chat_template
        if not template or "{% generation %}" not in template.replace("{%- generation %}", "{% generation %}"):
            raise UserError(
                f"--template keep: {cfg.model}'s tokenizer has no chat template with {{% generation %}} "
                "markers; pass auto, a family name or a .jinja file"
            )
    else:
        try:
            template = Path(cfg.template).read_text()
        except OSError as e:
            raise UserError(
                f"--template {cfg.template}: not auto, {', '.join(FAMILIES)}, nor a readable file ({e.strerror})"
            ) from None
    turn_end = cfg.eos or (family.turn_end if family else tok.eos_token if cfg.template == "keep" else None)
    if turn_end is None:
        raise UserError(
            f"--template {cfg.template}: a template file needs --eos TOKEN (the token that ends its turns)"
        )
    if turn_end not in vocab:
        raise UserError(f"--eos {turn_end}: not in {cfg.model}'s vocabulary")
    return family, template, turn_end


def _rewrite(source: Path, dest: Path, cfg: PrepareConfig) -> dict:
    """Tokenizer, template, config and generation config, rewritten into ``dest``; returns the changes."""
    from transformers import AutoTokenizer

    from reasonkit.distill.prepare.templates import turn_end_token

    tok = AutoTokenizer.from_pretrained(str(source))
    vocab = tok.get_vocab()
    family, template, turn_end = _template(tok, vocab, cfg)

    old_eos, old_pad = tok.eos_token, tok.pad_token
    tok.chat_template = template
    tok.eos_token = turn_end
    if (tok.pad_token is None or tok.pad_token == turn_end) and old_eos not in (None, turn_end):
        tok.pad_token = old_eos  # a stop token that is not the turn end pads safely (Qwen2.5-Instruct does)
    if cfg.max_positions is not None:
        tok.model_max_length = cfg.max_positions
    tok.save_pretrained(str(dest))

    turn_end_id = vocab[turn_end]
    config = load_json_object(source / "config.json")
    changes = {
        "eos": [old_eos, turn_end],
        "pad": [old_pad, tok.pad_token],
        "template": family.name if family else cfg.template,
    }
    changes.update(_set_context(config, cfg))
    changes["eos_token_id"] = [config.get("eos_token_id"), turn_end_id]
    config["eos_token_id"] = turn_end_id
    _write_json(dest / "config.json", config)

    generation = (
        load_json_object(source / "generation_config.json") if (source / "generation_config.json").is_file() else {}
    )
    before = generation.get("eos_token_id")
    stops = [turn_end_id] + [
        i for i in (before if isinstance(before, list) else [before]) if i is not None and i != turn_end_id
    ]
    generation["eos_token_id"] = stops
    if tok.pad_token_id is not None:
        generation.setdefault("pad_token_id", tok.pad_token_id)
    _write_json(dest / "generation_config.json", generation)
    changes["generation_eos_token_id"] = [before, stops]

    reloaded = AutoTokenizer.from_pretrained(str(dest))  # what training and vLLM will see
    if turn_end_token(reloaded) != turn_end:
        raise UserError(
            f"--template {cfg.template}: its assistant turns do not end in {turn_end!r} ({turn_end_token(reloaded)!r} "
            "found)"
        )
    changes["renders_like_original"] = _same_text(AutoTokenizer.from_pretrained(str(source)), reloaded)
    return changes


def _same_text(old, new) -> bool | None:
    """Whether both templates render a system-less and a system conversation to the same text (None: the
    old one cannot render them). False is worth a look: prompts at eval time render as the new one does."""
    conversations = (
        [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
        [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
    )
    try:
        return all(
            old.apply_chat_template(c, tokenize=False) == new.apply_chat_template(c, tokenize=False)
            for c in conversations
        )
    except Exception:
        return None


def _set_context(config: dict, cfg: PrepareConfig) -> dict:
    """Max positions and RoPE, in whichever form the config keeps them (``rope_parameters`` in
    transformers 5, top-level ``rope_theta`` / ``rope_scaling`` in older files); returns before/after."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config  # multimodal
    old_positions = text.get("max_position_embeddings")
    changes = {}
    if cfg.max_positions is not None:
        text["max_position_embeddings"] = cfg.max_positions
        changes["max_position_embeddings"] = [old_positions, cfg.max_positions]
    rope = text.get("rope_parameters") if isinstance(text.get("rope_parameters"), dict) else None
    if cfg.rope_theta is not None:
        before = rope.get("rope_theta") if rope else text.get("rope_theta")
        theta = float(cfg.rope_theta)
        if rope is not None:
            rope["rope_theta"] = theta
        else:
            text["rope_theta"] = theta
        changes["rope_theta"] = [before, theta]
    if cfg.rope_scaling is not None:
        kind, factor = parse_rope_scaling(cfg.rope_scaling)
        scaling = {"rope_type": kind, "factor": factor, "original_max_position_embeddings": old_positions}
        if rope is not None:
            before = {k: rope.get(k) for k in scaling}
            rope.update(scaling)
        else:
            before = text.get("rope_scaling")
            text["rope_scaling"] = scaling
        changes["rope_scaling"] = [before, scaling]
    return changes


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")
