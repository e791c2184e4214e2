"""Call a provider again when, and only when, sending the same request again can help.

Every exception is classified with :func:`windowfit.classify.classify_error`:

* a retryable kind (rate limit, overloaded, server error, timeout, connection) is retried
  after :meth:`RetryPolicy.delay_for` seconds, up to ``max_attempts`` calls in all, and the
  last error is re-raised unchanged when they are used up;
* a context overflow is raised as :class:`windowfit.errors.ContextOverflowError` (carrying
  the provider's counts and message, chained ``from`` the original) and never retried:
  the same request gets the same answer, and the person decides what happens next;
* anything else that is not retryable (invalid request, authentication, permission, a used
  up quota, an unknown error) is re-raised unchanged at once.

``KeyboardInterrupt``, ``SystemExit`` and ``asyncio.CancelledError`` are never caught.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .classify import ErrorInfo, ErrorKind, classify_error
from .errors import ContextOverflowError, SettingsError

__all__ = ["RetryPolicy", "retry_call", "retry_call_async"]

T = TypeVar("T")

#: Called with the classified error and the 1-based number of the attempt that failed.
OnError = Callable[[ErrorInfo, int], object]

_MAX_EXPONENT = 62  # 2**62 is far past any max_delay; keeps the arithmetic finite


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to call, and how long to wait between calls.

    ``delay_for`` is exponential backoff with full jitter: a uniform draw from
    ``[0, min(max_delay, base_delay * 2**(attempt - 1))]``, or that ceiling itself when
    ``jitter`` is False. A provider's ``retry_after`` replaces the backoff, capped by
    ``max_delay`` too, so a long Retry-After cannot stall a caller past its budget.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise SettingsError(f"max_attempts must be an integer, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise SettingsError(f"max_attempts must be at least 1, not {self.max_attempts}")
        for name in ("base_delay", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise SettingsError(f"{name} must be a finite number >= 0, not {value!r}")

    def delay_for(self, attempt: int, info: ErrorInfo | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based); in [0, max_delay]."""
        if info is not None and info.retry_after is not None:
            wait = info.retry_after
            if math.isfinite(wait) and wait >= 0:
                return min(wait, self.max_delay)
        exponent = min(max(attempt, 1) - 1, _MAX_EXPONENT)
        ceiling = min(self.max_delay, self.base_delay * 2.0**exponent)
        if not self.jitter:
            return ceiling
        return min(random.uniform(0.0, ceiling), ceiling)


def _overflow(info: ErrorInfo) -> ContextOverflowError:
    where = f" ({info.provider})" if info.provider else ""
    return ContextOverflowError(
        f"the provider{where} rejected the request as too long for the model's context window",
        tokens=info.prompt_tokens,
        limit=info.limit,
        provider_message=info.message,
    )


def _handle(
    error: Exception, attempt: int, policy: RetryPolicy, on_error: OnError | None
) -> ErrorInfo:
    """Classify ``error``; raise what must not be retried; return the info when it may be."""
    if isinstance(error, ContextOverflowError):
        raise error  # fitting already said it: nothing to classify or retry
    info = classify_error(error)
    if on_error is not None:
        on_error(info, attempt)
    if info.kind is ErrorKind.CONTEXT_OVERFLOW:
        raise _overflow(info) from error
    if not info.retryable or attempt >= policy.max_attempts:
        raise error
    return info


def retry_call(
    fn: Callable[..., T],
    *args: object,
    policy: RetryPolicy | None = None,
    on_error: OnError | None = None,
    sleep: Callable[[float], object] = time.sleep,
    **kwargs: object,
) -> T:
    """Call ``fn(*args, **kwargs)``, retrying retryable provider errors (see module docs).

    ``policy``, ``on_error`` and ``sleep`` are taken by this function, not passed to
    ``fn``. ``on_error(info, attempt)`` sees every classified failure, including the last.
    """
    policy = policy or RetryPolicy()
    attempt = 1
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as error:
            info = _handle(error, attempt, policy, on_error)
        sleep(policy.delay_for(attempt, info))
        attempt += 1


async def retry_call_async(
    fn: Callable[..., Awaitable[T]],
    *args: object,
    policy: RetryPolicy | None = None,
    on_error: OnError | None = None,
    sleep: Callable[[float], Awaitable[object]] | None = None,
    **kwargs: object,
) -> T:
    """Await ``fn(*args, **kwargs)``, retrying retryable provider errors (see module docs).

    ``sleep`` defaults to :func:`asyncio.sleep` (imported only when first needed).
    """
    if sleep is None:
        import asyncio

        sleep = asyncio.sleep
    policy = policy or RetryPolicy()
    attempt = 1
    while True:
        try:
            return await fn(*args, **kwargs)
        except Exception as error:
            info = _handle(error, attempt, policy, on_error)
        await sleep(policy.delay_for(attempt, info))
        attempt += 1
