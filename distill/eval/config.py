"""``distill eval``'s config: light (no pyarrow, no backend), so its command and a recipe's check load fast.

It holds the generate stage's groups (gen/settings.py, engine.py) and hands them to the generate stage
whole (distill/eval/run.py), so an evaluation samples exactly as ``distill generate`` would.
The protocol defaults are DeepSeek-R1's: temperature 0.6, top-p 0.95, the boxed-answer instruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reasonkit.config import Checks, setting
from reasonkit.distill.trackers import REPORT_TO
from reasonkit.engine import EngineSettings, check_engine
from reasonkit.gen.settings import BackendSettings, PromptSettings, SamplingSettings, ToolSettings

#: The group fields ``distill eval`` does not offer as flags (YAML and ``--set`` still reach them).
NOT_FLAGS = (
    "system",
    "prefill_think",
    "chat_template",
    "concurrency",
    "gpu_memory_utilization",
    "batch_size",
    "tool_timeout",
    "tool_workers",
)


@dataclass(frozen=True, kw_only=True)
class EvalConfig(SamplingSettings, PromptSettings, BackendSettings, ToolSettings, EngineSettings):
    model: str = setting(help="Model directory or Hub id (the base model when --adapter is given).")
    adapter: str | None = setting(None, "A peft LoRA adapter directory to evaluate on top of --model.")
    data: str = setting(help="Parquet/JSONL/CSV with problem and answer columns, a stage directory, or a Hub id.")
    out: str = setting(help="Output directory.")
    k: int = setting(8, "Samples per problem.")
    # a truncated sample (finish_reason "length") has no answer unless this is set: a cut-off
    # trace's last \boxed{} is a guess mid-reasoning, and scoring it inflates pass@1
    score_truncated: bool = setting(
        False, "Extract and score answers from truncated samples too (default: they count as no answer)."
    )
    problem_col: str = setting("problem", "")
    answer_col: str = setting("answer", "")
    id_col: str = setting("id", "")
    limit: int | None = setting(None, "Evaluate only the first N problems.")
    split: str | None = setting(
        None, cli=False
    )  # of a Hugging Face dataset: its only split unless named (dataset_ref.py)
    decontam_against: tuple[str, ...] = setting(
        (), "Training-data directory to check eval problems against (repeatable)."
    )
    ngram: int = setting(8, cli=False)
    verifier: Literal["math", "int", "code", "exact"] = setting(
        "math",
        "code: the response's last Python block run against the problem's tests (column `tests`, JSON) "
        "in the sandbox; cons@k votes on the programs' outputs. Pass an --instruction asking for code. "
        "exact: the answer's text.",
    )
    verify_timeout: float = setting(5.0, cli=False)  # per answer; with the code verifier, per test
    tests_col: str = setting("tests", cli=False)  # the code verifier's tests (JSON; filters/code/tests.py)
    # engine replicas on this node, each on tensor_parallel GPUs of its own (gen/parallel.py);
    # "auto": every visible GPU. 8 GPUs at tensor_parallel 1 evaluate 8 times as fast.
    data_parallel: int | Literal["auto"] = setting(
        1,
        "vllm or hf: engine replicas on this node, each on --tensor-parallel GPUs of its own; auto: every "
        "visible GPU.",
    )
    # a problem whose first prompt alone fills max_model_len is refused before generating (distill/eval/fit.py)
    # unless this is set; then it is counted as context_overflow, apart from no_answer
    allow_overflow: bool = setting(
        False, "Evaluate even if a problem's first prompt cannot fit --max-model-len (counted as context_overflow)."
    )
    label: str | None = setting(None, "Name of this run in reports (default: the --out folder name).")
    overwrite: bool = setting(False, "Replace an existing evaluation with a different config.")
    extra: dict = setting(factory=dict, cli=False)  # free-form notes recorded in the protocol
    # trackers to log the summary to, as a run of its own (distill/trackers.py): tensorboard, wandb, trackio, mlflow
    report_to: list[str] | str | None = setting(
        None,
        "Log the summary (pass@1, cons@k, pass@k, counts; the protocol as config) to a tracker, as a run of "
        "its own; repeatable (each an extra: pip install 'reasonkit[wandb]') [none].",
        choices=REPORT_TO,
        multiple=True,
    )

    def __post_init__(self) -> None:
        from reasonkit.distill.trackers import names
        from reasonkit.gen.tools.trajectories import check_tool_config

        check = Checks()
        check.run(lambda: check_engine(self.engine, self.replicas, self.ray_address))
        check.run(lambda: names(self.report_to))  # a name that is no tracker
        check(self.k >= 1, "k", f"expected at least 1 sample per problem, found {self.k}")
        check(self.max_turns >= 1, "max_turns", f"expected at least 1, found {self.max_turns}")
        parallel = self.data_parallel
        check(
            parallel == "auto" or (not isinstance(parallel, bool) and parallel >= 1),
            "data_parallel",
            f"expected at least 1 or auto, found {parallel!r}",
        )
        if self.tools is not None or self.corpus is not None:  # the generate stage's checks, before OUT exists
            replicas = parallel if isinstance(parallel, int) else 2  # auto: more than one
            check.run(
                lambda: check_tool_config(
                    self.tools, self.corpus, engine=self.engine, replicas=replicas, prefill_think=self.prefill_think
                )
            )
        check.done()
