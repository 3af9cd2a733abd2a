"""A Qwen2.5-Math-1.5B in miniature, built offline: what `distill prepare-student` is for.

Qwen2 architecture (about 100K parameters), a ChatML template with `<|im_end|>` turns and no
`{% generation %}` markers, EOS `<|endoftext|>` (the base model's, not the turn end), 4,096
positions, RoPE theta 10,000, a legacy config.json (top-level `rope_theta`) as the Hub's file has.

Qwen2's tokenizer class rebuilds the pre-tokenizer on load (its regex split + byte level), so the BPE
here is trained under exactly that pre-tokenizer and saved through `Qwen2Tokenizer` itself: the
tokenizer a test loads is the one it built.
"""

from __future__ import annotations

import json
from pathlib import Path

# Qwen2.5-Math-1.5B's template without its tools branch: the same default system prompt, no markers.
QWEN_MATH_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nPlease reason step by step, and put your final answer within "
    "\\\\boxed{}.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or (message.role == "
    "'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def build_qwen_math_like(out: str | Path, texts: list[str]) -> str:
    import torch
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(SPECIALS),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    tok = Qwen2Tokenizer(
        vocab=state["vocab"],
        merges=[tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]],
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    tok.chat_template = QWEN_MATH_TEMPLATE
    out = Path(out)
    tok.save_pretrained(out)
    torch.manual_seed(0)
    endoftext = tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=endoftext,
        eos_token_id=endoftext,
        use_sliding_window=False,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=endoftext, eos_token_id=endoftext)
    model.save_pretrained(out)
    # The Hub's Qwen2.5-Math config.json is in the legacy form: top-level rope_theta, no rope_parameters.
    data = json.loads((out / "config.json").read_text())
    data["rope_theta"] = data.pop("rope_parameters")["rope_theta"]
    (out / "config.json").write_text(json.dumps(data, indent=2))
    return str(out)
