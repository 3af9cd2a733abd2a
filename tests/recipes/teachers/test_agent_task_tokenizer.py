"""The tool-capable tiny tokenizer: TRL's Qwen2.5 template, single-token markers, calls parsed back."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from reasonkit.recipes.teachers.tiny_tools import IM_END, TAG_TOKENS, build_tool_tokenizer, qwen2_5_template


def search(query: str) -> str:
    """Search the corpus.

    Args:
        query: words to look for.
    """
    return ""


CALL = {"type": "function", "function": {"name": "search", "arguments": {"query": "Dovan Keth"}}}
MESSAGES = [
    {"role": "user", "content": 'What year did the author of "Dovan Keth" win the Lumo Prize?'},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "name": "search", "content": "Dovan Keth is a novel by Sira Mol."},
    {"role": "assistant", "content": "The answer is \\boxed{1987}."},
]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tooltok")
    build_tool_tokenizer(["Dovan Keth is a novel by Sira Mol. 1987"] * 20, out, vocab_size=400)
    return AutoTokenizer.from_pretrained(out)  # what every backend loads: the saved files


def test_saved_template_is_trls_qwen2_5_verbatim_and_markers_are_single_tokens(tok):
    assert tok.chat_template == qwen2_5_template()
    assert tok.eos_token == IM_END and tok.pad_token_id != tok.eos_token_id
    for tag in ("<|im_start|>", IM_END, *TAG_TOKENS):
        assert tok.convert_ids_to_tokens(tok(tag, add_special_tokens=False)["input_ids"]) == [tag]
    assert tok.convert_ids_to_tokens(tok("1987", add_special_tokens=False)["input_ids"]) == list("1987")
    # The tags are plain added tokens: decoding without special tokens keeps them (a parser needs them).
    ids = tok('<tool_call>\n{"a": 1}\n</tool_call><|im_end|>', add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == '<tool_call>\n{"a": 1}\n</tool_call>'


def test_tools_render_and_trl_parses_the_call_back(tok):
    from trl.chat_template_utils import add_response_schema, parse_response

    text = tok.apply_chat_template(MESSAGES, tools=[search], tokenize=False)
    assert '"name": "search"' in text and "<tools>" in text
    assert '<tool_call>\n{"name": "search", "arguments": {"query": "Dovan Keth"}}\n</tool_call><|im_end|>' in text
    assert "<tool_response>\nDovan Keth is a novel by Sira Mol.\n</tool_response>" in text
    add_response_schema(tok)  # raises on a template TRL does not know
    prefix = tok.apply_chat_template(
        MESSAGES[:1], tools=[search], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    full = tok.apply_chat_template(MESSAGES[:2], tools=[search], tokenize=True, return_dict=False)
    assert full[: len(prefix)] == prefix  # the template is prefix-preserving: generation continues the prompt
    parsed = parse_response(tok, full[len(prefix) :], prefix=prefix)
    assert parsed["tool_calls"] == [CALL]
