"""The lint's checks of the student itself (not the data): is this model ready to learn long chat traces?

A base model such as Qwen2.5-Math-1.5B fails three ways at once, none of which makes training crash:

- ``context``: ``max_length`` exceeds the model's positions (4,096): R1 traces of 16k-32k tokens are
  cut, and an eval at 32k is refused;
- ``eos_turn_end``: the chat template ends turns with a token (``<|im_end|>``) that is not a stop
  token (EOS ``<|endoftext|>``): the student learns to write ``<|im_end|>`` and generation runs on;
- ``generation_markers`` (SFT): the template has no ``{% generation %}`` markers, so assistant-only
  loss cannot find the assistant tokens.

Each message names the fix: ``distill prepare-student`` with the flags that fix it.
"""

from __future__ import annotations

from pathlib import Path

from reasonkit.distill.lint.base import Finding


def student_findings(tok, cfg, *, max_length: int, max_positions: int | None, stops: set[int]) -> list[Finding]:
    from trl.chat_template_utils import has_generation_markers

    from reasonkit.distill.prepare.templates import detect_family, turn_end_token

    family = detect_family(tok.get_vocab())
    found = []
    if max_positions is not None and max_length > max_positions:
        positions = 1 << (max_length - 1).bit_length()  # the next power of two
        found.append(
            Finding(
                "context",
                (
                    f"--max-length {max_length} exceeds the student's context length ({max_positions} positions), so "
                    "longer "
                    "examples are cut and a long eval is refused; extend it first: "
                    f"{_fix(cfg.student, family, positions)} "
                    "(raise --rope-theta with the positions, as DeepSeek-R1-Distill and open-r1 did: 300000 for 32768 "
                    "on "
                    "Qwen2.5-Math), then train on OUT"
                ),
            )
        )
    turn_end = turn_end_token(tok)
    if turn_end is not None and tok.convert_tokens_to_ids(turn_end) not in stops:
        found.append(
            Finding(
                "eos_turn_end",
                (
                    f"the chat template ends turns with {turn_end!r} but generation stops at {tok.eos_token!r}: the "
                    "student "
                    f"learns to write {turn_end!r} and never stops; make the turn end its EOS: "
                    f"{_fix(cfg.student, family)}"
                ),
            )
        )
    if cfg.method == "sft" and tok.chat_template and not has_generation_markers(tok.chat_template):
        found.append(
            Finding(
                "generation_markers",
                (
                    "the chat template has no {% generation %} markers (and TRL has no training version of it), so "
                    "assistant-only loss cannot find the assistant tokens; install a marked template: "
                    f"{_fix(cfg.student, family)}, "
                    "or pass --set chat_template=FILE.jinja (each assistant turn and its end token inside {% "
                    "generation %})"
                ),
            )
        )
    return found


def _fix(student: str, family, positions: int | None = None) -> str:
    name = Path(str(student).rstrip("/")).name or "student"
    flags = f" --max-positions {positions}" if positions else ""
    return f"distill prepare-student {student} --out {name}-prepared{flags} --template {family.name if family else 'FILE.jinja --eos TOKEN'}"  # noqa: E501
