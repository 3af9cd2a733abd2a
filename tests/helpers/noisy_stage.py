"""A recipe stage that logs the way the libraries under a real step do (vLLM's own logger setup,
transformers' stderr handler, a ``warnings.warn`` as torch issues them), for tests/recipes/test_logs.py.
(Named by module path, ``reasonkit.tests.helpers.noisy_stage``, in the test's child process.)"""

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from reasonkit.errors import UserError


@dataclass(frozen=True)
class NoisyConfig:
    out: str = ""
    fail: bool = False


def run_noisy(config: NoisyConfig) -> dict:
    from transformers.utils import logging as hf_logging
    from vllm.config.logging import LoggingConfig
    from vllm.logger import configure_logging_if_needed, init_logger

    configure_logging_if_needed(
        LoggingConfig()
    )  # what vLLM does as an engine starts (EngineArgs.create_engine_config)
    init_logger("vllm.noisy").info("VLLM-INFO-LINE")
    init_logger("vllm.noisy").warning("VLLM-WARNING-LINE")
    hf_logging.get_logger("transformers.noisy").warning("TRANSFORMERS-WARNING-LINE")
    warnings.warn("LIBRARY-USERWARNING-LINE", stacklevel=1)
    print("STEP-OWN-LINE", file=sys.stderr, flush=True)  # a stage's own output (progress, figures) stays
    if config.fail:
        init_logger("vllm.noisy").error("VLLM-ERROR-LINE")
        raise UserError("noisy: FAILED-ON-PURPOSE")
    Path(config.out).mkdir(parents=True, exist_ok=True)
    return {"ok": True}
