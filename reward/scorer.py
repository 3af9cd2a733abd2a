"""A reward model as a scoring function: the one place that turns (prompt, assistant turn) into a number.

``distill score`` (judges/score/run.py) and the GRPO reward ``rm`` (reward/model.py) both score
through :class:`Scorer`, so a reward the trainer gets and a reward ``distill score`` writes for the
same completion are the same number.

Two kinds of model are accepted (:func:`inspect_model` tells them apart from ``config.json`` or a LoRA
adapter's ``adapter_config.json``, before torch loads):

- **rm**: ``AutoModelForSequenceClassification`` with ``num_labels=1`` (TRL's ``RewardTrainer``, ``distill
  train --method rm``). The text is tokenised exactly as ``RewardTrainer`` tokenises a conversational
  example (TRL's ``trl.data_utils._tokenize``): the chat template applied, with ``tokenize=True``, to the
  prompt messages followed by ``{"role": "assistant", "content": turn}``; a string prompt is TRL's standard
  format, ``prompt + turn`` with the EOS token appended. The reward is the logit at the last non-pad token
  (the model's own pooling, as in training).
- **prm**: ``AutoModelForTokenClassification`` with ``num_labels=2`` and ``reasonkit_prm.json``
  (``{"step_separator": "\\n"}``), a process reward model as ``distill train --method prm`` (TRL's former
  ``PRMTrainer``) trained one: the prompt's tokens, then each step's tokens followed by the separator's, the label on
  the last token of each step; the steps cut as ``distill label-steps`` cuts them. ``step_rewards`` are P(good) (label
  1) there; ``reward`` is their minimum (Math-Shepherd's aggregate; ``distill filter --step-aggregate prod`` takes
  Lightman et al.'s product instead).

Scoring is batched: identical inputs run once, rows sorted by length (so a batch pads little), padded on the
right (a causal model's real tokens never attend to right padding, so a row scores the same alone or in a
batch), one forward a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from reasonkit.errors import UserError

PRM_FILE = "reasonkit_prm.json"
#: Where `distill train --method rm/prm` saves the model in its output directory, in the order one is taken.
TRAINED = ("merged", "model", "adapter")
_EXPECTED = (
    "expected a reward model: AutoModelForSequenceClassification with num_labels=1 (distill train --method rm), "
    f"a PRM (AutoModelForTokenClassification, num_labels=2, with {PRM_FILE}), or a LoRA adapter of either"
)


@dataclass(frozen=True)
class ModelSpec:
    """What :func:`inspect_model` read: the kind, where the weights are, and the PRM's step separator."""

    kind: str  # "rm" or "prm"
    base: str  # the model directory (for an adapter: its base model)
    adapter: str | None = None
    step_separator: str | None = None  # prm only


def _read_json(path: Path) -> dict:
    """A JSON object file (prepare-student's reader: one UserError line when it is none), saying what was expected."""
    from reasonkit.config import load_json_object

    try:
        return load_json_object(path)
    except UserError as e:
        raise UserError(f"{e}; {_EXPECTED}") from None


def _labels(config: dict) -> int:
    """The number of labels; transformers leaves id2label out of config.json at its default, 2 labels."""
    if config.get("id2label"):
        return len(config["id2label"])
    return config.get("num_labels", 2)


def _separator(*dirs: Path) -> str:
    for d in dirs:
        if (d / PRM_FILE).is_file():
            sep = _read_json(d / PRM_FILE).get("step_separator")
            if not isinstance(sep, str) or not sep:
                raise UserError(f"{d / PRM_FILE}: step_separator must be a non-empty string, found {sep!r}")
            return sep
    raise UserError(f"{dirs[0]}: a token-classification model without {PRM_FILE} (its step separator); {_EXPECTED}")


