"""Chat templates with ``{% generation %}`` markers, one per model family, for ``distill prepare-student``.

A base model (Qwen2.5-Math-1.5B, Llama-3.1-8B) ships a template that renders its chat format but marks
nothing, so TRL's assistant-only loss cannot find the assistant tokens. These templates render the same
turns with each assistant turn's content *and its end-of-turn token* inside ``{% generation %}``: the
student is trained on what it writes, including where it stops, and never on the prompt.

Only the turn's content and end token are marked, not the header (``<|im_start|>assistant\\n``) nor the
newline after the end token: the header is part of the generation prompt at inference, so training on
it would teach the student to write what it is always given.

>>> family = FAMILIES["chatml"]
>>> family.turn_end
'<|im_end|>'
>>> from transformers.utils.chat_template_utils import _compile_jinja_template
>>> text = _compile_jinja_template(family.template("Be brief.")).render(
...     messages=[{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}], add_generation_prompt=False)
>>> print(text)
<|im_start|>system
Be brief.<|im_end|>
<|im_start|>user
1+1?<|im_end|>
<|im_start|>assistant
2<|im_end|>
<BLANKLINE>
"""  # noqa: E501

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    turn_end: str  # the token that ends every turn: the EOS a chat student must learn to emit
    markers: tuple[str, ...]  # tokens whose presence in a vocabulary says "this family"
    template: Callable[[str | None], str]  # default system prompt -> template text
    default_system: Callable[
        [str], str | None
    ]  # the model's own rendering of a user turn -> its default system prompt


def _chatml(system: str | None) -> str:
    # A system turn given in the messages wins; otherwise the model's own default (Qwen2.5-Math:
    # "Please reason step by step, ..."), so prompts render exactly as under the model's template.
    return (
        "{%- set default_system = " + json.dumps(system) + " -%}\n"
        "{%- if messages and messages[0]['role'] == 'system' -%}\n"
        "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' -}}\n"
        "{%- set turns = messages[1:] -%}\n"
        "{%- else -%}\n"
        "{%- if default_system -%}{{- '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' -}}{%- endif -%}\n"
        "{%- set turns = messages -%}\n"
        "{%- endif -%}\n"
        "{%- for message in turns -%}\n"
        "{%- if message['role'] == 'assistant' -%}\n"
        "{{- '<|im_start|>assistant\\n' -}}\n"
        "{%- generation -%}{{- message['content'] + '<|im_end|>' -}}{%- endgeneration -%}\n"
        "{{- '\\n' -}}\n"
        "{%- elif message['role'] in ('user', 'system') -%}\n"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
        "{%- else -%}\n"
        "{{- raise_exception('this template renders system, user and assistant turns; found role ' + message['role']) "
        "-}}\n"
        "{%- endif -%}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n"
    )


def _llama3(system: str | None) -> str:
    return (
        "{%- set default_system = " + json.dumps(system) + " -%}\n"
        "{{- bos_token -}}\n"
        "{%- if messages and messages[0]['role'] == 'system' -%}\n"
        "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + messages[0]['content'] | trim + '<|eot_id|>' -}}\n"
        "{%- set turns = messages[1:] -%}\n"
        "{%- else -%}\n"
        "{%- if default_system -%}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + default_system + "
        "'<|eot_id|>' -}}{%- endif -%}\n"
        "{%- set turns = messages -%}\n"
        "{%- endif -%}\n"
        "{%- for message in turns -%}\n"
        "{%- if message['role'] == 'assistant' -%}\n"
        "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
        "{%- generation -%}{{- message['content'] | trim + '<|eot_id|>' -}}{%- endgeneration -%}\n"
        "{%- elif message['role'] in ('user', 'system') -%}\n"
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
        "'<|eot_id|>' -}}\n"
        "{%- else -%}\n"
        "{{- raise_exception('this template renders system, user and assistant turns; found role ' + message['role']) "
        "-}}\n"
        "{%- endif -%}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}\n"
    )


def _system_between(start: str, end: str) -> Callable[[str], str | None]:
    pattern = re.compile(re.escape(start) + r"(.*?)" + re.escape(end), re.DOTALL)

    def find(rendered: str) -> str | None:
        match = pattern.search(rendered)
        return match.group(1) if match else None

    return find


FAMILIES: dict[str, Family] = {
    "chatml": Family(
        "chatml",
        "<|im_end|>",
        ("<|im_start|>", "<|im_end|>"),
        _chatml,
        _system_between("<|im_start|>system\n", "<|im_end|>"),
    ),
    "llama3": Family(
        "llama3",
        "<|eot_id|>",
        ("<|start_header_id|>", "<|eot_id|>"),
        _llama3,
        _system_between("<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>"),
    ),
}


def detect_family(vocab: dict[str, int]) -> Family | None:
    """The family whose special tokens the vocabulary holds (Qwen, Qwen2.5-Math, Yi: chatml; Llama 3: llama3)."""
    return next((f for f in FAMILIES.values() if all(t in vocab for t in f.markers)), None)


PROBE_USER, PROBE_ANSWER = "PROBE-QUESTION", "PROBE-ANSWER"


def own_default_system(tok, family: Family) -> str | None:
    """The default system prompt the model's own template adds to a conversation without one, if any."""
    if not tok.chat_template:
        return None
    try:
        rendered = tok.apply_chat_template([{"role": "user", "content": PROBE_USER}], tokenize=False)
    except Exception:  # a template that cannot render a lone user turn has no default to keep
        return None
    head = rendered.split(PROBE_USER)[0]
    return family.default_system(head)


def turn_end_token(tok) -> str | None:
    """The first special token the chat template writes after an assistant turn's content (its turn end).

    >>> from reasonkit.recipes.teachers.tiny import build_tokenizer
    >>> turn_end_token(build_tokenizer(["1 2 3"], vocab_size=300))
    '<|end|>'
    """
    if not tok.chat_template:
        return None
    messages = [{"role": "user", "content": PROBE_USER}, {"role": "assistant", "content": PROBE_ANSWER}]
    try:
        rendered = tok.apply_chat_template(messages, tokenize=False)
    except Exception:
        return None
    if PROBE_ANSWER not in rendered:
        return None
    after = rendered.split(PROBE_ANSWER, 1)[1]
    special = set(tok.all_special_tokens) | {t for t, added in tok.get_added_vocab().items()}
    for token in tok.convert_ids_to_tokens(tok(after, add_special_tokens=False)["input_ids"]):
        if token in special:
            return token
        if tok.convert_tokens_to_string([token]).strip():
            return None  # text before any special token: the turn has no end token
    return None
