"""Tiny offline models: a digit-level byte BPE tokenizer and random-init Llama models.

Everything here is built on this machine from text we generate, so tests and the quickstart
never touch the Hub. The results are ordinary ``save_pretrained`` directories that transformers,
vLLM, peft and TRL load like any checkpoint.

Why Llama and not Qwen2: Qwen2's tokenizer class rebuilds the pre-tokenizer on load, which would
undo the digit splitting; Llama's config loads our ``PreTrainedTokenizerFast`` as saved.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> tok = build_tokenizer(["12 * 34 = 408"], d, vocab_size=300)
>>> tok.convert_ids_to_tokens(tok("1234")["input_ids"])
['1', '2', '3', '4']
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

PAD = "<|pad|>"
EOS = "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
# Plain (non-special) added tokens: they must survive decoding so the <think> split can see them.
THINK_TOKENS = ("<think>", "</think>")

# Assistant turns are wrapped in {% generation %} so TRL's assistant-only loss can mask the prompt.
# The assistant's content ends in EOS, which is inside the generation block: the model learns to stop.
CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}<|system|>{{ m['content'] }}<|end|>"
    "{%- elif m['role'] == 'user' -%}<|user|>{{ m['content'] }}<|end|>"
    "{%- elif m['role'] == 'assistant' -%}<|assistant|>{% generation %}{{ m['content'] }}<|end|>{% endgeneration %}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"
)


def build_tokenizer(texts: Iterable[str], out_dir: str | os.PathLike | None = None, *, vocab_size: int = 512):
    """Train a byte-level BPE whose digits are always single tokens; save it if ``out_dir``.

    Single-digit tokens make arithmetic learnable by a model of a million parameters: the
    number 408 is always the same three symbols, never a merged "40" + "8".
    """
    from transformers import PreTrainedTokenizerFast

    tok = train_digit_bpe(texts, vocab_size=vocab_size, special_tokens=[PAD, EOS, *ROLE_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)
    fast.add_tokens(list(THINK_TOKENS))
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # generation pads on the left; trainers set their own side
    if out_dir is not None:
        fast.save_pretrained(out_dir)
    return fast


def train_digit_bpe(texts: Iterable[str], *, vocab_size: int, special_tokens: list[str]):
    """A byte-level BPE (``tokenizers.Tokenizer``) trained on ``texts`` whose digits are always single tokens,
    ``special_tokens`` first in its vocabulary: the core of every tiny tokenizer here (this module's, and
    recipes/teachers/tiny_tools.py's under the Qwen2.5 template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    return tok


@dataclass(frozen=True)
class TinyLlama:
    """Shape of a tiny Llama. The defaults give 1.1M parameters with a 512-token vocabulary:
    per layer 4*128^2 (attention) + 3*128*512 (MLP) = 262K, x4 layers, + 66K tied embeddings."""

    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 1024


def build_model(tokenizer, out_dir: str | os.PathLike | None = None, shape: TinyLlama = TinyLlama(), seed: int = 0):
    """A random-init ``LlamaForCausalLM`` sized to ``tokenizer``; saved (with it) if ``out_dir``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_heads,
        max_position_embeddings=shape.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=False
    )
    if out_dir is not None:
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    return model


def build_tiny(
    out_dir: str | os.PathLike, texts: Iterable[str] | None = None, *, shape: TinyLlama = TinyLlama(), seed: int = 0
) -> str:
    """Tokenizer + random model in one directory; returns the directory. For tests and smoke runs.

    Without ``texts`` the tokenizer is trained on the synthetic task's own text.
    """
    if texts is None:
        from reasonkit.recipes.tasks.math import corpus

        texts = corpus(n=500, seed=seed)
    tok = build_tokenizer(texts, out_dir)
    build_model(tok, out_dir, shape=shape, seed=seed)
    return str(out_dir)
