"""Tiny offline models: tokenizer + random Llama build, reload from disk, generate."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from reasonkit.recipes.tasks import math as task
from reasonkit.recipes.teachers.tiny import EOS, PAD, TinyLlama, build_tiny

SMALL = TinyLlama(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_position_embeddings=256)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("tiny"), shape=SMALL)


@pytest.fixture(scope="module")
def loaded(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_dir), AutoTokenizer.from_pretrained(tiny_dir)


def test_reloaded_tokenizer_splits_digits_and_keeps_special_tokens(loaded):
    _, tok = loaded
    assert tok.convert_ids_to_tokens(tok("1776", add_special_tokens=False)["input_ids"]) == list("1776")
    assert tok.pad_token == PAD and tok.eos_token == EOS and tok.pad_token_id != tok.eos_token_id
    text = task.solution("What is 37 * 48?")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == text  # <think> survives decoding


def test_chat_template_matches_the_task_rendering(loaded):
    _, tok = loaded
    problem = "What is 37 * 48?"
    prompt = [{"role": "user", "content": task.user_content(problem)}]
    assert tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True) == task.render(
        problem, with_solution=False
    )
    full = prompt + [{"role": "assistant", "content": task.solution(problem)}]
    assert tok.apply_chat_template(full, tokenize=False) == task.render(problem)


def test_assistant_mask_covers_only_the_assistant_turn(loaded):
    _, tok = loaded
    problem = "What is 12 * 34?"
    full = [
        {"role": "user", "content": task.user_content(problem)},
        {"role": "assistant", "content": task.solution(problem)},
    ]
    enc = tok.apply_chat_template(full, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    masked = [i for i, m in zip(enc["input_ids"], enc["assistant_masks"], strict=True) if m]
    assert tok.decode(masked) == task.solution(problem) + EOS


def test_reloaded_model_is_a_llama_of_the_chosen_shape_and_generates(loaded):
    import torch

    model, tok = loaded
    assert model.config.model_type == "llama"
    assert model.config.hidden_size == SMALL.hidden_size and model.config.num_hidden_layers == SMALL.num_layers
    tok.padding_side = "left"
    prompts = [task.render(p, with_solution=False) for p in task.make_problems(2, seed=0)]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[0] == 2 and 1 <= out.shape[1] - enc["input_ids"].shape[1] <= 5
