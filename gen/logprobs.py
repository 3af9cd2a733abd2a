"""The teacher's top-K log-probs of every completion token (``distill generate --logprobs K``), as data.

Each backend reads them from its own engine into one shape, ``(top_ids, top_logprobs)``: one row per
completion token, its K most likely tokens, most likely first. They are the model's raw distribution
(vLLM's default ``logprobs_mode="raw_logprobs"``: before temperature and top-p), so a KD loss reads
the teacher as it is, whatever the sampling. The sampled tokens themselves go beside them
(``completion_ids``): a trainer aligns the targets to its own tokenization of the text with them.

>>> from types import SimpleNamespace as L
>>> position = {7: L(logprob=-0.1, rank=1), 9: L(logprob=-2.5, rank=2), 4: L(logprob=-6.0, rank=31)}
>>> from_vllm([position], 2)
([[7, 9]], [[-0.1, -2.5]])
>>> token_id("token_id:151643")
151643
"""

from __future__ import annotations

from collections.abc import Sequence

#: The most a backend is asked for: vLLM's default ``max_logprobs`` and the OpenAI API's ``top_logprobs`` cap.
MAX_K = 20


def from_vllm(positions: Sequence, k: int) -> tuple[list[list[int]], list[list[float]]]:
    """vLLM's per-position ``{token_id: Logprob}`` (the top K, plus the sampled token when it ranks lower)
    as the top K by rank."""
    ids, values = [], []
    for position in positions:
        ranked = sorted((position or {}).items(), key=lambda item: item[1].rank or 0)[:k]
        ids.append([int(t) for t, _ in ranked])
        values.append([float(lp.logprob) for _, lp in ranked])
    return ids, values


def token_id(token: str) -> int:
    """The id in a vLLM server's ``token_id:N`` token (``return_tokens_as_token_ids``)."""
    prefix, _, number = token.partition(":")
    if prefix != "token_id" or not number.lstrip("-").isdigit():
        raise ValueError(f"expected a token as 'token_id:N' (vLLM's return_tokens_as_token_ids), found {token!r}")
    return int(number)


def from_openai(content: Sequence, k: int) -> tuple[list[int], list[list[int]], list[list[float]]]:
    """A chat completion's ``logprobs.content`` (tokens written as ``token_id:N``) as (sampled ids, top ids,
    top log-probs), the top K by log-prob."""
    sampled, ids, values = [], [], []
    for entry in content:
        sampled.append(token_id(entry.token))
        top = sorted(entry.top_logprobs or [], key=lambda t: -t.logprob)[:k]
        ids.append([token_id(t.token) for t in top])
        values.append([float(t.logprob) for t in top])
    return sampled, ids, values


def from_logits(step_logits: Sequence, row: int, length: int, k: int) -> tuple[list[list[int]], list[list[float]]]:
    """transformers' ``generate(output_logits=True)`` logits (one ``[rows, vocab]`` tensor per step) of one
    output row's first ``length`` tokens, as its top K log-probs."""
    import torch

    ids, values = [], []
    for step in step_logits[:length]:
        top = torch.log_softmax(step[row].float(), dim=-1).topk(k)
        ids.append(top.indices.tolist())
        values.append(top.values.tolist())
    return ids, values
