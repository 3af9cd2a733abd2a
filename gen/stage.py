"""The generate stage: prompts in, a ``traces`` stage directory out, resumable with nothing lost.

Shards are fixed slices of the prompt list (``shard_size`` prompts each, all ``n`` samples of a
prompt in the same shard). Every request of the run streams through the backend at once, and a
shard is committed (atomically, store.py) the moment all its samples are in. A rerun of the same
command skips the committed ``(id, sample)`` keys and generates the rest; seeds derive from
``(seed, id)``, so a run killed at any instant and rerun ends with exactly the rows, and with a
seeded backend the texts, of a run that never stopped.

The ``gen_config`` column and the manifest's config fingerprint are the same hash: of the
settings that decide what a row says (teacher, backend, sampling, rendering, input columns), not
of those that only decide how fast it is made (shard size, concurrency, parallelism, URL,
``limit``, engine, the ``engine_args`` that only place or pace vLLM: gen/engine_args.py). So a
run can be resumed with more concurrency, or extended with a larger ``limit``, or started on one
machine and finished on a Ray cluster (``engine: ray``, gen/ray_engine.py: the same shards, each
run whole by one replica and committed here).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from reasonkit.engine import check_engine
from reasonkit.errors import UserError
from reasonkit.gen.engine_args import EngineArgs, output_engine_args
from reasonkit.gen.render import R1_INSTRUCTION
from reasonkit.readers import ColumnMap

BACKENDS = ("vllm", "openai", "hf")


@dataclass(frozen=True)
class GenerateConfig:
    prompts: str
    teacher: str
    out: str
    backend: Literal["vllm", "openai", "hf"] = "vllm"
    n: int = 8
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 32768
    seed: int = 0
    system: str | None = None
    instruction: str | None = R1_INSTRUCTION
    prefill_think: bool = False
    chat_template: str | None = None  # a Jinja file overriding the tokenizer's template
    limit: int | None = None
    shard_size: int = 1000
    columns: ColumnMap = field(default_factory=ColumnMap)
    split: str | None = None  # of a Hugging Face dataset: its only split unless named (hub/datasets.py)
    overwrite: bool = False
    # openai
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 64
    request_timeout: float = 3600.0
    max_retries: int = 10
    # vllm
    tensor_parallel: int = 1
    data_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # any other vllm.EngineArgs field (pipeline_parallel_size, kv_cache_dtype, ...): gen/engine_args.py
    engine_args: EngineArgs = field(default_factory=dict, hash=False)
    # hf
    batch_size: int = 8
    # where shards run (reasonkit/engine.py): ray runs `replicas` engines over the cluster
    engine: Literal["local", "ray"] = "local"
    replicas: int = 1
    ray_address: str | None = None
    # tools (gen/tools/): rows become multi-turn trajectories
    tools: str | None = None  # comma-separated: search,python
    corpus: str | None = None  # the search tool's passages ({"id", "contents"} JSONL or Parquet)
    max_turns: int = 8  # assistant turns per trajectory
    search_k: int = 3  # passages per search observation
    tool_timeout: float = 10.0  # seconds per python tool call
    tool_workers: int = 8  # tool calls running at once

    def __post_init__(self) -> None:
        check_engine(self.engine, self.replicas, self.ray_address)
        if self.engine == "ray" and self.data_parallel > 1:
            raise UserError(f"--data-parallel {self.data_parallel} is the local engine's; with --engine ray "
                            f"use --replicas {self.data_parallel} (one engine per replica)")
        for name, low in (("n", 1), ("max_tokens", 1), ("shard_size", 1), ("concurrency", 1), ("tensor_parallel", 1),
                          ("data_parallel", 1), ("batch_size", 1), ("max_retries", 0), ("max_turns", 1),
                          ("tool_workers", 1), ("search_k", 1)):
            if getattr(self, name) < low:
                raise UserError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected at least {low}")
        if self.backend not in BACKENDS:
            raise UserError(f"--backend {self.backend!r}: expected one of {', '.join(BACKENDS)}")
        if self.temperature < 0:
            raise UserError(f"--temperature {self.temperature}: expected >= 0")
        if self.tool_timeout <= 0:
            raise UserError(f"--tool-timeout {self.tool_timeout}: expected > 0 seconds")
        if self.tools is not None or self.corpus is not None:
            from reasonkit.gen.tools.trajectories import check_tool_config

            check_tool_config(self)
        if not 0 < self.top_p <= 1:
            raise UserError(f"--top-p {self.top_p}: expected in (0, 1]")
        if self.limit is not None and self.limit < 1:
            raise UserError(f"--limit {self.limit}: expected at least 1")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise UserError(f"--max-model-len {self.max_model_len}: expected at least 2")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise UserError(f"--gpu-memory-utilization {self.gpu_memory_utilization}: expected in (0, 1]")
        object.__setattr__(self, "engine_args", EngineArgs.from_config(self.engine_args, "engine_args"))
        if self.engine_args and self.backend != "vllm":
            raise UserError(f"engine_args {dict(self.engine_args)} apply to the vllm backend, not --backend {self.backend}")
        if self.backend == "openai":
            if not self.base_url:
                raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
            if self.chat_template:
                raise UserError("--chat-template applies to the vllm and hf backends; a server uses the template "
                                "it was started with (vllm serve --chat-template FILE)")


def output_settings(config: GenerateConfig, chat_template: str | None, teacher_identity: str | None = None) -> dict:
    """What decides the rows' content: fingerprinted into ``gen_config`` and the manifest.

    The teacher is there twice: its name, and its content (identity.py: the hash of its weights and
    tokenizer, or its Hub revision), so new weights at the same path are another config.
    """
    from reasonkit.store import fingerprint

    if teacher_identity is None:
        teacher_identity = teacher_content(config)
    settings = {
        "teacher": config.teacher, "teacher_identity": teacher_identity, "backend": config.backend, "n": config.n,
        "temperature": config.temperature, "top_p": config.top_p, "max_tokens": config.max_tokens,
        "seed": config.seed, "system": config.system, "instruction": config.instruction,
        "prefill_think": config.prefill_think, "dtype": config.dtype,
        "chat_template": None if chat_template is None else fingerprint(chat_template),
        "columns": dataclasses.asdict(config.columns),
    }
    if output_engine_args(config.engine_args):  # only when set: runs made before engine_args keep their hash
        settings["engine_args"] = output_engine_args(config.engine_args)
    return settings


def teacher_content(config: GenerateConfig) -> str:
    """The teacher's identity, trusting the hashes OUT's manifest recorded for files whose size and
    mtime are unchanged (a resumed run over a large checkpoint reads nothing again)."""
    from reasonkit.identity import model_identity, remember
    from reasonkit.store import is_stage_dir, load_manifest

    if not config.overwrite and is_stage_dir(config.out):
        manifest = load_manifest(config.out)
        if (manifest.get("config") or {}).get("teacher") == config.teacher:  # hashes of these very files
            remember(config.teacher, manifest.get("teacher_files"))
    return model_identity(config.teacher, api=config.backend == "openai")


def check_same_teacher(config: GenerateConfig, identity: str) -> None:
    """Resuming OUT with a teacher whose content changed would mix two models' rows: refuse."""
    from reasonkit.store import is_stage_dir, load_manifest

    if config.overwrite or not is_stage_dir(config.out):
        return
    before = load_manifest(config.out).get("config") or {}
    if before.get("teacher") == config.teacher and before.get("teacher_identity") != identity:
        old = before.get("teacher_identity") or "unrecorded (written before reasonkit recorded content)"
        raise UserError(f"{config.out} was generated by teacher {config.teacher} with content {old}, now {identity}; "
                        "pass --overwrite to regenerate it, or choose another --out")


