"""The ``student`` stage: a fresh random-init Llama student sharing a teacher's tokenizer.

The default shape is about 0.5M parameters (hidden 96, 3 layers of 3 heads, MLP 384): per layer
4*96^2 + 3*96*384 = 147K, x3, + 49K tied embeddings. Head size 32 keeps it servable by vLLM's
CPU attention kernels, which do not take every head size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reasonkit.config import Checks


@dataclass(frozen=True)
class StudentConfig:
    tokenizer: str  # a model directory whose tokenizer (and chat template) the student uses
    out: str = "student"
    hidden_size: int = 96
    num_layers: int = 3
    num_heads: int = 3
    intermediate_size: int = 384
    max_position_embeddings: int = 1024
    seed: int = 0
    overwrite: bool = False

    def __post_init__(self) -> None:
        check = Checks()
        check(
            self.num_heads >= 1 and not self.hidden_size % self.num_heads,
            "hidden_size",
            f"{self.hidden_size} is not a multiple of num_heads {self.num_heads}",
        )
        check.done()


def init_student(config: StudentConfig, *, log: Callable[[str], None] | None = None) -> dict:
    """Write the student to ``config.out``; returns its size."""
    import shutil

    from transformers import AutoTokenizer

    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model

    out = Path(config.out)
    if out.exists() and (config.overwrite or not (out / "config.json").is_file()):
        shutil.rmtree(out)
    if not (out / "config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(config.tokenizer)
        shape = TinyLlama(
            config.hidden_size,
            config.num_layers,
            config.num_heads,
            config.intermediate_size,
            config.max_position_embeddings,
        )
        tmp = out.with_name(f".{out.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        build_model(tokenizer, tmp, shape=shape, seed=config.seed)
        tmp.replace(out)
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(out)
    params = (
        c.vocab_size * c.hidden_size
        + c.num_hidden_layers * (4 * c.hidden_size**2 + 3 * c.hidden_size * c.intermediate_size + 2 * c.hidden_size)
        + c.hidden_size
    )
    return {"model": str(out), "parameters": params}
