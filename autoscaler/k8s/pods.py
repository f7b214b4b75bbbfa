"""Why requested executors wait on Kubernetes: a summary of the application's executor pods.

Spark's Kubernetes backend answers every ``requestTotalExecutors`` with "accepted" and keeps
the pods it cannot place ``Pending`` (``KubernetesClusterSchedulerBackend``). The daemon
keeps its time rule for "not granted"; this summary says why it waits: how many executor pods
are Pending, how many of them the scheduler found no node for, and the scheduler's message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Mapping

from autoscaler.core.model import ExecutorPods
from autoscaler.k8s.gateway import PodApi

MAX_MESSAGE = 300


def summarize_executor_pods(pods: Iterable[Mapping[str, Any]]) -> ExecutorPods:
    """Pending and Unschedulable counts, and the scheduler's newest message (a pure function of Pod JSON).

    A pod being deleted is no longer wanted and is left out; a Pending pod is Unschedulable
    when its ``PodScheduled`` condition is ``False`` with reason ``Unschedulable``.
    """
    pending = unschedulable = 0
    newest: tuple[str, str] | None = None  # (lastTransitionTime, message)
    for pod in pods:
        if pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        if status.get("phase") != "Pending":
            continue
        pending += 1
        for cond in status.get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
                unschedulable += 1
                candidate = (str(cond.get("lastTransitionTime") or ""), str(cond.get("message") or ""))
                if candidate[1] and (newest is None or candidate[0] >= newest[0]):
                    newest = candidate
    message = newest[1][:MAX_MESSAGE] if newest is not None else None
    return ExecutorPods(pending=pending, unschedulable=unschedulable, message=message)


def executor_selector(application_id: str) -> str:
    """The labels Spark puts on the executor pods it creates for one application."""
    return f"spark-app-selector={application_id},spark-role=executor"


class ExecutorPodLister:
    """:class:`~autoscaler.runtime.ports.ExecutorPodSource` over the Kubernetes API.

    It selects pods by the labels Spark itself sets (``spark-app-selector`` is the application
    id, so a previous run's pods that still linger are not counted).
    """

    def __init__(self, api: PodApi, namespace: str, application_id: str) -> None:
        self.api = api
        self.namespace = namespace
        self.selector = executor_selector(application_id)

    def executor_pods(self, now: datetime) -> ExecutorPods:
        return summarize_executor_pods(self.api.list_pods(self.namespace, self.selector))
