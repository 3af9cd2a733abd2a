"""Library logs of a recipe step go to ``OUT/<step>/run.log``, so the terminal shows the steps.

vLLM alone writes hundreds of INFO and WARNING lines per engine start (the quickstart starts six),
and transformers, datasets, Ray and torch's ``warnings`` add theirs; the step table, progress bars
and figures drown in them. While a step runs, those libraries' loggers write to the step's
``run.log`` instead; their ERROR lines still reach stderr as well, and a failing step names the log.
``--verbose`` leaves every library's logging as the library set it up.

Why it takes more than swapping handlers: a library sets up its logger when it is first imported,
which is usually inside the step. vLLM (re)configures its logger from ``VLLM_LOGGING_CONFIG_PATH``
at import and at each engine start, in this process and in its engine-core child processes, so
that variable points at a config writing to the step's log. transformers and datasets add their
stderr handler on import, so their logging modules are imported before the swap (about 1 s, once
per process); Ray is imported first only for a step that runs on Ray.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

LOG = "run.log"
#: Loggers whose records go to the step's log. A logger's children (``vllm.engine``...) follow it.
LIBRARIES = (
    "vllm",
    "transformers",
    "datasets",
    "huggingface_hub",
    "accelerate",
    "peft",
    "trl",
    "torch",
    "ray",
    "filelock",
    "httpx",
    "urllib3",
    "py.warnings",
)
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_CONFIGURE_ON_IMPORT = ("transformers.utils.logging", "datasets.utils.logging")
_configs_dir: str | None = None


@contextlib.contextmanager
def step_logs(
    directory: Path, *, verbose: bool = False, preload: tuple[str, ...] = (), echo: Callable[[str], None] = print
) -> Iterator[Path | None]:
    """Route library logs into ``directory/run.log`` while the block runs (nothing when ``verbose``).

    ``preload``: further modules that configure logging on import (``ray`` for a step on Ray).
    """
    if verbose:
        yield None
        return
    path = directory / LOG
    for module in (*_CONFIGURE_ON_IMPORT, *preload):
        if importlib.util.find_spec(module.split(".")[0]) is not None:
            importlib.import_module(module)
    to_file = StepLogHandler(path)
    to_file.setFormatter(logging.Formatter(_FORMAT))
    errors = logging.StreamHandler(sys.stderr)
    errors.setLevel(logging.ERROR)
    errors.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    saved = {}
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        saved[name] = (list(logger.handlers), logger.propagate)
        logger.handlers = [to_file, errors]
        logger.propagate = False
    captured = warnings.showwarning is getattr(logging, "_showwarning", None)
    logging.captureWarnings(True)
    env = _point_vllm_at(path)
    try:
        yield path
    except BaseException:
        announce_failure(directory, echo)
        raise
    finally:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not captured:
            logging.captureWarnings(False)
        for name, (handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            for handler in logger.handlers:  # ours, and any a library installed meanwhile (vLLM's FileHandler)
                if handler not in handlers:
                    handler.close()
            logger.handlers, logger.propagate = handlers, propagate
        to_file.close()


def announce_failure(directory: Path, echo: Callable[[str], None]) -> None:
    """The ``[fail]`` line of a step that failed, naming its log where anything was written to it."""
    path = directory / LOG
    if path.is_file():
        echo(f"[fail] {directory.name}: library logs in {path}")


class StepLogHandler(logging.FileHandler):
    """Appends to the step's log, creating it (and the step's directory) at the first record only.

    Nothing is written before a library logs, so a stage finds its output directory as it left it
    (the student stage replaces its directory whole), and a quiet step leaves no empty log.
    """

    def __init__(self, filename: str | os.PathLike) -> None:
        super().__init__(filename, mode="a", encoding="utf-8", delay=True)

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def _point_vllm_at(path: Path) -> dict[str, str | None]:
    """Set ``VLLM_LOGGING_CONFIG_PATH`` to a config writing to ``path``; returns the values to restore.

    Left alone when the user configures vLLM's logging themselves (either variable set).
    """
    if "VLLM_LOGGING_CONFIG_PATH" in os.environ or os.environ.get("VLLM_CONFIGURE_LOGGING") == "0":
        return {}
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": _FORMAT}},
        "handlers": {
            "file": {"class": f"{__name__}.StepLogHandler", "filename": str(path.resolve()), "formatter": "plain"},
            "errors": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "level": "ERROR",
                "formatter": "plain",
            },
        },
        "loggers": {
            "vllm": {
                "handlers": ["file", "errors"],
                "level": os.environ.get("VLLM_LOGGING_LEVEL", "INFO"),
                "propagate": False,
            }
        },
    }
    fd, file = tempfile.mkstemp(prefix="vllm-logging-", suffix=".json", dir=_config_dir())
    with os.fdopen(fd, "w") as f:
        json.dump(config, f)
    previous = {"VLLM_LOGGING_CONFIG_PATH": None}
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = file
    return previous


def _config_dir() -> str:
    """One temp folder per process for the configs, removed at exit rather than after each step:
    vLLM caches its environment once an engine started, and may read the file named there again."""
    global _configs_dir
    if _configs_dir is None:
        _configs_dir = tempfile.mkdtemp(prefix="reasonkit-logs-")
        atexit.register(shutil.rmtree, _configs_dir, ignore_errors=True)
    return _configs_dir
