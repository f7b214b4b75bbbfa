"""The Spark observer: executors from the driver, queries from the host, in one snapshot."""

from __future__ import annotations

from datetime import datetime

from autoscaler.core.model import Snapshot
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost


class SparkObserver:
    def __init__(self, executors: SparkExecutors, host: QueryHost | None) -> None:
        self.executors = executors
        self.host = host

    def observe(self, now: datetime) -> Snapshot:
        view = self.executors.observe(now)
        if self.host is None:
            return Snapshot(at=now, executors=view)
        return Snapshot(at=now, executors=view, queries=self.host.views(), outcomes=self.host.take_outcomes())
