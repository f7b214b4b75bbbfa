"""Every call the operator and the daemon make to the Kubernetes API, one row each: the gateway
method, the exact HTTP request it must send, and a schema-valid answer.

``test_gateway_contract.py`` sends each row through the real gateway (the official client)
against ``pytest-httpserver`` and checks the request; ``tests/unit/chart/test_rbac.py``
checks each row against the Roles the chart renders (every call allowed, every rule used).
The RBAC verb, resource and API group of a row are derived from its request, as the API
server's authorizer derives them, never written by hand.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

from autoscaler.k8s.gateway import APPLY_PATCH, MERGE_PATCH, KubeApi
from tests.kube import config_map, executor_pod, meta, pod_list, validate
from tests.unit.operator.crdcheck import problems as cr_problems
from tests.unit.operator.samples import SETTINGS, ref_of, sample, spec_of

NS = "analytics"
CR = f"/apis/streaming.sparkautoscaler.io/v1alpha1/namespaces/{NS}/sparkstreamingapps"
FM = {"fieldManager": "spark-autoscaler-operator", "force": "true"}


def app(**status: Any) -> dict[str, Any]:
    obj = sample()
    obj["metadata"]["resourceVersion"] = "15"
    if status:
        obj["status"] = status
    assert cr_problems(obj) == []
    return obj


def children() -> dict[str, dict[str, Any]]:
    from autoscaler.operator.changes import restart_hash
    from autoscaler.operator.children import desired_children

    a = sample()
    spec = spec_of(a)
    return {o["kind"]: o for o in desired_children(ref_of(a), spec, SETTINGS, restart_hash(spec, SETTINGS)) if o["metadata"]["name"] != "clicks-state"}


def stored(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    """An object as the API server answers after storing it (uid, resourceVersion, status)."""
    out = copy.deepcopy(obj)
    out["metadata"] = {**meta(out["metadata"]["name"], NS), **out["metadata"]}
    if status:
        out["status"] = status
    return validate(out)


def event(count: int = 1) -> dict[str, Any]:
    return validate({
        "apiVersion": "v1", "kind": "Event", "metadata": meta("clicks.0123456789abcdef", NS),
        "involvedObject": {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp", "name": "clicks", "namespace": NS,
                           "uid": "uid-clicks"},
        "type": "Normal", "reason": "ScaledUp", "message": "executors 2 -> 4 (ScaleUpForLoad) [audit 7]", "count": count,
        "firstTimestamp": "2026-11-20T10:00:00Z", "lastTimestamp": "2026-11-20T10:00:00Z", "source": {"component": "spark-autoscaler-operator"},
        "reportingComponent": "spark-autoscaler-operator", "reportingInstance": "operator-0",
    })


def lease(holder: str = "operator-0") -> dict[str, Any]:
    return validate({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("spark-autoscaler-operator", "spark-system"),
                     "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "acquireTime": "2026-11-20T10:00:00.000000Z",
                              "renewTime": "2026-11-20T10:00:05.000000Z", "leaseTransitions": 0}})


@dataclass(frozen=True)
class Call:
    id: str
    who: str  # "operator" or "daemon"
    invoke: Callable[[KubeApi], Any]
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    status: int = 200
    answer: Any = None

    @property
    def rbac(self) -> tuple[str, str, str]:
        """(apiGroup, resource[/subresource], verb) as the API server's authorizer sees the request."""
        parts = self.path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[parts.index("namespaces") + 2:]
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        named = len(rest) > 1
        verb = {
            "GET": ("watch" if self.query.get("watch") == "true" else "get") if named else ("watch" if self.query.get("watch") == "true" else "list"),
            "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if named else "deletecollection",
        }[self.method]
        return group, resource, verb


