"""The vLLM offline backend: one ``vllm.LLM`` engine, requests streamed through a bounded window.

Why not call ``LLM.generate`` once per shard: a shard ends in a tail where only its longest
samples still run and the engine idles. R1 traces have a heavy length tail, so instead the
requests of the next shards are added while the current ones finish (vLLM's documented
``LLMEngine.add_request`` / ``step`` loop), and a shard is committed as soon as all its samples
are in. ``n`` samples of a prompt are one request (``SamplingParams(n=...)``): they share the
prompt's KV cache blocks, and prefix caching shares system prompts and instructions across
prompts.

Each request is seeded from ``(seed, id)``; vLLM seeds the k-th sample with ``seed + k``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator

from reasonkit.gen.backend import Completion, Request, error_completions
from reasonkit.gen.render import encode, prompt_text
from reasonkit.think import opens_think

_FINISH = {"stop": "stop", "length": "length"}
_END = object()
#: VllmBackend keywords that are reasonkit's own settings; any other keyword is a vLLM engine argument.
_OWN_SETTINGS = ("dtype", "max_model_len", "tensor_parallel", "gpu_memory_utilization", "seed")
#: This backend serves a peft LoRA adapter on top of its base (vLLM LoRA requests), unmerged.
SUPPORTS_LORA = True


def engine_kwargs(
    model: str,
    *,
    dtype: str = "auto",
    max_model_len: int | None = None,
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
    seed: int = 0,
    **extra,
) -> dict:
    """The ``vllm.LLM`` arguments of a run (also used by the benchmark's bare baseline)."""
    from vllm.platforms import current_platform

    kwargs = dict(
        model=model,
        dtype=dtype,
        tensor_parallel_size=tensor_parallel,
        gpu_memory_utilization=gpu_memory_utilization,
        enable_prefix_caching=True,
        seed=seed,
    )
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if current_platform.is_cpu():
        # On CPU vLLM otherwise reserves gpu_memory_utilization (0.9) of *system* memory and
        # refuses to start on a machine doing anything else; 1 GiB of KV cache serves small
        # models. Set VLLM_CPU_KVCACHE_SPACE yourself for bigger ones.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        kwargs["enforce_eager"] = True  # no CUDA graphs; torch.compile on CPU costs minutes
        # vllm-cpu keeps one core for its front end and binds the model to the rest: on a small
        # machine that halves the model's cores. Measured on 2 cores (tiny teacher, 240 samples,
        # same samples either way): 18.0 s with none reserved vs 46.2 s with one. Set the
        # variable yourself to keep vLLM's default.
        if (os.cpu_count() or 1) <= 4:
            os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        # vllm-cpu crashes ("CPU Generator does not use offset") when a *seeded* request's prompt
        # is split across steps by chunked prefill, i.e. as soon as one step's prompts exceed
        # max_num_batched_tokens. Every request here is seeded: prefill whole prompts instead.
        if max_model_len is None:
            from reasonkit.gen.preflight import model_length

            max_model_len = model_length(model)[0] or 8192
        kwargs["enable_chunked_prefill"] = False
        kwargs["max_num_batched_tokens"] = max(4096, max_model_len)
    kwargs.update(extra)
    return kwargs


def lora_engine_kwargs(adapter: str) -> dict:
    """Engine settings that let ``adapter`` be served: LoRA on, rank at least the adapter's."""
    import json
    from pathlib import Path

    rank = json.loads((Path(adapter) / "adapter_config.json").read_text()).get("r", 16)
    allowed = (8, 16, 32, 64, 128, 256, 320, 512)  # the ranks vLLM's LoRA kernels are built for
    return {"enable_lora": True, "max_lora_rank": next(r for r in allowed if r >= int(rank)), "max_loras": 1}


class VllmBackend:
    """``vllm.LLM`` behind the Backend protocol.

    ``llm`` may be an engine built elsewhere (a test session's shared one); otherwise it is
    built from ``model`` and ``engine`` (see :func:`engine_kwargs`). ``window`` bounds the
    prompts inside the engine at once; the stage sets it to two shards.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        llm=None,
        chat_template: str | None = None,
        window: int = 2048,
        lora: str | None = None,
        **engine,
    ):
        self._owned = llm is None
        self.lora = lora
        if llm is None:
            import vllm

            if lora is not None:
                engine = {**engine, **lora_engine_kwargs(lora)}
            llm = vllm.LLM(**engine_kwargs(model, **engine))
        self.llm = llm
        # what was asked of vLLM beyond reasonkit's own settings, for the manifest
        self.engine_args = {k: v for k, v in engine.items() if k not in _OWN_SETTINGS}
        self.name = model or llm.llm_engine.model_config.model
        self.chat_template = chat_template
        self.window = max(1, window)
        self.tokenizer = llm.get_tokenizer()
        self.max_model_len = llm.llm_engine.model_config.max_model_len
        self._ids = itertools.count()

    def describe(self) -> dict:
        import vllm

        mc = self.llm.llm_engine.model_config
        return {
            "backend": "vllm",
            "vllm": vllm.__version__,
            "dtype": str(mc.dtype).replace("torch.", ""),
            "max_model_len": self.max_model_len,
            "lora": self.lora,
            **({"engine_args": self.engine_args} if self.engine_args else {}),
        }

    def _lora_request(self):
        if self.lora is None:
            return None
        from vllm.lora.request import LoRARequest

        return LoRARequest("adapter", 1, self.lora)

    def render(self, request: Request) -> tuple[list[int], bool]:
        """The prompt's token ids, and whether it leaves a ``<think>`` block open."""
        text = prompt_text(
            self.tokenizer,
            request.messages,
            chat_template=self.chat_template,
            prefill=request.prefill,
            tools=request.tools,
        )
        return encode(self.tokenizer, text), opens_think(text)

    def params(self, request: Request, prompt_len: int):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        return SamplingParams(
            n=request.n,
            temperature=s.temperature,
            top_p=s.top_p,
            # vLLM refuses a request whose prompt + max_tokens exceeds the context: shorten it,
            # and a sample that hits the wall ends with finish_reason "length" like any other.
            max_tokens=min(s.max_tokens, self.max_model_len - prompt_len),
            seed=s.seed,
            output_kind=RequestOutputKind.FINAL_ONLY,
            # some templates make <tool_call> a special token: keep it for the caller's parser (as vLLM's server does)
            skip_special_tokens=not request.tools,
            logprobs=request.logprobs,  # the top K of each sampled token (gen/logprobs.py)
        )

    def generate(self, requests: Iterable[Request]) -> Iterator[Completion]:
        from vllm.inputs import TokensPrompt

        engine = self.llm.llm_engine
        lora = self._lora_request()
        source = iter(requests)
        pending: dict[str, tuple[Request, int, bool]] = {}
        refused: list[Completion] = []
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < self.window:
                    request = next(source, _END)
                    if request is _END:
                        exhausted = True
                        break
                    if request is None:  # nothing ready yet (gen/tools/loop.py): step what is in the engine
                        break
                    ids, opened = self.render(request)
                    if len(ids) >= self.max_model_len:  # no room to generate a single token
                        refused.extend(error_completions(request, len(ids)))
                        continue
                    rid = f"rk-{next(self._ids)}"
                    engine.add_request(
                        rid, TokensPrompt(prompt_token_ids=ids), self.params(request, len(ids)), lora_request=lora
                    )
                    pending[rid] = (request, len(ids), opened)
                yield from refused
                refused.clear()
                if not pending:
                    if exhausted:
                        return
                    continue
                for out in engine.step():
                    if not out.finished or out.request_id not in pending:
                        continue
                    request, prompt_len, opened = pending.pop(out.request_id)
                    for o in out.outputs:
                        yield Completion(
                            id=request.id,
                            sample=o.index,
                            text=o.text,
                            finish_reason=_FINISH.get(o.finish_reason, "error"),
                            prompt_tokens=prompt_len,
                            completion_tokens=len(o.token_ids),
                            prefilled=opened,
                            **_logprobs(o, request.logprobs),
                        )
        finally:
            if pending:  # the caller stopped early (an error, a kill): free the engine for reuse
                engine.abort_request(list(pending))

    def close(self) -> None:
        """Shut down an engine this backend built (its worker processes hold memory); a shared
        engine passed in as ``llm`` is left running for its owner."""
        if self._owned and self.llm is not None:
            self.llm.llm_engine.engine_core.shutdown()
        self.llm = None


def _logprobs(output, k: int | None) -> dict:
    """A sample's token ids and top-K log-probs as Completion fields (none when none were asked)."""
    if not k:
        return {}
    from reasonkit.gen.logprobs import from_vllm

    top_ids, top_logprobs = from_vllm(output.logprobs or [], k)
    return {"token_ids": list(output.token_ids), "top_ids": top_ids, "top_logprobs": top_logprobs}
