"""Checks that run before any work: a bad setting costs a second, not an engine start and a shard.

>>> model_length("/nonexistent/teacher")
Traceback (most recent call last):
...
reasonkit.errors.UserError: --teacher /nonexistent/teacher: no such model directory
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reasonkit.errors import UserError
from reasonkit.identity import looks_like_hub_id  # recipes/runner.py imports it from here too

#: config.json keys that hold a model's context length, most specific first.
_LENGTH_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions", "max_seq_len")


def model_length(teacher: str) -> tuple[int | None, str]:
    """The teacher's context length from its config, and where it was read (for messages).

    A local directory must exist and hold a ``config.json``; a Hub id must resolve (from the cache
    when ``HF_HUB_OFFLINE=1``).
    """
    path = Path(os.path.expanduser(teacher))
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise UserError(f"--teacher {teacher}: not a model directory (no config.json)")
        try:
            config = json.loads(file.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{file}: unreadable ({e})") from None
        where = str(file)
    elif looks_like_hub_id(teacher):
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(teacher).to_dict()
        except Exception as e:  # OSError, offline, gated: keep the first line
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise UserError(f"--teacher {teacher}: cannot load the model config ({first})") from None
        where = f"{teacher} config"
    else:
        raise UserError(f"--teacher {teacher}: no such model directory")
    config = {**config, **(config.get("text_config") or {})}  # multimodal configs nest the LM's
    for key in _LENGTH_KEYS:
        if isinstance(config.get(key), int):
            return config[key], f"{where} {key}"
    return None, where


def check_max_tokens(max_tokens: int, length: int | None, where: str) -> None:
    """``max_tokens`` must leave room for a prompt inside the model's context.

    >>> check_max_tokens(32768, 1024, "tiny/config.json max_position_embeddings")
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: --max-tokens 32768 does not fit the model's length (1024 tokens, tiny/config.json max_position_embeddings); lower --max-tokens
    """  # noqa: E501
    if length is not None and max_tokens >= length:
        raise UserError(
            f"--max-tokens {max_tokens} does not fit the model's length ({length} tokens, {where}); lower --max-tokens"
        )
