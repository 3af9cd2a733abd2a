"""Retrying calls to a server: which failures to retry, and how long to wait.

Transient failures (429, 5xx, timeouts, dropped connections) are retried with exponential
backoff and full jitter, so a thousand clients that failed together do not return together;
a ``Retry-After`` header (or OpenAI's ``retry-after-ms``) overrides the backoff. Failures that a
retry cannot fix (401, 403, 404) stop the run at once with a message saying what to change.

>>> policy = RetryPolicy(base=1.0, cap=60.0)
>>> all(0 <= policy.backoff(k) <= min(60.0, 2 ** k) for k in range(10))
True
>>> parse_retry_after({"retry-after": "3"}), parse_retry_after({"retry-after-ms": "250"})
(3.0, 0.25)
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 10
    base: float = 1.0  # seconds before the first retry, doubling after each failure
    cap: float = 60.0  # longest backoff between two attempts
    max_retry_after: float = 600.0  # longest server-requested wait we honour

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
        return (rng or random).uniform(0, min(self.cap, self.base * 2**attempt))

    def wait(self, attempt: int, headers: Mapping[str, str] | None) -> float:
        after = parse_retry_after(headers or {})
        if after is not None:
            return min(after, self.max_retry_after)
        return self.backoff(attempt)


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
    return any(s in text for s in ("context length", "context_length", "maximum context", "too long", "max_model_len",
                                   "maximum model length", "prompt is too long", "input tokens"))
