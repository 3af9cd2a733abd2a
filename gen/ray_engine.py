"""The generate stage on Ray: one engine per replica, one shard per task, committed by the driver.

The driver has read the prompts, rendered their messages and planned the owed shards exactly as
the local engine does (gen/stage.py); here each owed shard is packed into one unit (its prompt
rows as Arrow IPC bytes, its rendered messages, its already committed keys) and handed to
:func:`reasonkit.ray_engine.run_shards`. A :class:`GenerateReplica` holds one backend, built by
the same ``make_backend`` as a local run, on ``tensor_parallel`` GPUs of its own when the
cluster has GPUs, and turns a unit into the shard's table with
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

from reasonkit.ray_engine import connect, has_gpus, run_shards, tag

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

    def __init__(self, config, *, template: str | None, info, gen_config: str, prefill: str, teacher: str,
                 make_backend=None):
        from reasonkit.gen.stage import make_backend as default_backend

        # The replica *is* the local engine, on one shard at a time.
        self.config = dataclasses.replace(config, engine="local", replicas=1, ray_address=None, data_parallel=1)
        self.backend = (make_backend or default_backend)(self.config, info=info, chat_template=template)
        self.gen_config, self.prefill, self.teacher = gen_config, prefill, teacher
        self.info = json.dumps(self.backend.describe(), default=str)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from reasonkit.gen.shards import generate_shard

        out = []
        for unit in batch.to_pylist():
            done = {tuple(key) for key in json.loads(unit["done"])}
            rows = generate_shard(self.backend, _from_ipc(unit["prompts"]), json.loads(unit["messages"]), done,
                                  self.config, teacher=self.teacher, gen_config=self.gen_config,
                                  prefill=self.prefill)
            rows = rows.append_column(_BACKEND_INFO, pa.array([self.info] * rows.num_rows, pa.string()))
            out.append(tag(rows, unit["shard"]))
        return pa.concat_tables(out)


def plan_units(prompts: pa.Table, messages: list[list[dict]], work) -> tuple[list[dict], dict[int, int]]:
    """One unit per owed shard, and the rows each must return (samples not yet committed)."""
    units, expected = [], {}
    for shard, chunk in enumerate(work.chunks):
        done = [[work.ids[i], k] for i in chunk for k in range(work.n) if (work.ids[i], k) in work.done]
        units.append({"shard": shard, "prompts": _ipc(prompts.take(pa.array(chunk, pa.int64()))),
                      "messages": json.dumps([messages[i] for i in chunk]), "done": json.dumps(done)})
        expected[shard] = len(chunk) * work.n - len(done)
    return units, expected


def connect_for(config) -> None:
    """Join (or start) the cluster; an openai backend's workers also get its API key variable."""
    connect(config.ray_address, forward_env=(config.api_key_env,) if config.backend == "openai" else ())


def generate_on_ray(config, prompts: pa.Table, messages: list[list[dict]], work, writer, *, template, info,
                    gen_config: str, prefill: str, progress, teacher: str, make_backend=None) -> dict | None:
    """Generate every owed shard on Ray, committing each through ``writer``; returns a replica's describe()."""
    connect_for(config)
    progress.restart()  # the clock starts once connected; replicas load their models inside it
    units, expected = plan_units(prompts, messages, work)
    committed_before = len(writer.manifest["shards"])
    print(f"ray: {len(units)} shards to generate ({committed_before} committed earlier) on "
          f"{config.replicas} replica{'s' if config.replicas > 1 else ''}", file=sys.stderr, flush=True)
    # GPUs: a vLLM replica spans tensor_parallel of them (Ray sets its CUDA_VISIBLE_DEVICES, and
    # vLLM's own workers split the model over those); transformers uses one; a client none.
    gpus = {"vllm": config.tensor_parallel, "hf": 1, "openai": 0}[config.backend] if has_gpus() else 0
    described: dict = {}

    def commit(shard: int, rows: pa.Table) -> None:
        if not described:
            described.update(json.loads(rows.column(_BACKEND_INFO)[0].as_py()))
        rows = rows.drop_columns([_BACKEND_INFO])
        writer.commit(rows)
        tokens = sum(rows.column("completion_tokens").to_pylist())
        progress.update(prompts=len(work.chunks[shard]), samples=rows.num_rows, tokens=tokens)

    kwargs = dict(config=config, template=template, info=info, gen_config=gen_config, prefill=prefill,
                  teacher=teacher, make_backend=make_backend)
    run_shards(units, expected, GenerateReplica, kwargs, replicas=config.replicas, num_cpus=1, num_gpus=gpus,
               on_shard=commit)
    return {**described, "engine": "ray", "replicas": config.replicas} if described else None
