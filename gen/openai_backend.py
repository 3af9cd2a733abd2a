"""The OpenAI-compatible backend: any chat-completions server (vLLM, SGLang, hosted APIs).

``openai.AsyncOpenAI`` on an event loop in a helper thread, so the stage's loop stays plain
synchronous code: requests are pulled lazily, at most ``concurrency`` prompts are in flight, and
completions come back as they finish. The client's own retries are off (they give up within a
minute: see gen/retry.py); tenacity runs gen/retry.py's policy (backoff with full jitter on
429/5xx/timeouts/dropped connections, Retry-After honoured, 401/403/404 stop the run). The API
key is read from the environment variable named in the config and goes only into the client:
never into a log line, an error message or the manifest.

``n`` samples go in one request (one prompt prefill on the server). A server that refuses ``n``
or returns fewer choices gets the missing samples one request each, seeded ``seed + k`` as vLLM
seeds its k-th child sample, so both ways draw the same samples from a vLLM server.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from reasonkit.errors import UserError
from reasonkit.gen.backend import Completion, Request, error_completions
from reasonkit.gen.retry import RetryPolicy, classify

_FINISH = {"stop": "stop", "length": "length", "tool_calls": "stop"}  # a turn that called tools ended normally


@dataclass(frozen=True)
class ServerInfo:
    owned_by: str | None = None  # "vllm" for a vLLM server: enables its extra request fields
    max_model_len: int | None = None


def api_key(env: str) -> str:
    # Local servers accept any key; a hosted one answers 401, which names the variable.
    return os.environ.get(env) or "EMPTY"


def probe(base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", timeout: float = 10.0) -> ServerInfo:
    """Check the server before any work: reachable, key accepted, ``model`` served."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key(api_key_env), max_retries=2, timeout=timeout)
    try:
        models = list(client.models.list())
    except openai.AuthenticationError:
        raise UserError(f"--base-url {base_url}: 401 unauthorized; set ${api_key_env} to a valid API key") from None
    except openai.NotFoundError:
        return ServerInfo()  # no /models endpoint: the first request will tell
    except (openai.APIConnectionError, openai.APITimeoutError):
        raise UserError(
            f"--base-url {base_url}: cannot connect (is the server running? the URL usually ends in /v1)"
        ) from None
    except openai.APIStatusError as e:
        raise UserError(f"--base-url {base_url}: GET /models answered {e.status_code}") from None
    finally:
        client.close()
    for card in models:
        if card.id == model:
            extra = card.model_extra or {}
            return ServerInfo(getattr(card, "owned_by", None), extra.get("max_model_len"))
    served = ", ".join(sorted(c.id for c in models)[:10]) or "none"
    raise UserError(f"--teacher {model!r}: not served at {base_url}; it serves: {served}")


