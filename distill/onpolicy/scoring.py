"""The teacher's log-probability of each sampled completion, from the hidden states its forward already computed.

TRL's loss projects the teacher's hidden states to the vocabulary tile by tile and keeps only the divergence;
the rollouts want, per completion, ``sum_t log p_teacher(token_t | prompt, tokens before t)``. This projects
the same hidden states again, a chunk of positions at a time (a (chunk x vocabulary) block, never the
whole completion's logits), in fp32, with the model's logit scale and soft-capping where it has them.

>>> import torch
>>> torch.manual_seed(0) and None
>>> head = torch.nn.Linear(4, 6, bias=False)
>>> hidden, ids = torch.randn(2, 3, 4), torch.tensor([[1, 2, 0], [5, 5, 5]])
>>> mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
>>> sums, counts = completion_logprobs(hidden, head, ids, mask, chunk=2)
>>> whole = torch.log_softmax(head(hidden), -1).gather(-1, ids[..., None])[..., 0]
>>> [round(s, 4) for s in sums] == [round(v, 4) for v in (whole * mask).sum(1).tolist()], counts
(True, [2, 3])
"""

from __future__ import annotations

#: Positions projected to the vocabulary at once: 256 x 152k vocabulary x 4 bytes = 156 MB for a Qwen teacher.
CHUNK = 256


def completion_logprobs(
    hidden, head, ids, mask, *, scale: float = 1.0, softcap: float | None = None, chunk: int = CHUNK
) -> tuple[list[float], list[int]]:
    """Per row: the sum of log p(ids) over the positions ``mask`` keeps, and how many it keeps.

    ``hidden``: (B, K, H) the teacher's last hidden states aligned to the completion tokens ``ids`` (B, K) (position
    t predicts token t); ``head``: its output projection (a module: weight and bias).
    """
    import torch

    sums, counts = [], []
    with torch.no_grad():
        for h, t, m in zip(hidden, ids, mask.bool()):
            h, t = h[m], t[m].to(h.device)
            total = 0.0
            for i in range(0, len(t), chunk):
                logits = head(h[i : i + chunk]).float() * scale
                if softcap:
                    logits = softcap * torch.tanh(logits / softcap)
                picked = logits.gather(-1, t[i : i + chunk, None])[:, 0]
                total += float((picked - logits.logsumexp(-1)).sum())
            sums.append(total)
            counts.append(int(m.sum()))
    return sums, counts


def logit_transform(config) -> tuple[float, float | None]:
    """(scale, soft-cap) a model applies to its logits: Cohere's ``logit_scale``, Gemma's
    ``final_logit_softcapping``; (1.0, None) for most."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return float(getattr(text, "logit_scale", None) or 1.0), getattr(text, "final_logit_softcapping", None)