def preflight(config: GenerateConfig):
    """Everything checkable before work starts; returns the server info for the openai backend."""
    from reasonkit.gen.preflight import check_max_tokens, model_length

    if config.backend == "openai":
        from reasonkit.gen.openai_backend import probe

        info = probe(config.base_url, config.teacher, config.api_key_env)
        check_max_tokens(config.max_tokens, info.max_model_len, f"{config.base_url} max_model_len")
        return info
    if config.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise UserError("--backend vllm: vllm is not installed (pip install 'reasonkit[vllm]'), or use --backend hf")
    length, where = model_length(config.teacher)
    if config.max_model_len is not None:
        length, where = config.max_model_len, "--max-model-len"
    check_max_tokens(config.max_tokens, length, where)
    return None


def make_backend(config: GenerateConfig, *, info=None, llm=None, chat_template: str | None = None):
    """The backend a config asks for. ``llm``: an already built ``vllm.LLM`` to reuse (tests, eval)."""
    if config.backend == "openai":
        from reasonkit.gen.openai_backend import OpenAIBackend
        from reasonkit.gen.retry import RetryPolicy

        return OpenAIBackend(config.teacher, base_url=config.base_url, api_key_env=config.api_key_env,
                             concurrency=config.concurrency, timeout=config.request_timeout,
                             retry=RetryPolicy(max_retries=config.max_retries), info=info)
    if config.backend == "hf":
        from reasonkit.gen.hf_backend import HFBackend

        options = dict(dtype=config.dtype, max_model_len=config.max_model_len, chat_template=chat_template,
                       batch_size=config.batch_size)
        if config.data_parallel > 1:  # one model per GPU (gen/parallel.py)
            from reasonkit.gen.parallel import DataParallel

            return DataParallel(config.teacher, config.data_parallel, backend="hf", **options)
        return HFBackend(config.teacher, **options)
    # engine_args last: they override reasonkit's own defaults (gen/engine_args.py says which)
    engine = dict(dtype=config.dtype, max_model_len=config.max_model_len, tensor_parallel=config.tensor_parallel,
                  gpu_memory_utilization=config.gpu_memory_utilization, seed=config.seed, **config.engine_args)
    window = 2 * config.shard_size  # the next shard queues while this one finishes: no idle tail
    if config.data_parallel > 1 and llm is None:
        from reasonkit.gen.parallel import DataParallel

        return DataParallel(config.teacher, config.data_parallel, chat_template=chat_template, window=window, **engine)
    from reasonkit.gen.vllm_backend import VllmBackend

    return VllmBackend(config.teacher, llm=llm, chat_template=chat_template, window=window, **engine)


