"""The narrow interfaces between the pure core and the effectful shell.

The same reconciler runs against real Spark (``autoscaler.spark``), the simulator
(``autoscaler.tools.sim``) and the in-memory fakes of the tests, through these protocols only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, Sequence

from autoscaler.core.model import ExecutorPods, QueryChange, Snapshot


class NotReady(Exception):
    """The cluster cannot be observed yet (starting up); retry at the normal interval."""


class ClusterObserver(Protocol):
    def observe(self, now: datetime) -> Snapshot: ...


class ExecutorPodSource(Protocol):
    def executor_pods(self, now: datetime) -> ExecutorPods:
        """The application's executor pods now (Kubernetes); raises when they cannot be listed."""
        ...


class ExecutorActuator(Protocol):
    def set_target(self, total: int, now: datetime) -> bool:
        """Assert the absolute executor target; True if the cluster manager accepted it."""
        ...

    def remove(self, ids: Sequence[str], now: datetime) -> bool:
        """Remove these executors (and lower the target by as many)."""
        ...


class QueryActuator(Protocol):
    def rescale(self, change: QueryChange, now: datetime) -> bool:
        """Start restarting a query from its checkpoint with new params; True if accepted.

        Completion (and the measured pause) is reported later as an ``ActionOutcome`` in a
        snapshot.
        """
        ...


class StateStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any]) -> None: ...

    def check_writable(self) -> None:
        """Raise ``StateStoreError`` unless a state could be saved now (checked at start-up)."""
        ...
