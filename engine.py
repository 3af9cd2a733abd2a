"""Where a stage's shards run: ``local`` (this process and its pools) or ``ray`` (a Ray cluster).

Light on purpose (click only): the generate, filter and eval configs check their engine settings
here and the commands share the flags, without importing Ray. Ray itself loads in
:mod:`reasonkit.ray_engine`, and only when ``engine`` is ``ray``.

>>> check_engine("ray", 4, None)
>>> check_engine("local", 2, None)
Traceback (most recent call last):
...
reasonkit.errors.UserError: --replicas 2 needs --engine ray (the local engine runs one replica)
"""

from __future__ import annotations

import os

from reasonkit.errors import UserError

ENGINES = ("local", "ray")
#: Config fields that decide where the work runs, never what it writes: left out of fingerprints,
#: so a run started locally can be resumed on a cluster (and the other way round).
ENGINE_FIELDS = ("engine", "replicas", "ray_address")


def check_engine(engine: str, replicas: int, ray_address: str | None) -> None:
    """One clear error for engine settings that cannot work together."""
    if engine not in ENGINES:
        raise UserError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise UserError(f"--replicas {replicas}: expected at least 1")
    if engine == "local" and replicas != 1:
        raise UserError(f"--replicas {replicas} needs --engine ray (the local engine runs one replica)")
    if engine == "local" and ray_address:
        raise UserError(f"--ray-address {ray_address} needs --engine ray")


def usable_cores() -> int:
    """The cores this process may use (its CPU affinity, not the machine's count: a container or
    ``taskset`` may give it fewer)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def engine_options(command):
    """The ``--engine``, ``--replicas`` and ``--ray-address`` flags, shared by generate, filter and eval.

    Defaults are None so a command can tell "not given" from the default (a YAML may set them).
    """
    import click

    for option in reversed((
        click.option("--engine", type=click.Choice(ENGINES), default=None,
                     help="local: this machine; ray: Ray Data over the input shards. [default: local]"),
        click.option("--replicas", type=int, default=None,
                     help="ray: workers running shards at once (one engine each, on --tensor-parallel GPUs "
                          "for generation). [default: 1]"),
        click.option("--ray-address", default=None,
                     help="ray: cluster to join (host:port, or 'auto' on a node of a running cluster). "
                          "[default: start a local one]"),
    )):
        command = option(command)
    return command
