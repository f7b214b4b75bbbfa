"""Polling for a condition with a deadline: the local cluster's start, the benchmarks' and the
tests' waits. Each caller says what a timeout means in its own error."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T], timeout: float, interval: float) -> T | None:
    """``check()``'s first true value, asked every ``interval`` seconds until ``timeout`` seconds
    have passed; None if it never was."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)
