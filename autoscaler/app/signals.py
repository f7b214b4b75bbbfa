"""SIGINT and SIGTERM, owned by the daemon: however a stop is asked for (Ctrl-C in a terminal,
``kill``, ``timeout``, a pod stopping), the daemon stops its queries at a batch boundary, then
the session, in that order.

The Spark JVMs the daemon starts run in a session of their own (``autoscaler/spark/session.py``),
so a signal to the process group reaches the daemon alone. Before the queries run there is
nothing to drain, and a signal interrupts at once (``KeyboardInterrupt``, as Ctrl-C would); from
``graceful()`` on, it only asks for the stop. PySpark replaces the SIGINT handler when a Spark
context starts (its handler cancels every running job, which would cut batches short): a
context started after ``install()`` needs another ``install()``.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

from autoscaler.runtime.logs import get_logger

log = get_logger("autoscaler.signals")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    def __init__(self, on_stop: Callable[[], None] | None = None) -> None:
        self.requested = threading.Event()
        self._on_stop = on_stop
        self._graceful = False

    def install(self, *, graceful: bool | None = None) -> None:
        """Handle SIGINT and SIGTERM here (main thread only); ``graceful`` once there is something to drain."""
        if graceful is not None:
            self._graceful = graceful
        for sig in SIGNALS:
            signal.signal(sig, self._handle)

    def graceful(self) -> None:
        self.install(graceful=True)

    def _handle(self, signum: int, _frame: Any) -> None:
        if not self._graceful:
            raise KeyboardInterrupt
        if not self.requested.is_set():  # `timeout` signals the process and then its group: one line
            log.info("signal_received", signal=signal.Signals(signum).name, detail="stopping every query at a batch boundary")
        self.requested.set()
        if self._on_stop is not None:
            self._on_stop()
