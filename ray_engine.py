"""Running a stage's shards on Ray Data: join or start a cluster, fan shards out, commit on the driver.

The split of work is the local engine's, unchanged: the driver plans the shards still owed (the
same resume keys, store.py) and each becomes one row of a Ray Dataset. A fixed pool of
``replicas`` actors (``map_batches`` with a callable class) takes them one at a time; an actor
loads its model, or its filters, once and reuses it for every shard it is given. Each shard's
rows come back to the driver, which stays the only writer of the stage directory and commits
the shard through the same ``StageWriter`` once all its rows are in. Hence:

- the output directory and manifest are those of a local run;
- a driver killed at any instant leaves committed shards (and nothing torn) that a rerun skips;
- a worker killed mid-shard never delivered a partial shard: Ray restarts the actor and reruns
  that shard's task (``max_restarts`` / ``max_task_retries``), so nothing is lost or doubled.

Ray is imported here only, and this module only when a stage runs with ``engine: ray``.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import warnings
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from reasonkit.errors import UserError

#: Column each replica adds to its output: which planned shard the rows belong to. Ray Data may
#: split or merge blocks on the way back, so the driver regroups rows by it before committing.
SHARD = "_shard"
#: A replica killed this many times on the same shard fails the run instead of retrying forever
#: (Ray Data's default is -1: unlimited), so a shard that crashes its worker every time surfaces.
MAX_RETRIES = 3
#: Environment a local run relies on (offline Hub, cache places, vLLM's CPU KV cache), forwarded
#: to workers of a cluster joined by address, whose processes were started without it.
_FORWARDED_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "VLLM_", "TOKENIZERS_")


def import_ray():
    """``ray`` and ``ray.data``, or one UserError that says what to install."""
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is the extra's part this engine needs)
    except ImportError as e:
        raise UserError(
            f"--engine ray: Ray Data is not installed ({e.name or e}); "
            "pip install 'reasonkit[ray]' (ray[data]>=2.40), or use --engine local"
        ) from None
    return ray


def connect(
    address: str | None = None,
    *,
    num_cpus: int | None = None,
    object_store_mb: int | None = None,
    forward_env: Sequence[str] = (),
):
    """Join the cluster at ``address``, or start a local one; reuses a connection already made.

    ``num_cpus`` / ``object_store_mb`` size a local cluster (None: Ray's defaults, every core and
    30% of memory). ``forward_env`` names extra variables the workers need (an API key's).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    env = {k: v for k, v in os.environ.items() if k.startswith(_FORWARDED_PREFIXES) or k in forward_env}
    common = dict(logging_level="WARNING", runtime_env={"env_vars": env} if env else None)
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, **common)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(
                f"--ray-address {address}: could not join a Ray cluster there ({_first_line(e)}); "
                "expected a running cluster (`ray start --head` on its head node)"
            ) from None
    else:
        memory = None if object_store_mb is None else object_store_mb * 2**20
        ray.init(num_cpus=num_cpus, object_store_memory=memory, include_dashboard=False, **common)
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on a host:port nobody listens on: ``ray.init`` would retry it for minutes."""
    if address == "auto":
        return  # ray.init finds the local node's cluster, or says at once that there is none
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(f"--ray-address {address}: expected host:port (e.g. 10.0.0.1:6379), ray://host:10001 or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UserError(
            f"--ray-address {address}: no Ray cluster reachable there ({e.strerror or e}); "
            "expected the head node's GCS address (`ray start --head` prints it)"
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def node_gpus() -> list[float]:
    """GPUs of each alive node of the cluster (a replica larger than one node needs a placement group)."""
    import ray

    return [node["Resources"].get("GPU", 0) for node in ray.nodes() if node.get("Alive")]


def in_placement_group(bundles: Sequence[dict], strategy: str) -> dict:
    """Ray remote args that start an actor inside a placement group of its own (one per actor, made
    as the actor starts: a restarted actor gets a fresh one), capturing the tasks and actors it
    starts, so vLLM's Ray executor places its workers on the group's bundles."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = ray.util.placement_group(list(bundles), strategy=strategy)
    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)}


