"""GRPO rewards a recipe's policy cannot earn, found before the recipe's first step.

The ``format`` reward pays for a closed ``<think>`` block then a boxed answer. A policy that was never
prompted for the tag, whose template does not open it, and that never learnt it (no ``<think>`` token
in its vocabulary, no SFT on think traces) almost never writes it: Qwen2.5-7B-Instruct's template and
vocabulary know no ``<think>``, so rlaif-constitutional's format reward was ~0 on every completion and
taught nothing. distill/lint/prompt.py's ``format_unmet`` is the rule; this module finds what it needs on
disk (the student's template and tokenizer files, or a prepare-student step's template) so ``distill run``
and ``--plan`` refuse the step before anything runs. What is not on this machine is the train lint's to
check when the student loads.
"""

from __future__ import annotations

import json
from pathlib import Path

THINK = "<think>"


def unmet_format_rewards(planned: list) -> list[str]:
    """One line per GRPO step whose format reward its policy cannot earn (runner.validate's ``planned``)."""
    from reasonkit.distill.lint.prompt import format_unmet, trained_by_reasonkit
    from reasonkit.recipes.recipe import references

    steps = {p.step.name: p for p in planned}
    out = []
    for p in planned:
        config = p.config
        if p.step.stage != "train" or getattr(config, "method", None) != "grpo" or "format" not in config.rewards:
            continue
        refs = references(str(p.step.config.get("student", "")))
        source = steps.get(refs[0]) if refs else None
        if (source is not None and source.step.stage == "train") or trained_by_reasonkit(config.student):
            continue  # a student trained earlier (in the recipe, or before it) learnt its format from its data
        prepare = source.config if source is not None and source.step.stage == "prepare-student" else None
        template, folder = _template(prepare, config.student)
        if template is None:
            continue
        knows = folder is not None and _knows_think(folder)
        unmet = format_unmet("\n".join([template, config.system or "", config.instruction or ""]), knows_think=knows)
        if unmet:
            out.append(f"{p.step.name}: rewards.format: {unmet}")
    return out


def _template(prepare, student: str) -> tuple[str | None, Path | None]:
    """(the chat template the student renders with, the folder of its tokenizer files), read from disk."""
    from reasonkit.recipes.plan import config_json

    model = prepare.model if prepare is not None else student
    found = config_json(str(model))
    folder = found[0].parent if found else None
    choice = getattr(prepare, "template", None)
    if choice in ("chatml", "llama3"):  # the family templates prepare-student writes (the model's system kept)
        from reasonkit.distill.prepare import templates

        return {"chatml": templates._chatml, "llama3": templates._llama3}[choice](None), folder
    if choice and choice not in ("auto", "keep"):
        path = Path(choice).expanduser()
        return (path.read_text() if path.is_file() else None), folder
    if folder is None:
        return None, None
    if (folder / "chat_template.jinja").is_file():
        return (folder / "chat_template.jinja").read_text(), folder
    try:
        return json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template"), folder
    except (OSError, ValueError):
        return None, folder


def _knows_think(folder: Path) -> bool:
    """Whether the tokenizer files hold ``<think>`` as a token of its own (a model trained to write it)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "added_tokens.json", "vocab.json"):
        try:
            if f'"{THINK}"' in (folder / name).read_text():
                return True
        except OSError:
            continue
    return False