def inspect_model(path: str) -> ModelSpec:
    """The reward model at ``path`` (a model directory, a LoRA adapter, or a ``distill train --method rm/prm``
    output directory: its ``merged/``, ``model/`` or ``adapter/``), checked from its JSON files alone (one
    UserError line when it is not one).

    >>> inspect_model("/nonexistent/rm")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: /nonexistent/rm: no such model directory; expected a reward model: AutoModelForSequenceClassification with num_labels=1 (distill train --method rm), a PRM (AutoModelForTokenClassification, num_labels=2, with reasonkit_prm.json), or a LoRA adapter of either
    """  # noqa: E501
    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{path}: no such model directory; {_EXPECTED}")
    if not (p / "config.json").is_file() and not (p / "adapter_config.json").is_file():
        # a `distill train --method rm/prm` output directory: the model it saved (merged, full, or the adapter)
        saved = next(
            (p / d for d in TRAINED if (p / d / "config.json").is_file() or (p / d / "adapter_config.json").is_file()),
            None,
        )
        p = saved or p
    if (p / "adapter_config.json").is_file():
        adapter = _read_json(p / "adapter_config.json")
        task, base = adapter.get("task_type"), adapter.get("base_model_name_or_path")
        kind = {"SEQ_CLS": "rm", "TOKEN_CLS": "prm"}.get(task)
        if kind is None:
            raise UserError(
                f"{p / 'adapter_config.json'}: a LoRA adapter of task_type {task!r}, not SEQ_CLS or TOKEN_CLS; "
                f"{_EXPECTED}"
            )
        from reasonkit.identity import looks_like_hub_id

        if not base or not (Path(base).is_dir() or looks_like_hub_id(base)):
            raise UserError(
                f"{p / 'adapter_config.json'}: base_model_name_or_path {base!r} is neither a model directory "
                "here nor a Hub id"
            )
        return ModelSpec(kind, str(base), str(p), _separator(p, Path(base)) if kind == "prm" else None)
    if not (p / "config.json").is_file():
        raise UserError(f"{path}: no config.json or adapter_config.json; {_EXPECTED}")
    config = _read_json(p / "config.json")
    archs = config.get("architectures") or []
    labels = _labels(config)
    if any(a.endswith("ForSequenceClassification") for a in archs) and labels == 1:
        return ModelSpec("rm", str(p))
    if any(a.endswith("ForTokenClassification") for a in archs) and labels == 2:
        return ModelSpec("prm", str(p), step_separator=_separator(p))
    raise UserError(f"{p / 'config.json'}: architectures {archs} with {labels} labels; {_EXPECTED}")


@contextmanager
def whole_weights():
    """Load a model whole even inside a DeepSpeed ZeRO-3 run. With ZeRO-3 on (accelerate's zero3 config sets
    zero3_init_flag, which registers transformers' DeepSpeed config for the whole process) ``from_pretrained``
    partitions every weight over the processes (deepspeed.zero.Init), leaving each an empty shard; the scorer
    runs its model outside any DeepSpeed engine (GRPO's rm reward: every process scores its own completions),
    so it must hold the weights whole."""
    from transformers.integrations import deepspeed

    registered = deepspeed._hf_deepspeed_config_weak_ref  # what is_deepspeed_zero3_enabled() reads
    deepspeed._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        deepspeed._hf_deepspeed_config_weak_ref = registered


@dataclass(frozen=True)
class Encoded:
    ids: tuple[int, ...]
    ends: tuple[int, ...] = ()  # prm: the position of each step's last token


