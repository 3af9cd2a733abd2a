"""Tiny reward models built offline from the embedded teacher's config and tokenizer (random weights).

The score head is drawn with std 1 (not the 0.02 of an initialiser) so rewards spread over whole units:
a test that two paths agree within 1e-5 then compares numbers far apart from each other.
"""

from __future__ import annotations

import json
from pathlib import Path

TEACHER = Path(__file__).resolve().parents[2] / "recipes" / "assets" / "teacher"


def build_reward_model(out_dir, kind: str = "rm", seed: int = 0, separator: str = "\n", std: float = 1.0) -> str:
    """A random Llama ``ForSequenceClassification`` (num_labels 1) or, ``kind="prm"``, ``ForTokenClassification``
    (num_labels 2, with reasonkit_prm.json), saved with the teacher's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoTokenizer, LlamaForSequenceClassification, LlamaForTokenClassification

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(TEACHER, num_labels=1 if kind == "rm" else 2)
    model = (LlamaForSequenceClassification if kind == "rm" else LlamaForTokenClassification)(config)
    with torch.no_grad():
        model.score.weight.normal_(0.0, std)
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(TEACHER).save_pretrained(out_dir)
    if kind == "prm":
        (Path(out_dir) / "reasonkit_prm.json").write_text(json.dumps({"step_separator": separator}))
    return str(out_dir)


def reward_models(out_dir: Path) -> dict[str, str]:
    """An rm and a prm under ``out_dir``, by kind (the prm's head drawn small: P(good) away from 0 and 1)."""
    return {"rm": build_reward_model(out_dir / "rm"), "prm": build_reward_model(out_dir / "prm", kind="prm", std=0.1)}


def arithmetic_traces(n_prompts: int = 6, samples: int = 4, seed: int = 0) -> list[dict]:
    """Traces rows of the teacher's task shape, of varied lengths, some answers wrong."""
    import random

    from ..helpers.synthetic import trace

    rng = random.Random(seed)
    rows = []
    for p in range(n_prompts):
        a, b = rng.randrange(10, 99), rng.randrange(2, 9)
        for s in range(samples):
            got = a * b + (0 if rng.random() < 0.6 else rng.randrange(1, 9))
            lines = "\n".join(f"{a} * {b} = {got}" for _ in range(1 + rng.randrange(4)))
            rows.append(
                trace(
                    f"p{p}",
                    s,
                    problem=f"What is {a} * {b}?",
                    reasoning=lines,
                    response=f"\\boxed{{{got}}}",
                    answer=str(a * b),
                )
            )
    return rows