def warn_if_short(replicas: int, per_replica: dict[str, float]) -> None:
    """Say so when the cluster cannot hold every replica now (an autoscaler may still add nodes)."""
    import ray

    have = ray.cluster_resources()
    for name, amount in per_replica.items():
        need = amount * replicas
        if amount and have.get(name, 0) < need:
            print(
                f"ray: {replicas} replicas x {amount:g} {name} need {need:g}, the cluster has {have.get(name, 0):g} "
                "now; replicas wait for resources (lower --replicas, or add nodes)",
                file=sys.stderr,
                flush=True,
            )


# long: one scheduling loop over Ray actors: submit, collect, retry and commit share their state
def run_shards(
    units: list[dict],
    expected_rows: dict[int, int],
    replica: type,
    replica_kwargs: dict,
    *,
    replicas: int,
    num_cpus: float,
    num_gpus: float = 0,
    ordered: bool = False,
    bundles: Sequence[dict] = (),
    strategy: str = "PACK",
    on_shard: Callable[[int, pa.Table], None],
) -> None:
    """Run every unit (a dict with ``shard`` and what the replica needs) on ``replicas`` actors.

    ``replica(**replica_kwargs)`` is built once per actor; called with a one-row pyarrow batch, it
    returns that shard's rows with a ``_shard`` column. ``on_shard(shard, rows)`` runs on the
    driver once all ``expected_rows[shard]`` rows of a shard arrived (``ordered``: in the order of
    ``units``, for stages whose later passes depend on row order). ``bundles``: each actor starts in
    a placement group of its own with these bundles and ``strategy`` (gen/placement.py), for a
    replica whose GPUs span nodes; its own ``num_gpus`` should then be 0.
    """
    if not units:
        return
    import ray.data

    warn_if_short(replicas, {"CPU": num_cpus, "GPU": num_gpus + sum(b.get("GPU", 0) for b in bundles)})
    placed = {"ray_remote_args_fn": functools.partial(in_placement_group, tuple(bundles), strategy)} if bundles else {}
    # One block per shard, so any replica can take any shard and a retry reruns one shard only.
    ds = ray.data.from_items(units, override_num_blocks=len(units))
    # The stage prints its own progress; Ray Data's bars and per-run INFO lines would bury it.
    ds.context.enable_progress_bars = False
    ds.context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ds.context.execution_options.preserve_order = ordered
    with warnings.catch_warnings():
        # Ray 2.60 deprecates "extra remote args" but names no parameter for actor restarts yet;
        # without them Ray Data would retry a shard that kills its worker forever.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        ds = ds.map_batches(
            replica,
            fn_constructor_kwargs=replica_kwargs,
            batch_size=1,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=replicas),
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            max_restarts=MAX_RETRIES,
            max_task_retries=MAX_RETRIES,
            **placed,
        )
    pending: dict[int, list[pa.Table]] = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        for shard, rows in _by_shard(batch):
            parts = pending.setdefault(shard, [])
            parts.append(rows)
            got, want = sum(p.num_rows for p in parts), expected_rows[shard]
            if got > want:
                raise RuntimeError(f"ray: shard {shard} returned {got} rows, {want} expected")
            if got == want:
                on_shard(shard, pa.concat_tables(pending.pop(shard), promote_options="default"))
    if pending:
        raise RuntimeError(f"ray: {len(pending)} shards came back incomplete: {sorted(pending)[:5]}")


def _by_shard(batch: pa.Table):
    """``(shard, rows without the _shard column)`` for each shard present in a returned batch."""
    shards = batch.column(SHARD)
    rest = batch.drop_columns([SHARD])
    for shard in pc.unique(shards).to_pylist():
        yield shard, rest.filter(pc.equal(shards, shard))


def tag(rows: pa.Table, shard: int) -> pa.Table:
    """A replica's output: ``rows`` with the ``_shard`` column the driver regroups by."""
    return rows.append_column(SHARD, pa.array([shard] * rows.num_rows, pa.int64()))