def generate(config: GenerateConfig, *, backend=None) -> dict:
    """Run the stage; returns the final manifest. ``backend``: a prebuilt one (see make_backend)."""
    from reasonkit.gen.progress import Progress, summary_line
    from reasonkit.gen.render import THINK_PREFILL, build_messages, load_chat_template
    from reasonkit.gen.shards import Assembler, plan, totals
    from reasonkit.hub.public import public_model
    from reasonkit.readers import prompt_notes, read_prompts
    from reasonkit.store import StageWriter, fingerprint, fingerprint_path

    sandbox_mode = None
    if "python" in (config.tools or "").split(","):  # the python tool: the sandbox starts, before the prompts are read
        from reasonkit.sandbox.stage import require_sandbox

        sandbox_mode = require_sandbox("distill generate --tools python")
    prompts = read_prompts(config.prompts, config.columns, limit=config.limit, split=config.split)
    template = load_chat_template(config.chat_template)
    toolbox = None
    if config.tools:  # an unknown tool or a bad corpus is the user's error, before OUT exists
        from reasonkit.gen.tools.trajectories import load_run_tools, tool_settings

        toolbox = load_run_tools(config)
    info = preflight(config) if backend is None else None
    if config.engine == "ray":
        from reasonkit.gen.ray_engine import connect_for

        connect_for(config)  # an unreachable cluster fails here, before OUT exists
    settings = output_settings(config, template, teacher_content(config))
    if toolbox is not None:
        settings.update(tool_settings(config, toolbox))
    check_same_teacher(config, settings["teacher_identity"])
    kind = "traces" if toolbox is None else "trajectories"
    writer = StageWriter(config.out, stage="generate", kind=kind, config=settings, keys=("id", "sample"),
                         input_fingerprint=fingerprint_path(config.prompts, config.split), input_path=config.prompts,
                         overwrite=config.overwrite)
    teacher_files = teacher_file_record(config.teacher)
    writer.manifest["teacher_files"] = teacher_files  # saved with the first shard (or at finish)
    problems = prompts.column("problem").to_pylist() if "problem" in prompts.column_names else [None] * len(prompts)
    messages = [build_messages(m, problem=p, instruction=config.instruction, system=config.system)
                for m, p in zip(prompts.column("messages").to_pylist(), problems)]
    work = plan(prompts.column("id").to_pylist(), config.n, config.shard_size, writer.done_keys())
    progress = Progress(len(prompts), len(prompts) - work.prompts, n=config.n)
    # the rows name their teacher by content, never by where it sat on this machine: a local
    # directory as NAME@sha256:..., a Hub id at its revision, a served model by its name
    teacher = public_model(config.teacher, settings["teacher_identity"])
    if toolbox is not None:
        from reasonkit.gen.tools.trajectories import TrajectoryAssembler

        Assembler = TrajectoryAssembler  # the same shards and commits, rows built from trajectories
    assembler = Assembler(
        prompts, messages, work, teacher=teacher, gen_config=fingerprint(settings),
        prefilled=config.prefill_think, commit=writer.commit,
    )
    if toolbox is not None:  # every row carries the schemas its model was shown (TRL's SFT `tools` column)
        import json

        assembler.tools = json.dumps(toolbox.schemas(), ensure_ascii=False)
    described = None
    prefill = THINK_PREFILL if config.prefill_think else ""
    try:
        if work.prompts and config.engine == "ray":
            from reasonkit.gen.ray_engine import generate_on_ray

            if backend is not None:
                raise ValueError("engine ray builds one backend per replica; pass no prebuilt backend")
            described = generate_on_ray(config, prompts, messages, work, writer, template=template, info=info,
                                        gen_config=fingerprint(settings), prefill=prefill, progress=progress,
                                        teacher=teacher, make_backend=make_backend)
        elif work.prompts:
            owned = backend is None
            backend = backend or make_backend(config, info=info, chat_template=template)
            progress.restart()
            try:
                if toolbox is None:
                    stream = backend.generate(assembler.requests(config, prefill))
                else:  # multi-turn: each row is a whole trajectory (gen/tools/loop.py)
                    from reasonkit.gen.tools.loop import rollouts

                    stream = rollouts(backend, assembler.requests(config, prefill), toolbox, max_turns=config.max_turns,
                                      workers=config.tool_workers, window=2 * config.shard_size * config.n)
                for completion in stream:
                    finished = assembler.add(completion)
                    progress.update(prompts=finished, samples=1, tokens=completion.completion_tokens)
                described = backend.describe()
            finally:
                if owned:
                    backend.close()
            assembler.check_complete()
    finally:
        progress.close()
    counts = totals(writer)
    replicas = config.replicas if config.engine == "ray" else config.data_parallel
    line = summary_line(counts, run_tokens=progress.tokens, run_s=progress.elapsed, setup_s=progress.setup_s)
    print(line, file=sys.stderr, flush=True)
    last_run = {
        "setup_s": round(progress.setup_s, 3), "generate_s": round(progress.elapsed, 3),
        "completion_tokens": progress.tokens, "tokens_per_s": round(progress.tokens_per_s, 1),
        # per engine: the figure a GPU-hour estimate divides by (README, "Scale-out on Ray")
        "replicas": replicas, "tokens_per_s_per_replica": round(progress.tokens_per_s / replicas, 1),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return writer.finish(
        summary=counts, gen_config=fingerprint(settings), run_config=dataclasses.asdict(config), last_run=last_run,
        backend_info=described or writer.manifest.get("backend_info"),  # a no-op rerun keeps the last one's
        teacher_files=teacher_files,
        prompt_notes=prompt_notes(prompts) or None,  # what reading changed in the user's prompts
        **({"sandbox": sandbox_mode} if sandbox_mode else {}),
    )


def teacher_file_record(teacher: str) -> dict | None:
    """``{file: [size, mtime_ns, sha256]}`` of a local teacher directory (hashed already), for the
    manifest: what the identity was computed from, and the next run's cache."""
    from pathlib import Path

    from reasonkit.identity import file_record

    return file_record(teacher) if Path(teacher).expanduser().is_dir() else None
