"""``distill prepare-student``'s settings: one frozen dataclass, checked before any model loads (no transformers)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from reasonkit.config import Checks, setting


@dataclass(frozen=True)
class PrepareConfig:
    model: str = setting(
        cli=False
    )  # the command's argument: a model directory or Hub id (from the local cache when offline)
    out: str = setting("student", "The new model directory (weights hard-linked, never changed).")
    # new max_position_embeddings (and tokenizer model_max_length)
    max_positions: int | None = setting(None, "New max_position_embeddings (open-r1: 32768 for Qwen2.5-Math).")
    rope_theta: float | None = setting(None, "New RoPE base (open-r1: 300000 with 32768 positions).")
    # "TYPE:FACTOR", e.g. "yarn:4" or "linear:2" (original length = the old positions)
    rope_scaling: str | None = setting(
        None, "RoPE scaling TYPE:FACTOR, e.g. yarn:4 (the original length is the old positions)."
    )
    template: str = setting(
        "auto",
        "Chat template with {% generation %} markers: auto (from the vocabulary), chatml, "
        "llama3, keep (the model's own, with its EOS), or a .jinja file.",
    )
    eos: str | None = setting(None, "The turn-end token to make EOS [the family's: <|im_end|>, <|eot_id|>].")
    overwrite: bool = setting(False, "Replace OUT if it holds something else.")

    def __post_init__(self) -> None:
        check = Checks()
        check(
            self.max_positions is None or self.max_positions >= 1,
            "max_positions",
            f"must be >= 1, found {self.max_positions}",
        )
        check(self.rope_theta is None or self.rope_theta > 0, "rope_theta", f"must be > 0, found {self.rope_theta}")
        if self.rope_scaling is not None:
            check.run(lambda: parse_rope_scaling(self.rope_scaling))
        check.done()

    def settings(self) -> dict:
        data = asdict(self)
        data.pop("overwrite")
        return data


def parse_rope_scaling(text: str) -> tuple[str, float]:
    """``"yarn:4"`` -> ``("yarn", 4.0)``.

    >>> parse_rope_scaling("linear:2")
    ('linear', 2.0)
    >>> parse_rope_scaling("yarn")
    Traceback (most recent call last):
    ...
    reasonkit.errors.FieldErrors: rope_scaling: expected TYPE:FACTOR with TYPE one of linear, dynamic, yarn, longrope, llama3 (e.g. yarn:4); found 'yarn'
    """  # noqa: E501
    kinds = ("linear", "dynamic", "yarn", "longrope", "llama3")
    kind, _, factor = str(text).partition(":")
    try:
        value = float(factor)
    except ValueError:
        value = 0.0
    check = Checks()
    check(
        kind in kinds and value > 0,
        "rope_scaling",
        f"expected TYPE:FACTOR with TYPE one of {', '.join(kinds)} (e.g. yarn:4); found {text!r}",
    )
    check.done()
    return kind, value
