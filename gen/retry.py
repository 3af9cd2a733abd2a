"""Retrying calls to a server: which failures to retry, and how long to wait.

The loop is tenacity's (``AsyncRetrying``); this module only says what to retry and how long to
wait. Transient failures (408, 409, 429, 5xx, timeouts, dropped connections) are retried with
exponential backoff and full jitter (tenacity's ``wait_random_exponential``: uniform in
``[0, min(cap, base * 2**k)]``), so a thousand clients that failed together do not return together;
a ``Retry-After`` header (or OpenAI's ``retry-after-ms``) overrides the backoff. Failures that a
retry cannot fix (401, 403, 404) are not retried: the caller stops the run with a message.

Why not the OpenAI client's own ``max_retries`` (it retries the same statuses): measured by
``bench/retries.py`` against a loopback server, its ten retries give up after 48-50 s of a 503
outage (its backoff caps at 8 s with only -25% jitter), and a 429 with ``Retry-After: 180`` is not
retried at all (it honours at most 120 s); this policy's ten retries span 148 s on average and wait
the 180 s asked for. A long generation run must outlast a rate-limit window or a server restart, so
the client's retries stay off (``max_retries=0``) and tenacity runs this policy.

>>> parse_retry_after({"retry-after": "3"}), parse_retry_after({"retry-after-ms": "250"})
(3.0, 0.25)
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import tenacity


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 10
    base: float = 1.0  # upper bound of the first wait, doubling after each failure
    cap: float = 60.0  # longest backoff between two attempts
    max_retry_after: float = 600.0  # longest server-requested wait we honour

    def retrying(self, *, on_retry: Callable[[], None] | None = None, sleep=None) -> tenacity.AsyncRetrying:
        """An ``AsyncRetrying`` for one request: ``max_retries`` retries of transient failures,
        then the last error is raised as it was (``reraise``). ``sleep``: tests record the waits."""
        extra = {} if sleep is None else {"sleep": sleep}
        return tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=WaitRetryAfter(
                tenacity.wait_random_exponential(multiplier=self.base, max=self.cap), longest=self.max_retry_after
            ),
            retry=tenacity.retry_if_exception(lambda e: classify(e) == "retry"),
            before_sleep=(lambda state: on_retry()) if on_retry else None,
            reraise=True,
            **extra,
        )


class WaitRetryAfter(tenacity.wait.wait_base):
    """The server's ``Retry-After`` when the failed response carries one, else ``fallback``."""

    def __init__(self, fallback: tenacity.wait.wait_base, longest: float):
        self.fallback, self.longest = fallback, longest

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        response = getattr(error, "response", None)  # openai.APIStatusError carries the HTTP response
        after = parse_retry_after(getattr(response, "headers", None) or {})
        if after is not None:
            return min(after, self.longest)
        return self.fallback(retry_state)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify(error: BaseException) -> str:
    """``"retry"`` (transient), ``"fatal"`` (a setting is wrong: stop the run), ``"context"`` (this
    prompt can never fit the model: record an error row) or ``"bad_request"`` (other 4xx)."""
    import openai

    if isinstance(error, (openai.APITimeoutError, openai.APIConnectionError)):
        return "retry"
    if isinstance(error, openai.APIStatusError):
        code = error.status_code
        if code in (408, 409, 429) or code >= 500:
            return "retry"
        if code in (401, 403, 404):
            return "fatal"
        if code in (400, 413, 422) and _is_context_error(error):
            return "context"
        return "bad_request"
    return "fatal"


def _is_context_error(error: BaseException) -> bool:
    text = str(error).lower()
    return any(
        s in text
        for s in (
            "context length",
            "context_length",
            "maximum context",
            "too long",
            "max_model_len",
            "maximum model length",
            "prompt is too long",
            "input tokens",
        )
    )
