"""Retry policies for calls to the Kubernetes API (tenacity).

Retried: 429 (Too Many Requests) and 500/502/503/504, and answers that never came (a
connection refused or reset, a timeout). The wait is the server's ``Retry-After`` when it
sends one (priority and fairness, an overloaded server), else an exponential back-off with
jitter. Never retried: 400/403/404/422 (a bug or RBAC: resending cannot help) and 409 (a
conflict: the same body would conflict again; the caller reads the object again and
re-applies its change). Each retry is logged and counted.
"""

from __future__ import annotations

import time
from typing import Callable

import tenacity
from tenacity import RetryCallState

from autoscaler.k8s.errors import KubeError
from autoscaler.runtime.logs import get_logger

log = get_logger("autoscaler.k8s")

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0  # a server asking for longer is not waited for inside one call


def retryable(exc: BaseException) -> bool:
    """A transient failure: throttled, a server error, or no answer at all."""
    if isinstance(exc, KubeError):
        return exc.status is None or exc.status in RETRYABLE_STATUS
    return isinstance(exc, (OSError, TimeoutError))


class WaitRetryAfter(tenacity.wait.wait_base):
    """``Retry-After`` when the server sent one (capped), else the fallback back-off."""

    def __init__(self, fallback: tenacity.wait.wait_base) -> None:
        self.fallback = fallback

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        if isinstance(exc, KubeError) and exc.retry_after is not None:
            return min(max(exc.retry_after, 0.0), MAX_RETRY_AFTER)
        return float(self.fallback(retry_state))


def api_retrying(
    *,
    attempts: int = 5,
    max_delay: float = 30.0,
    initial: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[BaseException], None] | None = None,
) -> tenacity.Retrying:
    """A ``Retrying`` for one API call: at most ``attempts`` tries within ``max_delay`` seconds."""

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.info("kube_api_retry", attempt=state.attempt_number, error=str(exc), sleep_seconds=round(state.upcoming_sleep, 3))
        if on_retry is not None and exc is not None:
            on_retry(exc)

    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(retryable),
        wait=WaitRetryAfter(tenacity.wait_exponential_jitter(multiplier=initial, max=10.0, jitter=initial)),
        stop=tenacity.stop_after_attempt(attempts) | tenacity.stop_after_delay(max_delay),
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
