"""A teacher behind vLLM's OpenAI-compatible server (``--teacher-url``): where it is, what it serves, and whether
it shares the student's vocabulary, asked over HTTP before training starts.

TRL's server distillation (trl.experimental.server_distillation) scores the student's completions through
``VLLMClient.get_sequence_logprobs``: ``POST /v1/completions`` with the token ids as the prompt, ``max_tokens``
1 and vLLM's ``prompt_logprobs`` (the top-k of every prompt position, and the token's own), after ``GET
/health`` and ``GET /v1/models``. So any ``vllm serve MODEL`` will do; TRL's own ``trl vllm-serve`` is not
needed. Its vocabulary is probed through vLLM's ``/tokenize`` (the whole table is not served): a text spread
over the student's vocabulary must tokenize to the same ids on both sides.

>>> server_root("http://node1:8000/v1/"), server_root("http://node1:8000")
('http://node1:8000', 'http://node1:8000')
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from reasonkit.errors import UserError

#: Student tokens the vocabulary probe spreads over (the whole table would be a very long request).
PROBE_TOKENS = 400


def server_root(url: str) -> str:
    """The server's root, as TRL's VLLMClient wants it: an OpenAI base URL's ``/v1`` dropped."""
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def served_model(url: str, timeout: float = 10.0) -> str:
    """The name of the model the server serves (its ``/v1/models``), or one UserError line when none answers."""
    return _request(f"{server_root(url)}/v1/models", None, timeout)["data"][0]["id"]


def check_served_vocabulary(student_tok, student: str, url: str) -> None:
    """One UserError line when the served teacher tokenizes a probe text spread over the student's vocabulary to
    other ids than the student's tokenizer does."""
    model = served_model(url)
    probe = probe_text(student_tok)
    mine = student_tok(probe, add_special_tokens=False)["input_ids"]
    theirs = _request(
        f"{server_root(url)}/tokenize", {"model": model, "prompt": probe, "add_special_tokens": False}, 30.0
    )["tokens"]
    if mine == theirs:
        return
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
    pair = f"{mine[at] if at < len(mine) else 'none'} vs {theirs[at] if at < len(theirs) else 'none'}"
    raise UserError(
        f"the student {student}'s tokenizer and the teacher {model}'s at {url} differ: a probe text tokenizes to "
        f"different ids from token {at} ({pair}); on-policy distillation compares their next-token distributions "
        "id by id, so they must share a vocabulary"
    )


def probe_text(tok) -> str:
    """Text of ``PROBE_TOKENS`` of the student's tokens spread evenly over its vocabulary, special ones left out."""
    special = set(tok.all_special_ids)
    ids = [i for i in range(len(tok)) if i not in special]
    step = max(1, len(ids) // PROBE_TOKENS)
    return tok.decode(ids[::step][:PROBE_TOKENS])


def _request(url: str, payload: dict | None, timeout: float) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise UserError(
            f"teacher_url: no vLLM server answers at {url} ({e}); start one with `vllm serve TEACHER`"
        ) from None