class Scorer:
    """A loaded reward model; :meth:`score` gives ``(reward, step_rewards)`` per (prompt, assistant turn).

    ``prompt`` is a list of chat messages (TRL's conversational format) or, for a string-prompt dataset, a string.
    """

    def __init__(
        self, spec: ModelSpec, *, dtype: str = "float32", device: str | None = None, max_length: int | None = None
    ):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

        self.spec, self.max_length = spec, max_length
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        cls = AutoModelForSequenceClassification if spec.kind == "rm" else AutoModelForTokenClassification
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        with whole_weights():
            model = cls.from_pretrained(spec.base, dtype=torch_dtype, num_labels=1 if spec.kind == "rm" else 2)
        tokenizer_dir = (
            spec.adapter if spec.adapter and (Path(spec.adapter) / "tokenizer_config.json").is_file() else spec.base
        )
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        if spec.adapter:
            from peft import PeftModel

            with whole_weights():
                model = PeftModel.from_pretrained(model, spec.adapter)
        text_config = model.config.get_text_config()
        if text_config.pad_token_id is None:  # as RewardTrainer does: the pooling needs to know padding
            text_config.pad_token_id = (
                self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
            )
        self.pad_id = text_config.pad_token_id
        self.model = model.to(self.device).eval()

    # -- text -> token ids ---------------------------------------------------------------------
    def encode(self, prompt, turn: str) -> Encoded:
        if self.spec.kind == "prm":
            return self._encode_steps(prompt, turn)
        tok = self.tokenizer
        if isinstance(prompt, str):  # TRL's standard (string) format: prompt + completion + EOS
            text = turn if turn.endswith(tok.eos_token) else turn + tok.eos_token
            ids = tok(text=prompt + text)["input_ids"]
        else:
            messages = [{"role": m["role"], "content": m["content"]} for m in prompt]
            ids = tok.apply_chat_template(
                messages + [{"role": "assistant", "content": turn}], tokenize=True, return_dict=True
            )["input_ids"]
        return Encoded(tuple(ids[: self.max_length] if self.max_length else ids))

    def _encode_steps(self, prompt, turn: str) -> Encoded:
        """The PRM's input as ``distill train --method prm`` trained it, on the steps ``distill label-steps`` cuts
        (both reward/steps.py): the prompt string is the rendered generation prompt plus the ``<think>\n`` that
        opened the reasoning, the steps the rest of the turn cut at the separator."""
        from reasonkit.reward.steps import encode_steps, opening, solution_body, split_steps
        from reasonkit.think import opens_think, split

        tok, sep = self.tokenizer, self.spec.step_separator
        if not isinstance(prompt, str):
            prompt = tok.apply_chat_template(
                [{"role": m["role"], "content": m["content"]} for m in prompt],
                tokenize=False,
                add_generation_prompt=True,
            )
        reasoning, response = split(turn)
        body, in_think = solution_body({"reasoning": reasoning, "response": response})
        ids, ends = encode_steps(tok, prompt + opening(in_think, opens_think(prompt)), split_steps(body, sep), sep)
        if self.max_length:
            ids, ends = ids[: self.max_length], [e for e in ends if e < self.max_length]
        return Encoded(tuple(ids), tuple(ends))

    # -- forward ---------------------------------------------------------------------------------
    def score(
        self, prompts: Sequence, turns: Sequence[str | None], batch_size: int = 16
    ) -> list[tuple[float | None, list[float] | None]]:
        """``(reward, step_rewards)`` per row (``(None, None)`` for a row with no text); ``step_rewards`` only for a PRM."""  # noqa: E501
        out: list[tuple[float | None, list[float] | None]] = [(None, None)] * len(turns)
        # identical inputs run once: a policy's samples of one prompt are often the same text (GRPO groups, best-of-N)
        same: dict[Encoded, list[int]] = {}
        for i, (p, t) in enumerate(zip(prompts, turns)):
            if t:
                same.setdefault(self.encode(p, t), []).append(i)
        order = sorted(same, key=lambda e: len(e.ids))
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            for e, result in zip(batch, self.forward(batch)):
                for i in same[e]:
                    out[i] = result
        return out

    def forward(self, batch: list[Encoded]) -> list[tuple[float | None, list[float] | None]]:
        """One forward over ``batch``, padded on the right."""
        import torch

        width = max(len(e.ids) for e in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, e in enumerate(batch):
            ids[row, : len(e.ids)] = torch.tensor(e.ids, dtype=torch.long)
            mask[row, : len(e.ids)] = 1
        with torch.inference_mode():
            # no KV cache: one forward, nothing generated after it
            logits = (
                self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=False)
                .logits.float()
                .cpu()
            )
        if self.spec.kind == "rm":
            return [(float(v), None) for v in logits[:, 0].tolist()]
        good = torch.softmax(logits, dim=-1)[..., 1]
        results = []
        for row, e in enumerate(batch):
            steps = [float(good[row, end]) for end in e.ends]
            results.append((min(steps) if steps else None, steps))
        return results


def turn_of(row: dict, include_reasoning: bool = True) -> str | None:
    """The assistant turn scored for a traces/verdicts row: the one ``distill pairs``/``judge`` put in a prefs
    row and ``filter`` in an sft row (``<think>\\nreasoning\\n</think>\\n\\nresponse``), None when there is no text.

    >>> turn_of({"reasoning": "2 * 3 = 6", "response": "6", "completion": "<think>2 * 3 = 6</think>6"})
    '<think>\\n2 * 3 = 6\\n</think>\\n\\n6'
    >>> turn_of({"completion": "", "finish_reason": "error"}) is None
    True
    """
    from reasonkit.think import candidate_text

    return candidate_text(row, include_reasoning) or None
