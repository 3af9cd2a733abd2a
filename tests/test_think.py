"""The student's text layout (think.py). A prompt that opens <think> itself: what the split can know from the
rendered prompt; the SFT turn of a kept trace.

Literal traces of a truncated sample: without the prompt the split calls its unfinished reasoning a
response; with ``prefilled=opens_think(prompt)`` it is reasoning and the response is empty."""

import pytest

from reasonkit.gen.render import THINK_PREFILL, prompt_text
from reasonkit.think import assistant_turn, opens_think, split

# R1's template since 2025-01 ends its generation prompt with "<｜Assistant｜><think>\n" (shortened here).
R1_LIKE = (
    "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|Assistant|><think>\n{%- endif -%}"
)
TRUNCATED = "Let me try x = 3: 9 + 3 = 12, so \\boxed{12} would fit. But x must be even, so"
FINISHED = "9 + 3 = 12 fits.\n</think>\n\nThe answer is \\boxed{12}."


@pytest.fixture(scope="module")
def tokenizer(teacher_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(teacher_dir)


def test_a_template_that_opens_think_is_seen_in_the_rendered_prompt(tokenizer):
    msgs = [{"role": "user", "content": "Find x."}]
    opened = prompt_text(tokenizer, msgs, chat_template=R1_LIKE)
    plain = prompt_text(tokenizer, msgs)
    assert opens_think(opened) and not opens_think(plain)
    assert opens_think(prompt_text(tokenizer, msgs, prefill=THINK_PREFILL)), "--prefill-think opens it too"
    # rendering does not add a second <think> to a template that wrote one
    assert prompt_text(tokenizer, msgs, chat_template=R1_LIKE, prefill=THINK_PREFILL) == opened


def test_a_truncated_sample_after_an_opened_block_is_all_reasoning_when_the_prompt_is_known(tokenizer):
    opened = prompt_text(tokenizer, [{"role": "user", "content": "Find x."}], chat_template=R1_LIKE)
    assert split(TRUNCATED) == (None, TRUNCATED), "without the prompt: looks like a non-reasoning answer"
    assert split(TRUNCATED, prefilled=opens_think(opened)) == (TRUNCATED, "")
    # a finished sample splits the same either way: its lone </think> closes the opened block
    assert split(FINISHED) == split(FINISHED, prefilled=True) == ("9 + 3 = 12 fits.", "The answer is \\boxed{12}.")


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("<|User|>hi<|Assistant|><think>\n", True),
        ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),  # Qwen3, thinking off: block closed
        ("<|im_start|>assistant\n", False),
        ("<think>\nold</think>\n<|Assistant|><think>\n", True),  # the last tag decides
        ("", False),
    ],
)
def test_opens_think(prompt, expected):
    assert opens_think(prompt) is expected


def test_assistant_turn_of_a_kept_row():
    assert assistant_turn("2 + 2 = 4.", "\\boxed{4}") == "<think>\n2 + 2 = 4.\n</think>\n\n\\boxed{4}"
    assert assistant_turn(None, " So \\boxed{4}. ") == "So \\boxed{4}."  # no think block invented