# the operator: KubeApi's methods (the KubeGateway protocol) and the official LeaseLock's calls
OPERATOR_CALLS = [
    Call("list-apps", "operator", lambda k: k.list_apps(NS), "GET", CR,
         answer={"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingAppList", "metadata": {"resourceVersion": "15"},
                 "items": [app()]}),
    Call("watch-apps", "operator", lambda k: list(k.watch_apps(NS, "15", 300)), "GET", CR,
         {"watch": "true", "resourceVersion": "15", "allowWatchBookmarks": "true", "timeoutSeconds": "300"}, answer=""),
    Call("patch-status", "operator", lambda k: k.patch_app_status(NS, "clicks", {"phase": "Running"}), "PATCH", f"{CR}/clicks/status",
         content_type=MERGE_PATCH, answer=app(phase="Running")),
    Call("apply-config", "operator", lambda k: k.apply(children()["ConfigMap"]), "PATCH", f"/api/v1/namespaces/{NS}/configmaps/clicks-config", FM,
         APPLY_PATCH, answer=stored(children()["ConfigMap"])),
    Call("apply-config-create", "operator", lambda k: k.apply(children()["ConfigMap"]), "PATCH", f"/api/v1/namespaces/{NS}/configmaps/clicks-config",
         FM, APPLY_PATCH, status=201, answer=stored(children()["ConfigMap"])),  # an apply that creates is authorized as create
    Call("apply-service", "operator", lambda k: k.apply(children()["Service"]), "PATCH", f"/api/v1/namespaces/{NS}/services/clicks", FM, APPLY_PATCH,
         answer=stored(children()["Service"], loadBalancer={})),
    Call("apply-service-create", "operator", lambda k: k.apply(children()["Service"]), "PATCH", f"/api/v1/namespaces/{NS}/services/clicks", FM,
         APPLY_PATCH, status=201, answer=stored(children()["Service"], loadBalancer={})),
    Call("apply-statefulset", "operator", lambda k: k.apply(children()["StatefulSet"]), "PATCH", f"/apis/apps/v1/namespaces/{NS}/statefulsets/clicks",
         FM, APPLY_PATCH, answer=stored(children()["StatefulSet"], replicas=1)),
    Call("apply-statefulset-create", "operator", lambda k: k.apply(children()["StatefulSet"]), "PATCH",
         f"/apis/apps/v1/namespaces/{NS}/statefulsets/clicks", FM, APPLY_PATCH, status=201, answer=stored(children()["StatefulSet"], replicas=1)),
    Call("apply-statefulset-dry-run", "operator", lambda k: k.apply(children()["StatefulSet"], dry_run=True), "PATCH",
         f"/apis/apps/v1/namespaces/{NS}/statefulsets/clicks", {**FM, "dryRun": "All"}, APPLY_PATCH, answer=stored(children()["StatefulSet"])),
    Call("get-statefulset", "operator", lambda k: k.get_statefulset(NS, "clicks"), "GET", f"/apis/apps/v1/namespaces/{NS}/statefulsets/clicks",
         answer=stored(children()["StatefulSet"], replicas=1, readyReplicas=1, currentRevision="clicks-1", updateRevision="clicks-1")),
    Call("get-pod", "operator", lambda k: k.get_pod(NS, "clicks-0"), "GET", f"/api/v1/namespaces/{NS}/pods/clicks-0",
         answer=executor_pod("clicks-0", "Running")),
    Call("get-event", "operator", lambda k: k.get_event(NS, "clicks.0123456789abcdef"), "GET", f"/api/v1/namespaces/{NS}/events/clicks.0123456789abcdef",
         answer=event()),
    Call("create-event", "operator", lambda k: k.create_event(NS, {k_: v for k_, v in event().items() if k_ != "metadata"} | {"metadata": {"name": "clicks.0123456789abcdef"}}),
         "POST", f"/api/v1/namespaces/{NS}/events", status=201, answer=event()),
    Call("patch-event", "operator", lambda k: k.patch_event(NS, "clicks.0123456789abcdef", {"count": 2}), "PATCH",
         f"/api/v1/namespaces/{NS}/events/clicks.0123456789abcdef", content_type=MERGE_PATCH, answer=event(2)),
    Call("lease-get", "operator", lambda k: _lock(k).get("spark-autoscaler-operator", "spark-system"), "GET",
         "/apis/coordination.k8s.io/v1/namespaces/spark-system/leases/spark-autoscaler-operator", answer=lease()),
    Call("lease-create", "operator", lambda k: _lock(k).create("spark-autoscaler-operator", "spark-system", _record()), "POST",
         "/apis/coordination.k8s.io/v1/namespaces/spark-system/leases", status=201, answer=lease()),
    Call("lease-update", "operator", lambda k: _locked(k).update("spark-autoscaler-operator", "spark-system", _record()), "PUT",
         "/apis/coordination.k8s.io/v1/namespaces/spark-system/leases/spark-autoscaler-operator", answer=lease()),
]

# the daemon (the driver pod): its state ConfigMap and its executor pods; Spark's own calls are in the chart's allow-list
DAEMON_CALLS = [
    Call("state-get", "daemon", lambda k: k.read_config_map(NS, "clicks-state"), "GET", f"/api/v1/namespaces/{NS}/configmaps/clicks-state",
         answer=config_map("clicks-state")),
    Call("state-create", "daemon", lambda k: k.create_config_map(NS, {"metadata": {"name": "clicks-state"}}), "POST",
         f"/api/v1/namespaces/{NS}/configmaps", status=201, answer=config_map("clicks-state")),
    Call("state-replace", "daemon", lambda k: k.replace_config_map(NS, "clicks-state", config_map("clicks-state")), "PUT",
         f"/api/v1/namespaces/{NS}/configmaps/clicks-state", answer=config_map("clicks-state")),
    Call("state-check", "daemon", lambda k: k.replace_config_map(NS, "clicks-state", config_map("clicks-state"), dry_run=True), "PUT",
         f"/api/v1/namespaces/{NS}/configmaps/clicks-state", {"dryRun": "All"}, answer=config_map("clicks-state")),
    Call("executor-pods", "daemon", lambda k: k.list_pods(NS, "spark-app-selector=spark-app-1,spark-role=executor"), "GET", f"/api/v1/namespaces/{NS}/pods",
         {"labelSelector": "spark-app-selector=spark-app-1,spark-role=executor", "resourceVersion": "0"}, answer=pod_list([])),
]


def _record() -> Any:
    from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord

    return LeaderElectionRecord("operator-0", "15", "2026-11-20 10:00:00.000000", "2026-11-20 10:00:05.000000")


def _lock(k: KubeApi) -> Any:
    from kubernetes import client
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    lock = LeaseLock("spark-autoscaler-operator", "spark-system", "operator-0")
    lock.api_instance = client.CoordinationV1Api(k.api_client)
    return lock


def _locked(k: KubeApi) -> Any:
    """A lock that holds the Lease it read (``update`` replaces what ``get`` returned)."""
    from kubernetes.client import V1Lease

    lock = _lock(k)
    lock.lease_reference = V1Lease.from_dict(lease())
    return lock
