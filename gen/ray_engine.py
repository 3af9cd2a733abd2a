"""The generate stage on Ray: one engine per replica, one shard per task, committed by the driver.

The driver has read the prompts, rendered their messages and planned the owed shards exactly as
the local engine does (gen/run.py); here each owed shard is packed into one unit (its prompt
rows as Arrow IPC bytes, its rendered messages, its already committed keys) and handed to
:func:`reasonkit.ray_engine.run_shards`. A :class:`GenerateReplica` holds one backend, built by
the same ``make_backend`` as a local run, on ``tensor_parallel`` x ``pipeline_parallel_size`` GPUs
of its own when the cluster has GPUs (a placement group over several nodes when one node has too
few: gen/placement.py), and turns a unit into the shard's table with
:func:`reasonkit.gen.shards.generate_shard`. Seeds derive from ``(seed, id)``, so which replica
drew a sample changes nothing in it.

Prompts travel inside the units rather than as file paths, so workers need no shared filesystem
for them (the model must still be readable on every node: a path on shared storage, or a Hub id).
"""

from __future__ import annotations

import dataclasses
import json
import sys

import pyarrow as pa

from reasonkit.ray_engine import connect, node_gpus, run_shards, tag

#: The replica's ``describe()``, riding along with every shard's rows (and dropped by the driver).
_BACKEND_INFO = "_backend_info"


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


class GenerateReplica:
    """One Ray actor: a backend built once, then one shard per call."""

    def __init__(
        self, config, *, template: str | None, info, gen_config: str, prefill: str, teacher: str, make_backend
    ):
        # make_backend: the stage's own (gen/run.py passes it), so this module never imports the stage
        # The replica *is* the local engine, on one shard at a time.
        self.config = dataclasses.replace(config, engine="local", replicas=1, ray_address=None, data_parallel=1)
        self.backend = make_backend(self.config, info=info, chat_template=template)
        self.gen_config, self.prefill, self.teacher = gen_config, prefill, teacher
        self.info = json.dumps(self.backend.describe(), default=str)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from reasonkit.gen.shards import generate_shard

        out = []
        for unit in batch.to_pylist():
            done = {tuple(key) for key in json.loads(unit["done"])}
            rows = generate_shard(
                self.backend,
                _from_ipc(unit["prompts"]),
                json.loads(unit["messages"]),
                done,
                self.config,
                teacher=self.teacher,
                gen_config=self.gen_config,
                prefill=self.prefill,
            )
            rows = rows.append_column(_BACKEND_INFO, pa.array([self.info] * rows.num_rows, pa.string()))
            out.append(tag(rows, unit["shard"]))
        return pa.concat_tables(out)


def plan_units(prompts: pa.Table, messages: list[list[dict]], work) -> tuple[list[dict], dict[int, int]]:
    """One unit per owed shard, and the rows each must return (samples not yet committed)."""
    units, expected = [], {}
    for shard, chunk in enumerate(work.chunks):
        done = [[work.ids[i], k] for i in chunk for k in range(work.n) if (work.ids[i], k) in work.done]
        units.append(
            {
                "shard": shard,
                "prompts": _ipc(prompts.take(pa.array(chunk, pa.int64()))),
                "messages": json.dumps([messages[i] for i in chunk]),
                "done": json.dumps(done),
            }
        )
        expected[shard] = len(chunk) * work.n - len(done)
    return units, expected


def place_replicas(config, gpus_per_node: list[float]):
    """``(config, placement)`` of this run's replicas on a cluster with ``gpus_per_node``.

    GPUs: a vLLM replica spans tensor_parallel x pipeline_parallel_size of them. Within one node its
    actor holds them (Ray sets its CUDA_VISIBLE_DEVICES, and vLLM's own workers split the model over
    those); past one node it gets a placement group and vLLM's Ray executor (gen/placement.py), which
    the returned config's engine_args then name. transformers uses one GPU; a client none.
    """
    from reasonkit.gen.engine_args import replica_world_size
    from reasonkit.gen.placement import ReplicaPlacement, plan_replica

    has_gpus = any(gpus_per_node)
    if config.backend != "vllm":
        gpus = 1 if config.backend == "hf" and has_gpus else 0
        return config, ReplicaPlacement(gpus=gpus, actor_gpus=gpus)
    args = config.engine_args
    pipeline = replica_world_size(1, args)
    placement = plan_replica(config.tensor_parallel, pipeline, gpus_per_node, args.get("distributed_executor_backend"))
    if placement.note:
        print(f"ray: {placement.note}", file=sys.stderr, flush=True)
    if placement.bundles:
        print(
            f"ray: each replica spans {placement.gpus} GPUs (tensor_parallel {config.tensor_parallel} x "
            f"pipeline_parallel_size {pipeline}) over at least {placement.min_nodes} node"
            f"{'s' if placement.min_nodes > 1 else ''}: a placement group of {placement.gpus} GPU bundles "
            f"({placement.strategy}) per replica, vLLM's ray executor",
            file=sys.stderr,
            flush=True,
        )
        config = dataclasses.replace(config, engine_args={**args, "distributed_executor_backend": "ray"})
    return config, placement


def connect_for(config) -> None:
    """Join (or start) the cluster; an openai backend's workers also get its API key variable."""
    connect(config.ray_address, forward_env=(config.api_key_env,) if config.backend == "openai" else ())


def generate_on_ray(
    config,
    prompts: pa.Table,
    messages: list[list[dict]],
    work,
    writer,
    *,
    template,
    info,
    gen_config: str,
    prefill: str,
    progress,
    teacher: str,
    make_backend,
) -> dict | None:
    """Generate every owed shard on Ray, committing each through ``writer``; returns a replica's describe()."""
    connect_for(config)
    progress.restart()  # the clock starts once connected; replicas load their models inside it
    units, expected = plan_units(prompts, messages, work)
    committed_before = len(writer.manifest["shards"])
    print(
        f"ray: {len(units)} shards to generate ({committed_before} committed earlier) on "
        f"{config.replicas} replica{'s' if config.replicas > 1 else ''}",
        file=sys.stderr,
        flush=True,
    )
    config, placement = place_replicas(config, node_gpus())
    described: dict = {}

    def commit(shard: int, rows: pa.Table) -> None:
        if not described:
            described.update(json.loads(rows.column(_BACKEND_INFO)[0].as_py()))
        rows = rows.drop_columns([_BACKEND_INFO])
        writer.commit(rows)
        tokens = sum(rows.column("completion_tokens").to_pylist())
        progress.update(prompts=len(work.chunks[shard]), samples=rows.num_rows, tokens=tokens)

    kwargs = dict(
        config=config,
        template=template,
        info=info,
        gen_config=gen_config,
        prefill=prefill,
        teacher=teacher,
        make_backend=make_backend,
    )
    run_shards(
        units,
        expected,
        GenerateReplica,
        kwargs,
        replicas=config.replicas,
        num_cpus=1,
        num_gpus=placement.actor_gpus,
        bundles=placement.bundles,
        strategy=placement.strategy or "PACK",
        on_shard=commit,
    )
    return {**described, "engine": "ray", "replicas": config.replicas} if described else None
