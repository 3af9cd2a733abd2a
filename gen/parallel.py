"""Data parallelism on one node: one engine per replica, each on its own GPUs.

vLLM refuses ``LLM(data_parallel_size>1)`` in a single process, so each replica is a spawned
process holding its own backend (:class:`VllmBackend` on ``tensor_parallel`` GPUs, or an
:class:`HFBackend` on one) with ``CUDA_VISIBLE_DEVICES`` set to its own GPUs. Requests are dealt
all at once in chunks of ``deal`` (a Request is a few hundred bytes; the replicas' own windows
bound what sits inside the engines), and completions flow back through one queue in whatever
order they finish; the stage does not care which replica made a sample.

Each vLLM sample's seed depends only on ``(seed, id)``, so requests are dealt one at a time. The
transformers backend seeds and pads per batch, so it is dealt whole batches (``deal`` =
``batch_size``): every replica then runs exactly the batches one process would, and N replicas
write the samples one would.
"""

from __future__ import annotations

import os
import queue
import traceback
from collections.abc import Iterable, Iterator

from reasonkit.gen.backend import Completion, Request


def _visible_devices(rank: int, per_replica: int, replicas: int) -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = visible.split(",") if visible else [str(i) for i in range(replicas * per_replica)]
    mine = devices[rank * per_replica : (rank + 1) * per_replica]
    if len(mine) < per_replica:
        raise RuntimeError(f"data-parallel replica {rank} needs {per_replica} GPUs; only {len(devices)} visible")
    return ",".join(mine)


def _build(kind: str, model: str, options: dict):
    if kind == "hf":
        from reasonkit.gen.hf_backend import HFBackend

        return HFBackend(model, **options)
    from reasonkit.gen.vllm_backend import VllmBackend

    return VllmBackend(model, **options)


def _worker(rank: int, devices: str, kind: str, model: str, options: dict, inbox, outbox, replicas: int) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        if kind == "hf":
            import torch

            if not torch.cuda.is_available():  # replicas on the CPU share its cores instead of each taking all
                torch.set_num_threads(max(1, (os.cpu_count() or 1) // replicas))
        backend = _build(kind, model, options)
        outbox.put(("ready", rank, backend.describe()))
        while inbox.get() == "round":  # one round per generate() call; "close" ends the replica
            for completion in backend.generate(iter(inbox.get, None)):
                outbox.put(("done", rank, completion))
            outbox.put(("end", rank, None))
        backend.close()
    except BaseException:  # the parent re-raises it with the replica's traceback
        outbox.put(("error", rank, traceback.format_exc()))


class DataParallel:
    """``replicas`` engines behind one Backend: ``backend`` ``"vllm"`` (each on ``tensor_parallel``
    GPUs) or ``"hf"`` (each on one GPU, or the CPU); ``options`` go to each replica's backend."""

    def __init__(self, model: str, replicas: int, *, backend: str = "vllm", tensor_parallel: int = 1, **options):
        import multiprocessing as mp

        self.name = model
        ctx = mp.get_context("spawn")  # CUDA cannot be forked
        self.outbox = ctx.Queue()
        self.inboxes = [ctx.Queue() for _ in range(replicas)]
        self.procs = []
        if backend == "hf":  # whole batches, so each replica's batches (and seeds) are one process's
            self.deal, per_replica = max(1, options.get("batch_size", 8)), 1
        else:
            # a replica's engine spans tensor x pipeline parallel GPUs (pipeline_parallel_size: engine_args)
            self.deal, per_replica = 1, tensor_parallel * int(options.get("pipeline_parallel_size") or 1)
            options = {**options, "tensor_parallel": tensor_parallel}
        for rank in range(replicas):
            devices = _visible_devices(rank, per_replica, replicas)
            proc = ctx.Process(
                target=_worker,
                args=(rank, devices, backend, model, options, self.inboxes[rank], self.outbox, replicas),
                name=f"reasonkit-dp{rank}",
                daemon=False,
            )
            proc.start()
            self.procs.append(proc)
        self.info: dict = {}
        while len(self.info) < replicas:  # fail here, before any work, if a replica cannot start
            kind, rank, payload = self._get()
            self.info[rank] = payload

    def _get(self):
        while True:
            try:
                kind, rank, payload = self.outbox.get(timeout=5)
            except queue.Empty:
                dead = [p.name for p in self.procs if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"data-parallel replicas died: {', '.join(dead)}") from None
                continue
            if kind == "error":
                raise RuntimeError(f"data-parallel replica {rank} failed:\n{payload}")
            return kind, rank, payload

    def describe(self) -> dict:
        return {**self.info[0], "data_parallel": len(self.procs)}

    def generate(self, requests: Iterable[Request]) -> Iterator[Completion]:
        for inbox in self.inboxes:
            inbox.put("round")
        for i, request in enumerate(requests):
            self.inboxes[(i // self.deal) % len(self.inboxes)].put(request)
        for inbox in self.inboxes:
            inbox.put(None)
        ended = 0
        while ended < len(self.procs):
            kind, _, payload = self._get()
            if kind == "end":
                ended += 1
            elif kind == "done":
                yield payload

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put("close")
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
