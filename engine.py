"""Where a stage's shards run: ``local`` (this process and its pools) or ``ray`` (a Ray cluster).

Light on purpose: the generate, filter and eval configs hold :class:`EngineSettings` and check them
here, and their commands' flags are generated from it (options.py), without importing Ray. Ray itself loads in
:mod:`reasonkit.ray_engine`, and only when ``engine`` is ``ray``.

>>> check_engine("ray", 4, None)
>>> check_engine("local", 2, None)
Traceback (most recent call last):
...
reasonkit.errors.UserError: --replicas 2 needs --engine ray (the local engine runs one replica)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from reasonkit.config import setting
from reasonkit.errors import UserError

ENGINES = ("local", "ray")
#: Config fields that decide where the work runs, never what it writes: left out of fingerprints,
#: so a run started locally can be resumed on a cluster (and the other way round).
ENGINE_FIELDS = ("engine", "replicas", "ray_address")


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Where a stage's shards run (generate, filter, eval): the settings of ENGINE_FIELDS, declared once."""

    engine: Literal["local", "ray"] = setting("local", "local: this machine; ray: Ray Data over the input shards.")
    replicas: int = setting(
        1, "ray: workers running shards at once (one engine each, on --tensor-parallel GPUs for generation)."
    )
    ray_address: str | None = setting(
        None,
        "ray: cluster to join (host:port, or 'auto' on a node of a running cluster). [default: start a local one]",
    )


def check_engine(engine: str, replicas: int, ray_address: str | None) -> None:
    """The engine settings that cannot work together: every one in one UserError.

    >>> check_engine("spark", 0, None)
    Traceback (most recent call last):
    ...
    reasonkit.errors.UserError: --engine 'spark': expected one of local, ray; --replicas 0: expected at least 1
    """
    problems = []
    if engine not in ENGINES:
        problems.append(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        problems.append(f"--replicas {replicas}: expected at least 1")
    elif engine == "local" and replicas != 1:
        problems.append(f"--replicas {replicas} needs --engine ray (the local engine runs one replica)")
    if engine == "local" and ray_address:
        problems.append(f"--ray-address {ray_address} needs --engine ray")
    if problems:
        raise UserError(*problems)


def usable_cores() -> int:
    """The cores this process may use (its CPU affinity, not the machine's count: a container or
    ``taskset`` may give it fewer)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
