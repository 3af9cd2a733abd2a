"""The generate stage's config: light (no pyarrow, no backend) so its command and a recipe's check load fast.

The shared groups (sampling, prompt, backend, tools, engine) are declared once in gen/settings.py and
engine.py; eval and the judges hold the same groups and hand them to this config unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from reasonkit.config import ColumnMap, setting
from reasonkit.engine import EngineSettings, check_engine
from reasonkit.errors import UserError
from reasonkit.gen.engine_args import EngineArgs
from reasonkit.gen.logprobs import MAX_K
from reasonkit.gen.settings import BACKENDS, BackendSettings, PromptSettings, SamplingSettings, ToolSettings


@dataclass(frozen=True, kw_only=True)
class GenerateConfig(SamplingSettings, PromptSettings, BackendSettings, ToolSettings, EngineSettings):
    """``distill generate``: every field is a flag (options.py) and a YAML/``--set`` key; the shared
    groups (sampling, prompt, backend, tools, engine) are declared once in gen/settings.py and engine.py."""

    prompts: str = setting(help="Prompts: .parquet/.jsonl/.csv file, stage directory or Hub dataset id.")
    teacher: str = setting(help="Model directory or Hub id (openai: the served model name).")
    out: str = setting(help="Output stage directory (traces); rerunning the same command resumes it.")
    n: int = setting(8, "Samples per prompt.")
    limit: int | None = setting(None, "Only the first N prompts.")
    shard_size: int = setting(1000, "Prompts per committed shard.")
    columns: ColumnMap = setting(factory=ColumnMap, flags="--{}-col")
    # of a Hugging Face dataset: its only split unless named (dataset_ref.py)
    split: str | None = setting(None, "Split of a Hugging Face dataset (default: its only split); or write ID:SPLIT.")
    overwrite: bool = setting(False, "Replace an --out written with other settings.")
    logprobs: int | None = setting(
        None,
        "Store the teacher's top-K log-probs of every completion token (columns completion_ids, logprob_ids, "
        "logprobs: train --kd-weight reads them).",
        metavar="K",
    )

    def __post_init__(self) -> None:
        check_engine(self.engine, self.replicas, self.ray_address)
        if self.engine == "ray" and self.data_parallel > 1:
            raise UserError(
                f"--data-parallel {self.data_parallel} is the local engine's; with --engine ray "
                f"use --replicas {self.data_parallel} (one engine per replica)"
            )
        for name, low in (
            ("n", 1),
            ("max_tokens", 1),
            ("shard_size", 1),
            ("concurrency", 1),
            ("tensor_parallel", 1),
            ("data_parallel", 1),
            ("batch_size", 1),
            ("max_retries", 0),
            ("max_turns", 1),
            ("tool_workers", 1),
            ("search_k", 1),
        ):
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

            check_tool_config(
                self.tools,
                self.corpus,
                engine=self.engine,
                replicas=self.data_parallel,
                prefill_think=self.prefill_think,
            )
        if not 0 < self.top_p <= 1:
            raise UserError(f"--top-p {self.top_p}: expected in (0, 1]")
        self._check_logprobs()
        if self.limit is not None and self.limit < 1:
            raise UserError(f"--limit {self.limit}: expected at least 1")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise UserError(f"--max-model-len {self.max_model_len}: expected at least 2")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise UserError(f"--gpu-memory-utilization {self.gpu_memory_utilization}: expected in (0, 1]")
        object.__setattr__(self, "engine_args", EngineArgs.from_config(self.engine_args, "engine_args"))
        if self.engine_args and self.backend != "vllm":
            raise UserError(
                f"engine_args {dict(self.engine_args)} apply to the vllm backend, not --backend {self.backend}"
            )
        if self.backend == "openai":
            if not self.base_url:
                raise UserError("--backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)")
            if self.chat_template:
                raise UserError(
                    "--chat-template applies to the vllm and hf backends; a server uses the template "
                    "it was started with (vllm serve --chat-template FILE)"
                )

    def _check_logprobs(self) -> None:
        """``--logprobs K``: a count, on single-turn rows (a trajectory's turns would each need their own), within
        what vLLM's engine gives (``max_logprobs``: 20 unless engine_args say more; a server says its own)."""
        if self.logprobs is None:
            return
        if self.logprobs < 1 or self.tools:
            raise UserError(f"--logprobs {self.logprobs}: expected at least 1, and no --tools (one turn per row)")
        cap = (self.engine_args or {}).get("max_logprobs", MAX_K)
        if self.backend == "vllm" and 0 <= cap < self.logprobs:
            raise UserError(
                f"--logprobs {self.logprobs}: vLLM's engine gives at most max_logprobs {cap} "
                "(engine_args max_logprobs raises it)"
            )
