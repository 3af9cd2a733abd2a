"""The embedded teacher: a 1.1M-parameter Llama trained from scratch on the synthetic task.

The quickstart needs a "reasoning model" that runs anywhere in seconds and writes R1-shaped
traces (``<think>...</think>`` then ``\\boxed{N}``). This module trains one on worked solutions
from recipes/tasks/math.py with a plain torch loop (fp32, loss on the assistant turn only) and saves it
with ``save_pretrained``, so transformers, vLLM, peft and TRL load it like any checkpoint. The
shipped copy lives in ``recipes/assets/teacher``; tests and the quickstart only read it.

Sampled at temperature 0.6-1.0 the teacher still makes arithmetic slips on a real share of
problems: that is wanted, so the verify filter and the preference pairs have work to do. The
training report records greedy and sampled accuracy on held-out problems of both variants.

Shell: ``distill make-teacher --out /tmp/teacher --max-steps 5 --n-train 64``.

>>> import tempfile
>>> report = make_teacher(tempfile.mkdtemp(), n_train=32, max_steps=2, n_eval=4, log=None)
>>> report["steps"], sorted(report["greedy_accuracy"])
(2, ['aime', 'mul'])
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reasonkit.recipes.tasks import math as task

#: Where the shipped teacher lives (package data; read-only for tests and the quickstart).
DEFAULT_DIR = Path(__file__).parent.parent / "assets" / "teacher"
REPORT = "training_report.json"
#: The longest worked solution is 141 tokens (digits are single tokens); 192 leaves room for slips.
MAX_NEW_TOKENS = 192
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


# long: the tiny teacher's training recipe read top to bottom, as torchtune's recipes are
def make_teacher(
    out_dir: str | os.PathLike = DEFAULT_DIR,
    *,
    n_train: int = 5000,
    epochs: float = 9.0,
    max_steps: int | None = None,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    n_eval: int = 200,
    temperatures: Sequence[float] = (0.6, 1.0),
    log: Callable[[str], None] | None = print,
) -> dict:
    """Train the tiny teacher into ``out_dir`` and return its training report (also written there).

    ``n_train`` worked examples, half of each variant, drawn from the training side of the task's
    split; ``epochs`` passes over them unless ``max_steps`` caps the number of optimizer steps.
    Accuracy is measured on ``n_eval`` held-out problems per variant: greedy, and one sample per
    problem at each of ``temperatures``.
    """
    import torch

    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model, build_tokenizer

    started = time.time()
    say = log or (lambda _msg: None)
    torch.manual_seed(seed)
    problems = task.make_problems(n_train // 2, seed, "mul") + task.make_problems(n_train - n_train // 2, seed, "aime")
    tok = build_tokenizer([task.render(p) for p in problems])
    shape = TinyLlama()
    model = build_model(tok, shape=shape, seed=seed)
    n_params = sum(p.numel() for p in model.parameters())
    examples = [_encode(tok, p) for p in problems]

    steps_per_epoch = math.ceil(len(examples) / batch_size)
    total = max_steps if max_steps is not None else max(1, round(epochs * steps_per_epoch))
    say(f"teacher: {n_params:,} parameters, {len(examples)} examples, {total} steps of {batch_size}")
    final_loss = train_loop(
        model, examples, tok.pad_token_id, total=total, batch_size=batch_size, lr=lr, seed=seed, say=say
    )
    train_s = time.time() - started

    model.eval()
    held_out = {v: task.make_problems(n_eval, seed, v, split="test") for v in task.VARIANTS}
    greedy = {v: accuracy(model, tok, ps) for v, ps in held_out.items()}
    sampled = {
        str(t): {v: accuracy(model, tok, ps, temperature=t, seed=seed) for v, ps in held_out.items()}
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
            "eval": f"{n_eval} held-out problems per variant (task split 'test', disjoint from training pairs)",
            "greedy_accuracy": greedy,
            "sampled_accuracy": sampled,
            # The share the filters will drop: what makes the teacher useful downstream.
            "sampled_error_share": {t: {v: round(1 - a, 4) for v, a in accs.items()} for t, accs in sampled.items()},
        },
    )
    say(f"teacher: greedy {greedy}, sampled {sampled}, {report['wall_s']} s -> {out_dir}")
    return report


def save_teacher(
    model,
    tok,
    out: Path,
    *,
    started: float,
    n_params: int,
    shape,
    n_train: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    final_loss: float,
    train_s: float,
    extra: dict,
) -> dict:
    """Write a trained teacher (model, tokenizer, ``training_report.json``) and return its report: what every
    teacher records (shape, data, schedule, loss, times, versions, size), with ``extra`` (its task's figures)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    report = {
        "parameters": n_params,
        "shape": dataclasses.asdict(shape),
        "n_train": n_train,
        "steps": steps,
        "epochs": round(steps * batch_size / n_train, 2),
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "final_loss": round(final_loss, 4),
        "train_wall_s": round(train_s, 1),
        **extra,
        "wall_s": round(time.time() - started, 1),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
    }
    report["size_bytes"] = sum(f.stat().st_size for f in out.iterdir() if f.is_file() and f.name != REPORT)
    (out / REPORT).write_text(json.dumps(report, indent=2) + "\n")
    return report


