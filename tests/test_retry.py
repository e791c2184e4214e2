"""retry_call and retry_call_async: retry what can succeed, never what cannot."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowfit.classify import ErrorInfo, ErrorKind, classify_error
from windowfit.errors import CONTEXT_OVERFLOW_MESSAGE, ContextOverflowError, SettingsError
from windowfit.retry import RetryPolicy, retry_call, retry_call_async

K = ErrorKind


class APIStatusError(Exception):
    """Shaped like the SDKs' status errors: status_code, body, response.headers."""

    def __init__(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"Error code: {status} - {body}")
        self.status_code = status
        self.body = body
        self.response = type("Response", (), {"headers": headers or {}, "status_code": status})()


def _anthropic(status: int, kind: str, message: str, **headers: str) -> APIStatusError:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return APIStatusError(status, body, {k.replace("_", "-"): v for k, v in headers.items()})


def _overloaded() -> APIStatusError:
    return _anthropic(529, "overloaded_error", "Overloaded")


def _too_long() -> APIStatusError:
    # https://github.com/anthropics/claude-code/issues/14195
    return _anthropic(
        400, "invalid_request_error", "prompt is too long: 191989 tokens > 180000 maximum"
    )


class Flaky:
    """Raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append((args, kwargs))
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Recorder:
    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.seen: list[tuple[ErrorInfo, int]] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def on_error(self, info: ErrorInfo, attempt: int) -> None:
        self.seen.append((info, attempt))


STEADY = RetryPolicy(max_attempts=4, base_delay=0.5, max_delay=30.0, jitter=False)


# --------------------------------------------------------------------------- policy


def test_default_policy() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay, policy.jitter) == (
        4,
        0.5,
        30.0,
        True,
    )


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=False)
    assert [policy.delay_for(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_jitter_stays_under_the_backoff_ceiling() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0)
    for attempt in range(1, 8):
        ceiling = min(10.0, 2.0 ** (attempt - 1))
        assert all(0.0 <= policy.delay_for(attempt) <= ceiling for _ in range(50))


def test_retry_after_replaces_backoff_and_is_capped() -> None:
    policy = RetryPolicy(max_delay=30.0)
    asked = classify_error(status=429, headers={"retry-after": "7"})
    assert policy.delay_for(1, asked) == 7.0
    azure = classify_error(status=429, headers={"retry-after": "86400"})
    assert policy.delay_for(1, azure) == 30.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"base_delay": -1.0},
        {"max_delay": math.nan},
        {"max_delay": math.inf},
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        RetryPolicy(**kwargs)


def test_policy_is_frozen() -> None:
    with pytest.raises(AttributeError):
        STEADY.max_attempts = 9  # type: ignore[misc]


_finite = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(
    attempt=st.integers(min_value=-10, max_value=10_000),
    base_delay=_finite,
    max_delay=_finite,
    jitter=st.booleans(),
    retry_after=st.none() | st.floats(allow_nan=True, allow_infinity=True),
)
def test_delay_is_always_within_zero_and_max_delay(
    attempt: int, base_delay: float, max_delay: float, jitter: bool, retry_after: float | None
) -> None:
    policy = RetryPolicy(base_delay=base_delay, max_delay=max_delay, jitter=jitter)
    info = ErrorInfo(K.RATE_LIMIT, True, False, "busy", retry_after=retry_after)
    for given_info in (None, info):
        delay = policy.delay_for(attempt, given_info)
        assert 0.0 <= delay <= max_delay


# --------------------------------------------------------------------------- sync


def test_success_needs_no_retry() -> None:
    rec = Recorder()
    fn = Flaky()
    assert retry_call(fn, 1, 2, key="v", sleep=rec.sleep, on_error=rec.on_error) == "ok"
    assert fn.calls == [((1, 2), {"key": "v"})]
    assert rec.sleeps == [] and rec.seen == []


def test_retryable_errors_are_retried_with_backoff() -> None:
    rec = Recorder()
    fn = Flaky(_overloaded(), TimeoutError("read timed out"))
    result = retry_call(fn, "x", policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    assert result == "ok"
    assert len(fn.calls) == 3
    assert rec.sleeps == [0.5, 1.0]
    assert [(info.kind, attempt) for info, attempt in rec.seen] == [
        (K.OVERLOADED, 1),
        (K.TIMEOUT, 2),
    ]


def test_the_last_error_is_re_raised_unchanged_when_attempts_run_out() -> None:
    rec = Recorder()
    errors = [_overloaded() for _ in range(4)]
    fn = Flaky(*errors)
    with pytest.raises(APIStatusError) as raised:
        retry_call(fn, policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    assert raised.value is errors[-1]
    assert len(fn.calls) == 4
    assert rec.sleeps == [0.5, 1.0, 2.0]
    assert [attempt for _, attempt in rec.seen] == [1, 2, 3, 4]


def test_retry_after_from_the_provider_is_honoured() -> None:
    rec = Recorder()
    fn = Flaky(_anthropic(429, "rate_limit_error", "slow down", retry_after="7"))
    assert retry_call(fn, policy=STEADY, sleep=rec.sleep) == "ok"
    assert rec.sleeps == [7.0]


@pytest.mark.parametrize(
    "error",
    [
        _anthropic(400, "invalid_request_error", "messages: roles must alternate"),
        _anthropic(401, "authentication_error", "invalid x-api-key"),
        _anthropic(403, "permission_error", "not allowed"),
        _anthropic(404, "not_found_error", "model: claude-nope"),
        # https://github.com/OpenHands/OpenHands/issues/998
        APIStatusError(
            429,
            {
                "message": "You exceeded your current quota, please check your plan and billing "
                "details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            },
        ),
        KeyError("a bug, not a provider error"),
    ],
    ids=["invalid", "auth", "permission", "not-found", "quota", "bug"],
)
def test_non_retryable_errors_are_re_raised_at_once(error: Exception) -> None:
    rec = Recorder()
    fn = Flaky(error)
    with pytest.raises(type(error)) as raised:
        retry_call(fn, policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    assert raised.value is error
    assert len(fn.calls) == 1
    assert rec.sleeps == []
    assert len(rec.seen) == 1 and not rec.seen[0][0].retryable


def test_context_overflow_becomes_context_overflow_error() -> None:
    rec = Recorder()
    original = _too_long()
    fn = Flaky(original)
    with pytest.raises(ContextOverflowError) as raised:
        retry_call(fn, policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    error = raised.value
    assert error.__cause__ is original
    assert (error.tokens, error.limit) == (191989, 180000)
    assert error.provider_message == "prompt is too long: 191989 tokens > 180000 maximum"
    assert str(error) == CONTEXT_OVERFLOW_MESSAGE
    assert "anthropic" in error.detail
    assert len(fn.calls) == 1 and rec.sleeps == []
    assert rec.seen[0][0].kind is K.CONTEXT_OVERFLOW


def test_context_overflow_error_from_fitting_passes_through() -> None:
    rec = Recorder()
    original = ContextOverflowError("nothing fits", tokens=9, limit=5)
    with pytest.raises(ContextOverflowError) as raised:
        retry_call(Flaky(original), policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    assert raised.value is original
    assert rec.seen == []


def test_keyboard_interrupt_is_never_caught() -> None:
    rec = Recorder()
    fn = Flaky(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        retry_call(fn, policy=STEADY, sleep=rec.sleep, on_error=rec.on_error)
    assert rec.seen == []


def test_single_attempt_policy_never_sleeps() -> None:
    rec = Recorder()
    with pytest.raises(APIStatusError):
        retry_call(Flaky(_overloaded()), policy=RetryPolicy(max_attempts=1), sleep=rec.sleep)
    assert rec.sleeps == []


def test_default_sleep_is_real_but_short() -> None:
    fast = RetryPolicy(base_delay=0.0, jitter=False)
    assert retry_call(Flaky(_overloaded()), policy=fast) == "ok"


@settings(max_examples=50, deadline=None)
@given(max_attempts=st.integers(min_value=1, max_value=8), failures=st.integers(0, 10))
def test_calls_are_bounded_by_max_attempts(max_attempts: int, failures: int) -> None:
    rec = Recorder()
    fn = Flaky(*[_overloaded() for _ in range(failures)])
    policy = RetryPolicy(max_attempts=max_attempts)
    if failures < max_attempts:
        assert retry_call(fn, policy=policy, sleep=rec.sleep) == "ok"
        assert len(fn.calls) == failures + 1
    else:
        with pytest.raises(APIStatusError):
            retry_call(fn, policy=policy, sleep=rec.sleep)
        assert len(fn.calls) == max_attempts
    assert len(rec.sleeps) == len(fn.calls) - 1
    assert all(0.0 <= s <= policy.max_delay for s in rec.sleeps)


# --------------------------------------------------------------------------- async


class AsyncFlaky(Flaky):
    async def run(self, *args: Any, **kwargs: Any) -> str:
        return self(*args, **kwargs)


def test_async_retries_and_succeeds() -> None:
    rec = Recorder()
    fn = AsyncFlaky(_overloaded(), ConnectionResetError("reset"))
    result = asyncio.run(
        retry_call_async(fn.run, 1, key="v", policy=STEADY, sleep=rec.asleep, on_error=rec.on_error)
    )
    assert result == "ok"
    assert fn.calls == [((1,), {"key": "v"})] * 3
    assert rec.sleeps == [0.5, 1.0]
    assert [info.kind for info, _ in rec.seen] == [K.OVERLOADED, K.CONNECTION]


def test_async_context_overflow() -> None:
    rec = Recorder()
    original = _too_long()
    fn = AsyncFlaky(original)
    with pytest.raises(ContextOverflowError) as raised:
        asyncio.run(retry_call_async(fn.run, policy=STEADY, sleep=rec.asleep))
    assert raised.value.__cause__ is original
    assert len(fn.calls) == 1 and rec.sleeps == []


def test_async_gives_up_with_the_last_error() -> None:
    rec = Recorder()
    errors = [_overloaded(), _overloaded()]
    fn = AsyncFlaky(*errors)
    with pytest.raises(APIStatusError) as raised:
        asyncio.run(retry_call_async(fn.run, policy=RetryPolicy(max_attempts=2), sleep=rec.asleep))
    assert raised.value is errors[-1]
    assert len(rec.sleeps) == 1


def test_async_non_retryable_is_immediate() -> None:
    rec = Recorder()
    error = _anthropic(401, "authentication_error", "invalid x-api-key")
    with pytest.raises(APIStatusError) as raised:
        asyncio.run(retry_call_async(AsyncFlaky(error).run, policy=STEADY, sleep=rec.asleep))
    assert raised.value is error and rec.sleeps == []


def test_async_cancellation_is_never_caught() -> None:
    rec = Recorder()
    fn = AsyncFlaky(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(retry_call_async(fn.run, policy=STEADY, sleep=rec.asleep))
    assert len(fn.calls) == 1


def test_async_default_sleep() -> None:
    fast = RetryPolicy(base_delay=0.0, jitter=False)
    assert asyncio.run(retry_call_async(AsyncFlaky(_overloaded()).run, policy=fast)) == "ok"
