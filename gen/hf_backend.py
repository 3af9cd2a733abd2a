"""The transformers backend: batched ``generate`` with left padding, for machines without vLLM.

Slow next to vLLM (no paged KV cache, no continuous batching: a batch runs until its longest
sample ends), but it needs nothing beyond transformers and gives the same outputs contract.

Seeding: transformers samples from the global torch generator, so seeds are per batch (derived
from the batch's request seeds). A resumed run reproduces the texts of an uninterrupted one when
its batches are the same, i.e. when ``batch_size`` divides the shard size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice

from reasonkit.gen.backend import Completion, Request, error_completions
from reasonkit.gen.render import encode, prompt_text
from reasonkit.think import opens_think


def _dtype(name: str):
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


class HFBackend:
    """``AutoModelForCausalLM.generate`` behind the Backend protocol.

    ``batch_size`` counts prompts; each carries its ``n`` samples (``num_return_sequences``).
    """

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "auto",
        max_model_len: int | None = None,
        chat_template: str | None = None,
        batch_size: int = 8,
        device: str | None = None,
    ):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.tokenizer.padding_side = "left"  # generation continues the rightmost token of every row
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=_dtype(dtype)).to(self.device).eval()
        cfg = self.model.config
        self.max_model_len = max_model_len or getattr(cfg, "max_position_embeddings", None) or 1 << 30
        gen = self.model.generation_config
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [eos])
        self.pad_id = self.tokenizer.pad_token_id
        self.chat_template = chat_template
        self.batch_size = max(1, batch_size)

    def describe(self) -> dict:
        import transformers

        return {
            "backend": "hf",
            "transformers": transformers.__version__,
            "device": self.device,
            "dtype": str(self.model.dtype).replace("torch.", ""),
            "batch_size": self.batch_size,
            "max_model_len": self.max_model_len,
        }

    def generate(self, requests: Iterable[Request]) -> Iterator[Completion]:
        source = iter(requests)
        while batch := list(islice(source, self.batch_size)):
            fits = []
            for request in filter(None, batch):  # None: the source had nothing ready (backend.py)
                text = prompt_text(
                    self.tokenizer,
                    request.messages,
                    chat_template=self.chat_template,
                    prefill=request.prefill,
                    tools=request.tools,
                )
                ids = encode(self.tokenizer, text)
                if len(ids) >= self.max_model_len:
                    yield from error_completions(request, len(ids))
                else:
                    fits.append((request, ids, opens_think(text)))
            # One generate call per sampling setting; a stage's requests all share one.
            groups: dict[tuple, list] = {}
            for request, ids, opened in fits:
                s = request.sampling
                groups.setdefault((request.n, s.temperature, s.top_p, s.max_tokens, request.logprobs), []).append(
                    (request, ids, opened)
                )
            for group in groups.values():
                yield from self._generate(group)

    def _generate(self, group: list[tuple[Request, list[int], bool]]) -> Iterator[Completion]:
        import torch

        first = group[0][0]
        s, n = first.sampling, first.n
        width = longest = max(len(ids) for _, ids, _ in group)
        input_ids = torch.full((len(group), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, (_, ids, _) in enumerate(group):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            mask[row, width - len(ids) :] = 1
        seed = 0
        for request, _, _ in group:
            seed = (seed * 1_000_003 + (request.sampling.seed or 0)) % (1 << 63)
        torch.manual_seed(seed)
        sample = s.temperature > 0
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                do_sample=sample,
                temperature=s.temperature if sample else None,
                top_p=s.top_p if sample else None,
                top_k=0 if sample else None,  # transformers' default top_k=50 is not the recipe's
                max_new_tokens=max(1, min(s.max_tokens, self.max_model_len - longest)),
                num_return_sequences=n,
                pad_token_id=self.pad_id,
                eos_token_id=sorted(self.eos),
                return_dict_in_generate=True,
                output_logits=bool(first.logprobs),  # raw logits, before temperature and top-p (as vLLM's)
            )
        new = out.sequences[:, width:].cpu().tolist()
        for row, tokens in enumerate(new):
            request, ids, opened = group[row // n]
            end = next((i for i, t in enumerate(tokens) if t in self.eos), None)
            kept = tokens if end is None else tokens[:end]  # rows that end early are padded after EOS
            yield Completion(
                id=request.id,
                sample=row % n,
                # with tools, a <tool_call> the template made special stays for the caller's parser
                text=self.tokenizer.decode(kept, skip_special_tokens=not request.tools),
                finish_reason="length" if end is None else "stop",
                prompt_tokens=len(ids),
                completion_tokens=len(kept) + (end is not None),
                prefilled=opened,
                **_logprobs(out.logits, row, tokens[: len(kept) + (end is not None)], first.logprobs),
            )

    def close(self) -> None:
        self.model = None


def _logprobs(step_logits, row: int, token_ids: list[int], k: int | None) -> dict:
    """One output row's token ids (its stop token included) and top-K log-probs as Completion fields."""
    if not k:
        return {}
    from reasonkit.gen.logprobs import from_logits

    top_ids, top_logprobs = from_logits(step_logits, row, len(token_ids), k)
    return {"token_ids": token_ids, "top_ids": top_ids, "top_logprobs": top_logprobs}