class OpenAIBackend:
    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 64,
        timeout: float = 3600.0,
        retry: RetryPolicy = RetryPolicy(),
        info: ServerInfo | None = None,
    ):
        self.name, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout, self.retry = timeout, retry
        self.info = info if info is not None else probe(base_url, model, api_key_env)
        self.split_n = False  # learned: the server does not return n choices per request
        self.stats = {"requests": 0, "retries": 0}

    def describe(self) -> dict:
        import openai

        return {
            "backend": "openai",
            "openai": openai.__version__,
            "base_url": self.base_url,
            "server": self.info.owned_by,
            "split_n": self.split_n,
            **self.stats,
        }

    def generate(self, requests: Iterable[Request]) -> Iterator[Completion]:
        import openai

        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="reasonkit-openai", daemon=True)
        thread.start()
        client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key(self.api_key_env), max_retries=0, timeout=self.timeout
        )
        limit = asyncio.Semaphore(self.concurrency)  # HTTP requests in flight (bound on first use)
        done: queue.Queue = queue.Queue()
        futures: set = set()

        def take(fut) -> list[Completion]:
            futures.discard(fut)
            return fut.result()  # re-raises a fatal error here, in the caller's thread

        try:
            for request in requests:
                if request is None:  # the source has nothing ready yet (backend.py): take a finished one, if any
                    try:
                        yield from take(done.get(timeout=0.05 if futures else 0))
                    except queue.Empty:
                        pass
                    continue
                while len(futures) >= self.concurrency:
                    yield from take(done.get())
                fut = asyncio.run_coroutine_threadsafe(self._prompt(client, limit, request), loop)
                futures.add(fut)
                fut.add_done_callback(done.put)
                while not done.empty():
                    yield from take(done.get_nowait())
            while futures:
                yield from take(done.get())
        finally:
            for fut in futures:
                fut.cancel()
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()

    def close(self) -> None:
        """Nothing held between calls: each ``generate`` opens and closes its own client."""

    # -- one prompt -----------------------------------------------------------------------
    async def _prompt(self, client, limit, request: Request) -> list[Completion]:
        out: list[Completion] = []
        if not self.split_n or request.n == 1:
            response = await self._call(client, limit, request, request.n, request.sampling.seed)
            if response is None:
                return error_completions(request)
            if response != "split":
                out = self._parse(request, response, first=0)
                if request.n > 1 and len(out) < request.n:
                    self.split_n = True
        missing = [k for k in range(request.n) if k not in {c.sample for c in out}]
        seed = request.sampling.seed
        singles = await asyncio.gather(
            *(self._call(client, limit, request, 1, None if seed is None else seed + k) for k in missing)
        )
        for k, response in zip(missing, singles):
            if response is None or response == "split":
                out.extend(c for c in error_completions(request) if c.sample == k)
            else:
                out.extend(self._parse(request, response, first=k)[:1])
        return out

    def _body(self, request: Request, n: int, seed: int | None) -> dict:
        s = request.sampling
        if request.tools:
            from reasonkit.gen.tools.calls import openai_messages

            messages = openai_messages(request.messages)
        else:
            messages = [dict(m) for m in request.messages]
        body = dict(
            model=self.name, messages=messages, n=n, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens
        )
        if request.tools:  # the server renders them and parses the calls (vllm serve --enable-auto-tool-choice)
            body["tools"] = list(request.tools)
        if seed is not None:
            body["seed"] = seed
        extra: dict = {}
        if self.info.owned_by == "vllm":
            extra["return_token_ids"] = True  # exact per-sample token counts
        if request.logprobs:  # the top K of every token, tokens written as ids (gen/logprobs.py)
            self._check_logprobs()
            body.update(logprobs=True, top_logprobs=request.logprobs)
            extra["return_tokens_as_token_ids"] = True
        if request.prefill:
            # Continue an assistant turn that starts with the prefill (vLLM and SGLang's field).
            messages.append({"role": "assistant", "content": request.prefill})
            extra.update(continue_final_message=True, add_generation_prompt=False)
        if extra:
            body["extra_body"] = extra
        return body

    def _check_logprobs(self) -> None:
        """Token ids come only from a vLLM server (``return_tokens_as_token_ids``); another server's tokens
        are text, which cannot be aligned to a student's tokenization: refuse rather than guess."""
        if self.info.owned_by != "vllm":
            raise UserError(
                f"--logprobs: {self.base_url} is not a vLLM server (models owned by {self.info.owned_by!r}); "
                "token ids of the top-K log-probs need vLLM's return_tokens_as_token_ids"
            )

    async def _call(self, client, limit, request: Request, n: int, seed: int | None):
        """The response, None for a prompt the model can never take, "split" when ``n`` is refused."""
        import openai

        body = self._body(request, n, seed)
        attempts = 0

        def retried() -> None:
            self.stats["retries"] += 1

        try:
            # tenacity retries transient failures (gen/retry.py); the semaphore is held only while a
            # request is in flight, never during a backoff, so waiting prompts do not block others.
            async for attempt in self.retry.retrying(on_retry=retried):
                with attempt:
                    attempts += 1
                    async with limit:
                        self.stats["requests"] += 1
                        return await client.chat.completions.create(**body)
        except (openai.APIError, openai.APIConnectionError) as e:
            kind = classify(e)
            status = getattr(e, "status_code", None)
            if kind == "context":
                return None
            if kind == "bad_request" and n > 1 and _refuses_n(e):
                self.split_n = True
                return "split"
            where = f"{self.base_url} (teacher {self.name!r}, prompt {request.id!r})"
            if kind == "fatal" and status == 401:
                raise UserError(f"{where}: 401 unauthorized; set ${self.api_key_env} to a valid key") from None
            if kind == "fatal" and status == 404:
                raise UserError(f"{where}: 404 not found; check --teacher and --base-url") from None
            if kind == "retry":
                raise UserError(
                    f"{where}: gave up after {attempts} attempts ({_short(e)}); rerun the same command to resume"
                ) from None
            raise UserError(f"{where}: {status or ''} {_short(e)}".replace("  ", " ")) from None
        raise AssertionError("unreachable: tenacity returns the response or raises")

    def _parse(self, request: Request, response, first: int) -> list[Completion]:
        usage = response.usage
        prompt_tokens = usage.prompt_tokens if usage else 0
        choices = sorted(response.choices, key=lambda c: c.index)[: request.n - first]
        counts = _token_counts(choices, usage.completion_tokens if usage else 0)
        out = []
        for k, (choice, tokens) in enumerate(zip(choices, counts)):
            msg = choice.message
            extra = msg.model_extra or {}
            reasoning = extra.get("reasoning") or extra.get("reasoning_content") or getattr(msg, "reasoning", None)
            out.append(
                Completion(
                    id=request.id,
                    sample=first + k,
                    text=msg.content or "",
                    finish_reason=_FINISH.get(choice.finish_reason, "error"),
                    prompt_tokens=prompt_tokens,
                    completion_tokens=tokens,
                    reasoning=reasoning or None,
                    tool_calls=_tool_calls(msg) if request.tools else None,
                    **_logprobs(choice, request.logprobs),
                )
            )
        return out


