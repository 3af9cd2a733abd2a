"""The generate stage's config: light (no pyarrow, no backend) so its command and a recipe's check load fast.

The shared groups (sampling, prompt, backend, tools, engine) are declared once in gen/settings.py and
engine.py; eval and the judges hold the same groups and hand them to this config unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reasonkit.config import Checks, ColumnMap, setting
from reasonkit.engine import EngineSettings, check_engine
from reasonkit.gen.engine_args import EngineArgs
from reasonkit.gen.logprobs import MAX_K
from reasonkit.gen.settings import BACKENDS, BackendSettings, PromptSettings, SamplingSettings, ToolSettings

#: The counts a run needs at least one of (max_retries: none is fine), and those that may be left unset.
AT_LEAST = {
    "n": 1,
    "max_tokens": 1,
    "shard_size": 1,
    "concurrency": 1,
    "tensor_parallel": 1,
    "data_parallel": 1,
    "batch_size": 1,
    "max_retries": 0,
    "max_turns": 1,
    "tool_workers": 1,
    "search_k": 1,
}
AT_LEAST_WHEN_SET = {"limit": 1, "max_model_len": 2}


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
        check = Checks()
        check.run(lambda: check_engine(self.engine, self.replicas, self.ray_address))
        check(
            self.engine != "ray" or self.data_parallel <= 1,
            "data_parallel",
            f"{self.data_parallel} is the local engine's; with --engine ray use --replicas {self.data_parallel} "
            "(one engine per replica)",
        )
        for name, low in AT_LEAST.items():
            check(getattr(self, name) >= low, name, f"expected at least {low}, found {getattr(self, name)}")
        for name, low in AT_LEAST_WHEN_SET.items():
            value = getattr(self, name)
            check(value is None or value >= low, name, f"expected at least {low}, found {value}")
        check(self.backend in BACKENDS, "backend", f"expected one of {', '.join(BACKENDS)}, found {self.backend!r}")
        check(self.temperature >= 0, "temperature", f"expected >= 0, found {self.temperature}")
        check(0 < self.top_p <= 1, "top_p", f"expected in (0, 1], found {self.top_p}")
        check(
            0 < self.gpu_memory_utilization <= 1,
            "gpu_memory_utilization",
            f"expected in (0, 1], found {self.gpu_memory_utilization}",
        )
        check(self.tool_timeout > 0, "tool_timeout", f"expected > 0 seconds, found {self.tool_timeout}")
        if self.tools is not None or self.corpus is not None:
            from reasonkit.gen.tools.trajectories import check_tool_config

            check.run(
                lambda: check_tool_config(
                    self.tools,
                    self.corpus,
                    engine=self.engine,
                    replicas=self.data_parallel,
                    prefill_think=self.prefill_think,
                )
            )
        check.run(
            lambda: object.__setattr__(self, "engine_args", EngineArgs.from_config(self.engine_args, "engine_args"))
        )
        self._check_logprobs(check)
        self._check_backend(check)
        check.done()

    def _check_logprobs(self, check: Checks) -> None:
        """``--logprobs K``: a count, on single-turn rows (a trajectory's turns would each need their own), within
        what vLLM's engine gives (``max_logprobs``: 20 unless engine_args say more; a server says its own)."""
        if self.logprobs is None:
            return
        check(
            self.logprobs >= 1 and not self.tools,
            "logprobs",
            f"expected at least 1, and no --tools (one turn per row), found {self.logprobs}",
        )
        args = self.engine_args if isinstance(self.engine_args, Mapping) else {}  # not a mapping: engine_args says so
        cap = args.get("max_logprobs", MAX_K)
        check(
            not (self.backend == "vllm" and 0 <= cap < self.logprobs),
            "logprobs",
            f"vLLM's engine gives at most max_logprobs {cap} (engine_args max_logprobs raises it), "
            f"found {self.logprobs}",
        )

    def _check_backend(self, check: Checks) -> None:
        """What one backend takes and the others do not: engine_args (vllm), a server's address, a chat template."""
        if isinstance(self.engine_args, Mapping) and self.engine_args:
            check(
                self.backend == "vllm",
                "engine_args",
                f"{dict(self.engine_args)} apply to the vllm backend, not --backend {self.backend}",
            )
        if self.backend == "openai":
            check(bool(self.base_url), "base_url", "--backend openai needs one (e.g. http://127.0.0.1:8000/v1)")
            check(
                not self.chat_template,
                "chat_template",
                "applies to the vllm and hf backends; a server uses the template it was started with "
                "(vllm serve --chat-template FILE)",
            )
