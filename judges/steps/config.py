"""``distill label-steps``' config: a light frozen dataclass (no pyarrow, torch or vLLM at import), so
a recipe can be validated without loading anything.

>>> LabelStepsConfig(input="v", out="o", policy="m").n
8
>>> LabelStepsConfig(input="v", out="o", policy="m", n=0)
Traceback (most recent call last):
...
reasonkit.errors.FieldErrors: n: expected at least 1 rollout per step, found 0
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from reasonkit.config import Checks, setting
from reasonkit.gen.engine_args import EngineArgs, output_engine_args
from reasonkit.gen.settings import BackendSettings, SamplingSettings
from reasonkit.judges.config import StageRun

BACKENDS = ("vllm", "hf")  # the backends that render the prompt here, so a turn can be continued
VERIFIERS = ("math", "int")
#: the backend group's settings ``distill label-steps`` does not offer as flags (YAML and ``--set`` reach them)
NOT_FLAGS = ("base_url", "api_key_env", "concurrency", "tensor_parallel", "data_parallel", "gpu_memory_utilization")


@dataclass(frozen=True, kw_only=True)
class LabelStepsConfig(SamplingSettings, BackendSettings, StageRun):
    """Math-Shepherd's automatic step labels for a traces or verdicts directory. The policy samples with
    generate's sampling and backend groups (gen/settings.py), handed to it whole (judges/steps/run.py)."""

    input: str = setting(cli=False)  # the command's argument
    policy: str = setting(help="The model whose rollouts label the steps: a directory or a Hub id.")
    # only the backends that render the prompt here, so a turn can be continued
    backend: str = setting("vllm", "", choices=BACKENDS)
    # Math-Shepherd's N: rollouts per step prefix. At temperature 0 all N would be the same
    # rollout, so one is drawn (and soft labels are 0 or 1).
    n: int = setting(8, "Rollouts per step prefix (one at --temperature 0).")
    # per rollout; None: what the model's context leaves after the prefix
    max_tokens: int | None = setting(None, "Per rollout. [default: what the context leaves after the prefix]")
    # between steps; the task's solutions are one step a line
    separator: str = setting("\n", "Between steps ('\\n\\n': a blank line). [default: a newline]", show_default=False)
    verifier: str = setting("math", "", choices=VERIFIERS)  # filters/math/verify.py's Verifier, as the filter checks
    # also label a filter's rejected/ rows dropped as `wrong` (the negatives)
    include_wrong: bool = setting(
        True,
        "Label only a filter's kept rows, not its rejected/ rows dropped as wrong.",
        flag="--kept-only",
        flag_value=False,
    )
    # Only solutions whose final answer is wrong: the ones with a first wrong step, so a Step-DPO pair
    # (a policy that is mostly right spends most rollouts confirming correct solutions otherwise).
    wrong_only: bool = setting(
        False, "Label only solutions whose final answer is wrong (the ones a Step-DPO pair can come from)."
    )
    # at most this many solutions (the first ones, in input order, after wrong_only)
    limit: int | None = setting(None, "Label at most this many solutions.")
    shard_size: int = setting(64, "Solutions per committed shard.")

    def __post_init__(self) -> None:
        check = Checks()
        check(
            self.backend in BACKENDS,
            "backend",
            f"expected one of {', '.join(BACKENDS)} (a server applies its own template and cannot continue a "
            f"partial assistant turn), found {self.backend!r}",
        )
        check(self.n >= 1, "n", f"expected at least 1 rollout per step, found {self.n}")
        check(
            self.verifier in VERIFIERS, "verifier", f"expected one of {', '.join(VERIFIERS)}, found {self.verifier!r}"
        )
        for name in ("shard_size", "batch_size"):
            check(getattr(self, name) >= 1, name, f"expected at least 1, found {getattr(self, name)}")
        for name in ("limit", "max_tokens"):
            value = getattr(self, name)
            check(value is None or value >= 1, name, f"expected at least 1, found {value}")
        check(self.temperature >= 0, "temperature", f"expected >= 0, found {self.temperature}")
        check(0 < self.top_p <= 1, "top_p", f"expected in (0, 1], found {self.top_p}")
        check(bool(self.separator), "separator", "expected a non-empty string")
        check.done()
        object.__setattr__(self, "engine_args", EngineArgs.from_config(self.engine_args, "engine_args"))

    @property
    def rollouts(self) -> int:
        """Rollouts drawn per prefix: ``n``, or one when greedy decoding makes them all alike."""
        return 1 if self.temperature == 0 else self.n


def fingerprinted(cfg: LabelStepsConfig) -> dict:
    """What decides the rows (the manifest's fingerprint): not where they go, how many, nor how fast.
    The policy is named by its content (identity.py), so retrained weights at one path are another run."""
    from reasonkit.identity import model_identity

    skip = {
        "input",
        "out",
        "overwrite",
        "allow_incomplete",
        "limit",
        "wrong_only",
        "shard_size",
        "batch_size",
        "engine_args",  # which solutions, not what a row says: a run may be extended to more
        # how fast or where the policy runs (the backend group's), not what it writes
        "base_url",
        "api_key_env",
        "concurrency",
        "request_timeout",
        "max_retries",
        "tensor_parallel",
        "data_parallel",
        "gpu_memory_utilization",
    }
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in skip}
    if output_engine_args(cfg.engine_args):
        settings["engine_args"] = output_engine_args(cfg.engine_args)
    settings["policy_identity"] = model_identity(cfg.policy)
    return settings
