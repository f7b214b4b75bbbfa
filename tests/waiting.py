"""Polling for a condition with a deadline, shared by the unit and integration tests (no Spark,
no environment of its own: tests/integration/conftest.py sets Spark's on import)."""

from __future__ import annotations

from typing import Any, Callable

from autoscaler.runtime.waiting import poll


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """``check()``'s first true value within ``timeout`` seconds, asked every ``interval``;
    an AssertionError naming ``what`` after that."""
    value = poll(check, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
    return value
