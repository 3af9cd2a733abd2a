"""A recipe stage that reports which process ran it, or fails in each way a model step can, for
tests/recipes/test_isolate.py. (Named by module path, ``reasonkit.tests.helpers.isolate_stages``: a
step's child process imports it as the checkout's editable install maps it.)"""

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from reasonkit.errors import UserError


@dataclass(frozen=True)
class ProbeConfig:
    out: str = ""
    # "ok"; "fail" (a UserError); "crash" (an exception); "kill" (SIGKILL, as the OOM killer does);
    # "hang" (writes its pid to ``out``/pid, then sleeps until stopped)
    mode: str = "ok"
    backend: str = "hf"  # as a judge step would name it: the pre-flight then asks for no vLLM


def run_probe(config: ProbeConfig) -> dict:
    from reasonkit.sandbox import ENV_MODE

    logging.getLogger("transformers.probe").warning("PROBE-LIBRARY-LINE")  # goes to the step's run.log
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    if config.mode == "fail":
        raise UserError("probe: FAILED-ON-PURPOSE")
    if config.mode == "crash":
        raise RuntimeError("PROBE-CRASH")
    if config.mode == "kill":
        if os.environ.get("PROBE_TEST_PID") == str(os.getpid()):  # in-process, SIGKILL would end the test run
            raise RuntimeError("the probe ran in the test's own process")
        os.kill(os.getpid(), signal.SIGKILL)
    if config.mode == "hang":
        (out / "pid").write_text(str(os.getpid()))
        time.sleep(600)
    return {"pid": os.getpid(), "sandbox": os.environ.get(ENV_MODE)}
