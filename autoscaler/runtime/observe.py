"""Observers around observers: what the composition root adds to a cluster's snapshot.

:class:`WithExecutorPods` adds the executor pods of a Spark application on Kubernetes to each
snapshot's executor view, so a request that waits is explained (the pods Pending, those the
scheduler cannot place and its message) in the not-granted reason, the status API and the
metrics. The pods only explain: "not granted" stays the time rule of ``request_timeout``,
because a cluster autoscaler may be adding the node an Unschedulable pod waits for.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from autoscaler.core.model import Snapshot
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.ports import ClusterObserver, ExecutorPodSource

log = get_logger("autoscaler.observe")


class WithExecutorPods:
    """A :class:`ClusterObserver` whose executor view carries the executor pods.

    Listing the pods may fail (the API server is briefly unavailable, RBAC was changed): the
    tick goes on with ``pods = None`` (unknown) and the failure is logged once until it heals,
    since an explanation must never stop the scaling it explains.
    """

    def __init__(self, inner: ClusterObserver, pods: ExecutorPodSource) -> None:
        self.inner = inner
        self.pods = pods
        self._failing = False

    def observe(self, now: datetime) -> Snapshot:
        snap = self.inner.observe(now)
        try:
            pods = self.pods.executor_pods(now)
        except Exception as exc:  # any failure of the explanation leaves it unknown
            if not self._failing:
                log.warning("executor_pods_unavailable", error=str(exc))
            self._failing = True
            return snap
        if self._failing:
            log.info("executor_pods_available")
        self._failing = False
        return replace(snap, executors=replace(snap.executors, pods=pods))
