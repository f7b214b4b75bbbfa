"""Time is an input: decision code receives ``now``; only the shell reads a real clock."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        """Sleep; return True if ``stop`` was set meanwhile."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        if stop is None:
            time.sleep(max(0.0, seconds))
            return False
        return stop.wait(max(0.0, seconds))


class FakeClock:
    """A manually advanced clock for tests and the simulator; ``sleep`` advances it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=timezone.utc)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float) -> datetime:
        if not isinstance(delta, timedelta):
            delta = timedelta(seconds=delta)
        self._now += delta
        return self._now

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        self.advance(max(0.0, seconds))
        return bool(stop and stop.is_set())
