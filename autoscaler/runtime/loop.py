"""The daemon loop: tick at the reconcile interval, back off on errors, stop on request.

"Not ready yet" (the cluster is still starting) is told apart from errors: it retries at the
normal interval and is not counted. Errors are counted by phase and back off exponentially
up to ``max_backoff``; the first successful tick resets the back-off.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Callable

from autoscaler.runtime.clock import Clock
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.ports import NotReady
from autoscaler.runtime.reconciler import Reconciler, TickError

log = get_logger("autoscaler.loop")


class ReconcileLoop:
    def __init__(
        self,
        reconciler: Reconciler,
        clock: Clock,
        interval: timedelta,
        max_backoff: timedelta = timedelta(seconds=60),
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.reconciler = reconciler
        self.clock = clock
        self.interval = interval
        self.max_backoff = max_backoff
        self.on_error = on_error
        self.errors: Counter[str] = Counter()
        self.ticks = 0
        self.consecutive_failures = 0
        self.last_success_at: datetime | None = None
        self.stop_event = threading.Event()

    def next_delay(self) -> float:
        base = self.interval.total_seconds()
        if self.consecutive_failures == 0:
            return base
        return min(self.max_backoff.total_seconds(), base * 2**self.consecutive_failures)

    def run_once(self) -> bool:
        """One tick; True when it succeeded."""
        try:
            self.reconciler.tick()
        except NotReady as exc:
            log.info("not_ready", detail=str(exc))
            return False
        except TickError as exc:
            if isinstance(exc.cause, NotReady):
                log.info("not_ready", detail=str(exc.cause))
                return False
            self._failed(exc.phase, exc.cause)
            return False
        except Exception as exc:  # a bug outside the phases: count it, keep the daemon alive
            self._failed("tick", exc)
            return False
        self.ticks += 1
        self.consecutive_failures = 0
        self.last_success_at = self.clock.now()
        return True

    def _failed(self, phase: str, exc: BaseException) -> None:
        self.consecutive_failures += 1
        self.errors[phase] += 1
        log.error("tick_failed", phase=phase, error=f"{type(exc).__name__}: {exc}", failures=self.consecutive_failures)
        if self.on_error:
            self.on_error(phase, exc)

    def run(self, max_ticks: int | None = None) -> None:
        attempts = 0
        while not self.stop_event.is_set():
            self.run_once()
            attempts += 1
            if max_ticks is not None and attempts >= max_ticks:
                return
            if self.clock.sleep(self.next_delay(), self.stop_event):
                return

    def stop(self) -> None:
        self.stop_event.set()

    def start_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="spark-autoscaler-loop", daemon=True)
        thread.start()
        return thread