def _logprobs(choice, k: int | None) -> dict:
    """A choice's token ids and top-K log-probs as Completion fields (none when none were asked)."""
    if not k:
        return {}
    from reasonkit.gen.logprobs import from_openai

    content = choice.logprobs.content if choice.logprobs is not None else None
    token_ids, top_ids, top_logprobs = from_openai(content or [], k)
    return {"token_ids": token_ids, "top_ids": top_ids, "top_logprobs": top_logprobs}


def _tool_calls(message) -> list | None:
    """The calls the server parsed (None: it parsed none, and the text may still hold some)."""
    if not message.tool_calls:
        return None
    from reasonkit.gen.tools.calls import call_from

    return [call_from(c.function.name, c.function.arguments) for c in message.tool_calls]


def _token_counts(choices, total: int) -> list[int]:
    """Per-choice completion tokens: exact from vLLM's ``token_ids``; else the usage total, split
    by text length when several choices share it (the API reports only the sum)."""
    ids = [(c.model_extra or {}).get("token_ids") for c in choices]
    if all(i is not None for i in ids):
        return [len(i) for i in ids]
    if len(choices) == 1:
        return [total]
    sizes = [len(c.message.content or "") + len((c.message.model_extra or {}).get("reasoning") or "") for c in choices]
    if not sum(sizes):
        sizes = [1] * len(choices)
    counts = [total * size // sum(sizes) for size in sizes]
    counts[0] += total - sum(counts)  # the rounding remainder: the counts add up to the total
    return counts


def _refuses_n(error) -> bool:
    body = getattr(error, "body", None)
    if isinstance(body, dict) and (body.get("param") == "n" or (body.get("error") or {}).get("param") == "n"):
        return True
    text = str(error).lower()
    return "'n'" in text or '"n"' in text or "n must be" in text or "only n=1" in text


def _short(error: BaseException, limit: int = 200) -> str:
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