def _encode(tok, problem: dict) -> tuple[list[int], int]:
    """Token ids of the rendered example and the prompt length (those positions get no loss).

    The prompt ends in the special token ``<|assistant|>``, so BPE never merges across the
    boundary and the prompt's ids are a prefix of the full text's ids.
    """
    prompt = tok(task.render(problem, with_solution=False), add_special_tokens=False)["input_ids"]
    full = tok(task.render(problem), add_special_tokens=False)["input_ids"]
    assert full[: len(prompt)] == prompt, "prompt tokens must be a prefix of the example's"
    return full, len(prompt)


def train_loop(
    model,
    examples,
    pad_id: int,
    *,
    total: int,
    batch_size: int,
    lr: float,
    seed: int,
    say,
    loss_fn=None,
    after_step=None,
) -> float:
    """AdamW with linear warmup and cosine decay; returns the mean loss of the last 50 steps.

    ``loss_fn(model, input_ids, labels, attention_mask)`` replaces the plain forward when given (the agent
    teacher runs the preamble every example shares once per step). ``after_step(steps_done)`` is called after
    each optimizer step (the agent teacher saves snapshots there).
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    warmup = max(1, min(100, total // 10))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    model.train()
    order: list[int] = []
    recent: list[float] = []
    for step in range(total):
        if len(order) < batch_size:  # reshuffle each epoch
            order += torch.randperm(len(examples), generator=gen).tolist()
        batch, order = [examples[i] for i in order[:batch_size]], order[batch_size:]
        input_ids, labels, mask = collate(batch, pad_id)
        if loss_fn is None:
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        else:
            loss = loss_fn(model, input_ids, labels, mask)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        recent = (recent + [loss.item()])[-50:]
        if after_step is not None:
            after_step(step + 1)
        if step % 100 == 0 or step == total - 1:
            say(f"step {step + 1}/{total} loss {sum(recent) / len(recent):.4f} lr {sched.get_last_lr()[0]:.2e}")
    return sum(recent) / len(recent)


def collate(batch, pad_id: int):
    """Right-padded ids, labels (-100 on prompt and padding) and the attention mask.

    An example is ``(ids, n_prompt)`` (loss on everything after the prompt) or ``(ids, loss_mask)``
    with one 0/1 per token (a multi-turn tool-use trajectory: loss on the assistant's turns only,
    never on tool observations; recipes/teachers/agent.py).
    """
    import torch

    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, target) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        if isinstance(target, int):
            labels[row, target : len(ids)] = torch.tensor(ids[target:])
        else:
            labels[row, : len(ids)] = torch.where(torch.tensor(target, dtype=torch.bool), torch.tensor(ids), -100)
        mask[row, : len(ids)] = 1
    return input_ids, labels, mask


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` in ``text``, or None.

    >>> extract_boxed("so 2 * 3 = 6. The answer is \\boxed{6}.")
    '6'
    >>> extract_boxed("no box") is None
    True
    """
    found = _BOXED.findall(text)
    return found[-1].strip() if found else None


def complete(
    model, tok, problems: Sequence[dict], *, temperature: float = 0.0, seed: int = 0, batch_size: int = 256
) -> list[str]:
    """The model's completions (special tokens stripped) for ``problems``; greedy at temperature 0.

    Batched with left padding, the way generation stages call the model.
    """
    return generate_texts(
        model,
        tok,
        [task.render(p, with_solution=False) for p in problems],
        max_new_tokens=MAX_NEW_TOKENS,
        temperature=temperature,
        seed=seed,
        batch_size=batch_size,
    )


def generate_texts(
    model,
    tok,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    batch_size: int = 256,
) -> list[str]:
    """Completions of rendered ``prompts`` (special tokens stripped): left-padded batches, greedy at temperature 0,
    else pure temperature sampling (no top-k/top-p), as the generate stage's defaults would do. Every teacher's
    report measures its model through this."""
    import torch

    torch.manual_seed(seed)
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    side, tok.padding_side = tok.padding_side, "left"
    texts: list[str] = []
    try:
        for start in range(0, len(prompts), batch_size):
            enc = tok(
                list(prompts[start : start + batch_size]), return_tensors="pt", padding=True, add_special_tokens=False
            )
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **sampling)
            texts += tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    finally:
        tok.padding_side = side
    return texts


def accuracy(model, tok, problems: Sequence[dict], *, temperature: float = 0.0, seed: int = 0) -> float:
    """Exact-match share of ``problems`` whose last ``\\boxed{}`` equals the gold answer."""
    if not problems:
        return 0.0
    texts = complete(model, tok, problems, temperature=temperature, seed=seed)
    right = sum(extract_boxed(t) == p["answer"] for t, p in zip(texts, problems, strict=True))
    return round(right / len(problems), 4)
