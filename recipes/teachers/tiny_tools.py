"""A tool-capable tiny tokenizer: recipes/teachers/tiny.py's digit-level byte BPE under TRL's Qwen2.5 chat template.

Tool-using tiny models speak the format every backend and trainer already reads: TRL's
``qwen2_5.jinja`` verbatim (so ``trl.chat_template_utils.add_response_schema`` recognises it and
``tokenizer.parse_response`` returns the calls; TRL's SFT swaps in its ``{% generation %}`` twin for
assistant-only loss), Hermes-style calls ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``
that vLLM's ``hermes`` tool parser reads, and tool results inside ``<tool_response>`` in a user turn.

The markers are single tokens: ``<|im_start|>``, ``<|im_end|>`` (EOS) and the pad are special (dropped
by ``skip_special_tokens``), the tool and think tags are plain added tokens, as in Qwen's own
tokenizer, so they survive decoding and a parser still sees them in the text.

>>> import tempfile
>>> tok = build_tool_tokenizer(["search 1987"], tempfile.mkdtemp(), vocab_size=300)
>>> tok.convert_ids_to_tokens(tok("<tool_call>1987</tool_call>")["input_ids"])
['<tool_call>', '1', '9', '8', '7', '</tool_call>']
>>> tok.eos_token, tok.chat_template == qwen2_5_template()
('<|im_end|>', True)
"""

from __future__ import annotations

import os
from collections.abc import Iterable

PAD = "<|endoftext|>"  # Qwen's pad token
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: Plain (non-special) added tokens: a tool-call parser and the <think> split must see them in decoded text.
TAG_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")


def qwen2_5_template() -> str:
    """TRL's Qwen2.5 chat template, byte for byte (add_response_schema matches it by equality)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return qwen2_5_chat_template


def build_tool_tokenizer(texts: Iterable[str], out_dir: str | os.PathLike | None = None, *, vocab_size: int = 1024):
    """Train the digit-level byte BPE of recipes/teachers/tiny.py on ``texts`` with the Qwen2.5 markers; save if
    ``out_dir``.

    ``texts`` should be rendered chat text (the template's fixed system and tools preamble repeats in
    every example, so BPE folds it into few tokens). Digits stay single tokens, as in recipes/teachers/tiny.py.
    """
    from transformers import PreTrainedTokenizerFast

    from reasonkit.recipes.teachers.tiny import train_digit_bpe

    # The tags are learnt as single tokens by the trainer's special list; they are re-registered below as
    # plain added tokens so decoding keeps them.
    tok = train_digit_bpe(texts, vocab_size=vocab_size, special_tokens=[PAD, IM_START, IM_END, *TAG_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=PAD)
    fast.add_special_tokens({"additional_special_tokens": [IM_START]})
    fast.add_tokens(list(TAG_TOKENS))
    fast.chat_template = qwen2_5_template()
    fast.padding_side = "left"  # generation pads on the left; trainers set their own side
    if out_dir is not None:
        fast.save_pretrained(out_dir)
    return fast
