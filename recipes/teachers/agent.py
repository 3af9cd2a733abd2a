"""The embedded tool-using teacher: a tiny Llama trained here on recipes/tasks/agent.py's reference trajectories.

It speaks TRL's Qwen2.5 chat template (recipes/teachers/tiny_tools.py): given a question and the ``search``
tool it calls ``search`` with the book's title, reads the observation, calls ``search`` with
"<author> <prize>", reads again, and answers ``\\boxed{<year>}``. The answer is only in the corpus,
so without the tool it cannot be right except by chance.

Training reuses ``distill make-teacher``'s loop (recipes/teachers/math.py: AdamW, warmup, cosine) on
whole trajectories rendered with the tool schema, loss on the assistant's turns only (tool
observations are masked, as TRL masks them). The observations are the real search tool's, so the
model learns to read what ``distill generate --tools search`` will show it.

The report's pass@1 comes from running the tool loop (:func:`solve`: greedy, batched, the real tool
executed between turns through gen/tools/base.py's ToolBox; calls parsed by TRL's
``parse_response``), with the tool and with it removed.

How the shipped models were made (one loaded core each; every report names the model it continued by content).
Facts must never repeat: trained on world 0 alone the model memorised "book and prize -> year" (3,000
steps: training loss 0.043, held-out pass@1 0.1375), so both train on other worlds (:func:`training_worlds`)
and world 0, the quickstart's, is new to them. What the model learns last is *where* a copy starts (the
title's first token in the question, the author's in the observation); continuing a copy comes early::

    distill make-teacher --task agent --train-worlds 16 --max-steps 1500 --n-eval 80 --out A      # 17 min
    distill make-teacher --task agent --train-worlds 24 --max-steps 2000 --lr 2e-3 --seed 1 \
        --n-eval 80 --init-from A --out recipes/assets/agent_base                                 # 25 min
    distill make-teacher --task agent --train-worlds 24 --max-steps 2500 --lr 1.5e-3 --seed 2 \
        --n-train 40000 --n-eval 80 --init-from recipes/assets/agent_base                        # 27 min

A (pass@1 0.0) continues copies but starts them at the wrong name; agent_base (0.35) has learnt where
to start; the teacher is agent_base trained on. One run of 3,500 steps from scratch at lr 3e-3 ended at
0.0125 (loss 0.139, still starting copies at the wrong name): the warm restarts are part of the recipe.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reasonkit.recipes.tasks import agent as agent_task

DEFAULT_DIR = Path(__file__).parent.parent / "assets" / "agent_teacher"
REPORT = "training_report.json"
#: Passages per search observation: the teacher learnt to read this many; generation must use the same
#: (``make_search(corpus, k=SEARCH_K)``). One: the top passage of each hop is the fact it needs (the task's
#: corpus is worded so), and reading the one passage is what a model this small learns in minutes; with
#: three passages, picking the right one out of distractors was not learnt in 600 steps.
SEARCH_K = 1
#: A call or an answer is under 30 tokens; 64 leaves room for a wandering sample.
MAX_NEW_TOKENS = 64
MAX_TURNS = 4
#: Optimizer steps of 16 trajectories when none are given: the first, one-world teacher's (about 14 epochs of
#: world 0's 3,497 questions; 28 min, held-out pass@1 0.1375: it memorised). The shipped models were made with
#: the --max-steps of the module docstring's three commands.
STEPS = 3000


def training_worlds(world_seed: int, n: int) -> list[int]:
    """Seeds of the worlds the teacher trains on: ``world_seed`` itself when ``n`` is 0, else ``n`` other worlds.

    Other worlds, never the evaluated one, because in one world every fact repeats each epoch and a model
    this small memorises "book and prize -> year" instead of reading the observation (one world, 3,000
    steps: training loss 0.043, held-out pass@1 0.1375). Fresh worlds leave copying as the only way to
    predict the year, and the whole evaluated world is new to the teacher.

    >>> training_worlds(0, 0), training_worlds(0, 3)
    ([0], [1, 2, 3])
    """
    return [world_seed] if n == 0 else list(range(world_seed + 1, world_seed + 1 + n))


def default_search(corpus: Sequence[dict], k: int = SEARCH_K) -> Callable:
    """The shipped BM25 ``search`` tool over the corpus rows (gen/tools/search.py)."""
    from reasonkit.gen.tools.search import make_search

    return make_search(corpus, k=k)


def encode(tok, messages: Sequence[dict], schemas: list[dict] | None) -> tuple[list[int], list[int]]:
    """Token ids of a rendered trajectory and a 0/1 loss mask: 1 on each assistant turn's tokens up to and
    including its ``<|im_end|>`` (what generation produces after the prompt; not the newline the template
    writes after it), 0 on the prompt, the tool observations and the template's scaffolding.
    """

    def ids(msgs, gen=False):
        return tok.apply_chat_template(
            list(msgs), tools=schemas, add_generation_prompt=gen, tokenize=True, return_dict=False
        )

    full = ids(messages)
    mask = [0] * len(full)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start, turn = len(ids(messages[:i], gen=True)), ids(messages[: i + 1])
        assert full[: len(turn)] == turn and turn[:start] == ids(messages[:i], gen=True), (
            "template must preserve prefixes"
        )
        end = turn.index(tok.eos_token_id, start) + 1
        mask[start:end] = [1] * (end - start)
    return full, mask


def shared_prefix_loss(prefix_len: int):
    """A loss function for teacher.train_loop that runs the ``prefix_len`` tokens every example starts with
    (the template's system and tools preamble: ~45% of a trajectory) once per step, batch of one, and
    reuses its keys and values for the whole batch; gradients flow through the shared copy. The same
    loss as the plain forward (those tokens carry no loss), at about half the cost on this CPU.
    """

    def loss_fn(model, input_ids, labels, attention_mask):
        cache = model(input_ids=input_ids[:1, :prefix_len], use_cache=True).past_key_values
        for layer in cache.layers:
            layer.keys = layer.keys.expand(input_ids.shape[0], -1, -1, -1)
            layer.values = layer.values.expand(input_ids.shape[0], -1, -1, -1)
        return model(
            input_ids=input_ids[:, prefix_len:],
            attention_mask=attention_mask,
            past_key_values=cache,
            labels=labels[:, prefix_len:],
        ).loss

    return loss_fn


def common_prefix(examples: Sequence[tuple[list[int], list[int]]]) -> int:
    """Length of the token prefix all ``examples`` share and none trains on (plus one: the first token after
    the shared part is predicted from inside it, so its label must be masked too)."""
    first = examples[0][0]
    n = len(first)
    for ids, _ in examples[1:]:
        n = next((i for i, (a, b) in enumerate(zip(first[:n], ids)) if a != b), min(n, len(ids)))
    n = min(n, *(m.index(1) for _, m in examples))  # never past the first trained token
    return max(0, n - 1)


# long: the greedy tool loop for the teacher's own answers: turns, calls and observations in one loop
def solve(model, tok, rows: Sequence[dict], tools, *, max_turns: int = MAX_TURNS, batch_size: int = 64) -> list[dict]:
    """Run the tool loop greedily on question ``rows`` (agent_task.questions rows); one result per row.

    ``tools`` is a gen/tools/base.py ToolBox; an empty one renders no tools, and a call the model makes
    anyway comes back as an ``unknown_tool`` observation. A small transformers loop: gen/tools/loop.py is
    the pipeline's loop (all backends, resumable); this one only measures the teacher.
    """
    import torch
    from trl.chat_template_utils import add_response_schema, parse_response

    from reasonkit.filters.math.extract import extract_answer

    if getattr(tok, "response_template", None) is None:
        add_response_schema(tok)
    schemas = tools.schemas() or None
    states = [
        {
            "messages": [{"role": "user", "content": agent_task.user_content(r["question"])}],
            "response": None,
            "tool_calls": 0,
            "tool_errors": 0,
        }
        for r in rows
    ]
    side, tok.padding_side = tok.padding_side, "left"
    try:
        for _ in range(max_turns):
            active = [s for s in states if s["response"] is None]
            for start in range(0, len(active), batch_size):
                batch = active[start : start + batch_size]
                prompts = [
                    tok.apply_chat_template(s["messages"], tools=schemas, add_generation_prompt=True, tokenize=False)
                    for s in batch
                ]
                enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
                with torch.no_grad():
                    out = model.generate(
                        **enc,
                        max_new_tokens=MAX_NEW_TOKENS,
                        do_sample=False,
                        pad_token_id=tok.pad_token_id,
                        eos_token_id=tok.eos_token_id,
                    )
                width = enc["input_ids"].shape[1]
                for row, state in enumerate(batch):
                    new = out[row, width:].tolist()
                    new = new[: new.index(tok.eos_token_id) + 1] if tok.eos_token_id in new else new
                    prefix = enc["input_ids"][row][enc["attention_mask"][row].bool()].tolist()
                    turn = parse_response(tok, new, prefix=prefix)
                    calls = turn.get("tool_calls") or []
                    if not calls:
                        state["response"] = turn.get("content") or ""
                        state["messages"].append({"role": "assistant", "content": state["response"]})
                        continue
                    state["messages"].append(
                        {"role": "assistant", "content": turn.get("content") or "", "tool_calls": calls}
                    )
                    for call in calls:
                        obs = tools.call(call["function"]["name"], call["function"].get("arguments"))
                        state["tool_calls"] += 1
                        state["tool_errors"] += obs.error is not None
                        state["messages"].append(
                            {"role": "tool", "name": call["function"]["name"], "content": obs.content}
                        )
    finally:
        tok.padding_side = side
    for state, row in zip(states, rows, strict=True):
        state["correct"] = state["response"] is not None and extract_answer(state["response"])[0] == row["answer"]
    return states


def pass_at_1(results: Sequence[dict]) -> float:
    return round(sum(r["correct"] for r in results) / max(1, len(results)), 4)


def make_agent_teacher(
    out_dir: str | os.PathLike = DEFAULT_DIR,
    *,
    n_train: int | None = None,
    max_steps: int | None = None,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    world_seed: int = 0,
    train_worlds: int = 0,
    init_from: str | os.PathLike | None = None,
    snapshots: Sequence[int] = (),
    n_eval: int = 200,
    vocab_size: int = 1024,
    shape=None,
    search_factory: Callable[[Sequence[dict]], Callable] = default_search,
    loss_on: str = "assistant",
    threads: int = 1,
    log: Callable[[str], None] | None = print,
) -> dict:
    """Train the tool-using teacher into ``out_dir`` and return its training report (also written there).

    ``n_train`` reference trajectories (None: every training question of the training worlds: see
    :func:`training_worlds` for ``train_worlds``); ``init_from``: a model directory to continue (its
    tokenizer kept), recorded in the report by its content identity (identity.py); ``snapshots``: steps after which the
    model is also saved to ``out_dir/step_<n>``. ``max_steps`` optimizer steps of ``batch_size`` (None: STEPS, what the
    shipped teacher took). pass@1 is measured on ``n_eval`` held-out questions (books never seen in training), greedy,
    with the search tool and without it. ``threads``: torch threads while it runs (restored after). One by default: on
    2 cores shared with other work, two threads spin-wait on each other (measured here: a step of 16 trajectories took
    2.1 s on one thread, 11-25 s on two under load).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _make(
            Path(out_dir),
            n_train=n_train,
            max_steps=max_steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            world_seed=world_seed,
            train_worlds=train_worlds,
            init_from=init_from,
            snapshots=snapshots,
            n_eval=n_eval,
            vocab_size=vocab_size,
            shape=shape,
            search_factory=search_factory,
            loss_on=loss_on,
            log=log,
        )
    finally:
        torch.set_num_threads(previous)


# long: the agent teacher's recipe read top to bottom (world, questions, traces, training), as torchtune's are
def _make(
    out: Path,
    *,
    n_train,
    max_steps,
    batch_size,
    lr,
    seed,
    world_seed,
    train_worlds,
    init_from,
    snapshots,
    n_eval,
    vocab_size,
    shape,
    search_factory,
    loss_on,
    log,
) -> dict:
    import torch

    from reasonkit.gen.tools.base import ToolBox
    from reasonkit.identity import model_identity
    from reasonkit.recipes.teachers.math import save_teacher, train_loop
    from reasonkit.recipes.teachers.tiny import TinyLlama, build_model
    from reasonkit.recipes.teachers.tiny_tools import build_tool_tokenizer

    started = time.time()
    say = log or (lambda _msg: None)
    torch.manual_seed(seed)
    world = agent_task.make_world(world_seed)
    search = search_factory(agent_task.corpus(world))
    tools = ToolBox([search])
    schemas = tools.schemas()
    trajectories = []
    for source in training_worlds(world_seed, train_worlds):
        source_search = (
            search if source == world_seed else search_factory(agent_task.corpus(agent_task.make_world(source)))
        )
        rows = agent_task.questions(agent_task.make_world(source), "train")
        trajectories += [agent_task.reference_messages(r, source_search) for r in rows]
    if n_train is not None:
        trajectories = random.Random(seed).sample(trajectories, min(n_train, len(trajectories)))

    if init_from is not None:
        # Continued training: the model and its tokenizer as they are (the shipped teacher, say).
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(init_from)
        model = AutoModelForCausalLM.from_pretrained(init_from, dtype=torch.float32)
        shape = shape or TinyLlama(
            model.config.hidden_size,
            model.config.num_hidden_layers,
            model.config.num_attention_heads,
            model.config.intermediate_size,
            model.config.max_position_embeddings,
        )
    else:
        # The tokenizer learns from the same rendered text the model trains on (a throwaway template-only
        # tokenizer renders it: rendering does not depend on the vocabulary).
        renderer = build_tool_tokenizer(["x"], vocab_size=300)
        tok = build_tool_tokenizer(
            [renderer.apply_chat_template(t, tools=schemas, tokenize=False) for t in trajectories],
            vocab_size=vocab_size,
        )
        shape = shape or TinyLlama()
        model = build_model(tok, shape=shape, seed=seed)
    n_params = sum(p.numel() for p in model.parameters())
    examples = [encode(tok, t, schemas) for t in trajectories]

    total = max_steps if max_steps is not None else STEPS
    mean_len = sum(len(ids) for ids, _ in examples) / len(examples)
    say(
        f"agent teacher: {n_params:,} parameters, {len(examples)} trajectories of {mean_len:.0f} tokens, {total} "
        f"steps of {batch_size}"
    )
    shared = common_prefix(examples)
    if loss_on == "all":
        # Loss on every token after the shared preamble, the question and the observations too (they repeat
        # the names to be copied). Kept as an option; measured with three passages per search, 600 steps of
        # 16: held-out pass@1 0.0375, against 0.025 with loss on the assistant turns alone.
        examples = [(ids, [0] * shared + [1] * (len(ids) - shared)) for ids, _ in examples]
    elif loss_on != "assistant":
        raise ValueError(f"loss_on={loss_on!r}: expected 'all' or 'assistant'")

    def snapshot(step: int) -> None:  # an earlier checkpoint of the same run, as it was at ``step``
        if step in snapshots:
            model.save_pretrained(out / f"step_{step}")
            tok.save_pretrained(out / f"step_{step}")

    final_loss = train_loop(
        model,
        examples,
        tok.pad_token_id,
        total=total,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        say=say,
        loss_fn=shared_prefix_loss(shared) if shared else None,
        after_step=snapshot,
    )
    train_s = time.time() - started

    model.eval()
    held_out = agent_task.questions(world, "test")
    held_out = random.Random(seed).sample(held_out, min(n_eval, len(held_out)))
    with_tool = solve(model, tok, held_out, tools)
    without = solve(model, tok, held_out, ToolBox([]))
    report = save_teacher(
        model,
        tok,
        out,
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
            "vocab_size": len(tok),
            "world_seed": world_seed,
            "train_worlds": training_worlds(world_seed, train_worlds),
            # named by content (identity.py: weights, config, tokenizer and template), as every stage names a model
            "init_from": None
            if init_from is None
            else {"path": str(init_from), "identity": model_identity(str(init_from))},
            "search_k": SEARCH_K,
            "mean_tokens": round(mean_len, 1),
            "shared_prefix_tokens": shared,
            "loss_on": loss_on,
            "eval": f"{len(held_out)} held-out questions (books of split 'test'), greedy, tool loop of at most "
            f"{MAX_TURNS} turns",
            "pass_at_1_with_search": pass_at_1(with_tool),
            "pass_at_1_without_tools": pass_at_1(without),
            "tool_calls_per_trajectory": round(sum(r["tool_calls"] for r in with_tool) / max(1, len(with_tool)), 3),
            "tool_errors_per_trajectory": round(sum(r["tool_errors"] for r in with_tool) / max(1, len(with_tool)), 3),
        },
    )
    say(
        f"agent teacher: pass@1 with search {report['pass_at_1_with_search']}, without "
        f"{report['pass_at_1_without_tools']}, "
        f"{report['wall_s']} s -> {out}"
    )
    return report
