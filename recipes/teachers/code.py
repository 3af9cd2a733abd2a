"""The embedded code teacher: a tiny Llama trained here to write recipes/tasks/code.py's programs.

The code quickstart (recipes/code-quickstart.yaml) needs a model that writes a short ``<think>`` and
then a fenced ```python program reading two integers from stdin, for ``distill generate`` to sample
and ``distill filter --verifier code`` to run. This module trains one from scratch on the task's
reference answers (code_task.solution) with ``distill make-teacher``'s loop (recipes/teachers/math.py:
AdamW, warmup, cosine, loss on the assistant turn only), a tokenizer trained on the task's text
(recipes/teachers/tiny.py) and recipes/teachers/tiny.py's chat template. The prompt carries :data:`INSTRUCTION`, which
the recipe's generate and eval steps pass as ``instruction:``.

The report's pass@1 is the real code verifier's (filters/code/verify.py's ``code_scores``: each program run
in the sandbox against the problem's five tests) on held-out problems, greedy and sampled. The
think block's arithmetic may slip; the program is what is checked.

Shell: ``distill make-teacher --task code --out /tmp/code_teacher``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reasonkit.recipes.tasks import code as code_task

DEFAULT_DIR = Path(__file__).parent.parent / "assets" / "code_teacher"
REPORT = "training_report.json"
#: Appended to each problem (the user turn is ``problem + "\n\n" + INSTRUCTION``, as generate builds it).
INSTRUCTION = "Think briefly, then write the program in a fenced python code block."
#: A reference answer is about 60 tokens; 128 leaves room for a wandering sample.
MAX_NEW_TOKENS = 128
VARIANTS = tuple(code_task.ASKS)


def prompt_text(problem: dict | str) -> str:
    """The chat text a model sees for one problem (recipes/teachers/tiny.py's template, generation prompt added).

    >>> prompt_text("Print 1.")
    '<|user|>Print 1.\\n\\nThink briefly, then write the program in a fenced python code block.<|end|><|assistant|>'
    """
    text = problem if isinstance(problem, str) else problem["problem"]
    return f"<|user|>{text}\n\n{INSTRUCTION}<|end|><|assistant|>"


def encode(tok, problem: dict) -> tuple[list[int], int]:
    """Token ids of the prompt plus the reference answer, and the prompt's length (no loss there)."""
    prompt = tok(prompt_text(problem), add_special_tokens=False)["input_ids"]
    full = tok(prompt_text(problem) + code_task.solution(problem) + "<|end|>", add_special_tokens=False)["input_ids"]
    assert full[: len(prompt)] == prompt, "prompt tokens must be a prefix of the example's"
    return full, len(prompt)


def complete(
    model, tok, problems: Sequence[dict], *, temperature: float = 0.0, seed: int = 0, batch_size: int = 128
) -> list[str]:
    """The model's answers to ``problems`` (greedy at temperature 0), left-padded batches."""
    from reasonkit.recipes.teachers.math import generate_texts

    return generate_texts(
        model,
        tok,
        [prompt_text(p) for p in problems],
        max_new_tokens=MAX_NEW_TOKENS,
        temperature=temperature,
        seed=seed,
        batch_size=batch_size,
    )


def pass_at_1(answers: Sequence[str], problems: Sequence[dict]) -> float:
    """Share of ``answers`` whose program passes all of its problem's tests in the code verifier's sandbox."""
    from reasonkit.filters.code.verify import code_scores

    scores = code_scores(list(answers), [p["tests"] for p in problems])
    return round(sum(s or 0.0 for s in scores) / max(1, len(problems)), 4)


# long: the code teacher's training recipe read top to bottom, as torchtune's recipes are
def make_code_teacher(
    out_dir: str | os.PathLike = DEFAULT_DIR,
    *,
    n_train: int = 2000,
    max_steps: int | None = None,
    epochs: float = 4.0,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    n_eval: int = 100,
    temperatures: Sequence[float] = (0.8,),
    log: Callable[[str], None] | None = print,
) -> dict:
    """Train the code teacher into ``out_dir``; returns its training report (also written there).

    ``n_train`` problems, half of each variant, from the training side of the math task's split;
    pass@1 on ``n_eval`` held-out problems per variant, greedy and sampled at each of ``temperatures``.
    """
    import torch

    from reasonkit.recipes.teachers.math import save_teacher, train_loop
    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model, build_tokenizer

    started = time.time()
    say = log or (lambda _msg: None)
    torch.manual_seed(seed)
    problems = code_task.make_problems(n_train // 2, seed, "mul") + code_task.make_problems(
        n_train - n_train // 2, seed, "aime"
    )
    tok = build_tokenizer([prompt_text(p) + code_task.solution(p) + "<|end|>" for p in problems])
    shape = TinyLlama()
    model = build_model(tok, shape=shape, seed=seed)
    n_params = sum(p.numel() for p in model.parameters())
    examples = [encode(tok, p) for p in problems]
    total = max_steps if max_steps is not None else max(1, round(epochs * math.ceil(len(examples) / batch_size)))
    say(f"code teacher: {n_params:,} parameters, {len(examples)} examples, {total} steps of {batch_size}")
    final_loss = train_loop(
        model, examples, tok.pad_token_id, total=total, batch_size=batch_size, lr=lr, seed=seed, say=say
    )
    train_s = time.time() - started

    model.eval()
    held_out = {v: code_task.make_problems(n_eval, seed, v, split="test") for v in VARIANTS} if n_eval else {}
    greedy = {v: pass_at_1(complete(model, tok, ps), ps) for v, ps in held_out.items()}
    sampled = {
        str(t): {v: pass_at_1(complete(model, tok, ps, temperature=t, seed=seed), ps) for v, ps in held_out.items()}
        for t in temperatures
    }
    report = save_teacher(
        model,
        tok,
        Path(out_dir),
        started=started,
        n_params=n_params,
        shape=shape,
        n_train=len(examples),
        steps=total,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        final_loss=final_loss,
        train_s=train_s,
        extra={
            "instruction": INSTRUCTION,
            "eval": f"{n_eval} held-out problems per variant (split 'test'), programs run by the code verifier",
            "greedy_pass_at_1": greedy,
            "sampled_pass_at_1": sampled,
        },
    )
    say(f"code teacher: greedy pass@1 {greedy}, sampled {sampled}, {report['wall_s']} s -> {out_dir}")
    return report
