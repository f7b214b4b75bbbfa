"""Kubernetes JSON for tests: objects shaped as the API server sends them, each checked against
the official schemas that ``kubernetes-validate`` bundles (strict: an unknown field fails).

Fakes that answer like the API server (``pytest-httpserver`` scripts, the in-memory gateway of
the operator tests) build their answers here, so a test can never speak a Kubernetes that
does not exist. ``kubernetes-validate`` is imported at the top: without it these tests fail,
they do not skip.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any, Iterable

import jsonschema
import kubernetes_validate
from kubernetes import client
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

from autoscaler.k8s.client import one_try
from autoscaler.k8s.gateway import KubeApi
from autoscaler.k8s.retry import api_retrying

VERSIONS = ("1.29", "1.37")  # the oldest Kubernetes the chart supports (CEL GA) and the newest schemas bundled
_rv = itertools.count(1000)


def validate(obj: dict[str, Any], versions: Iterable[str] = VERSIONS) -> dict[str, Any]:
    """``obj`` unchanged, after ``kubernetes-validate --strict`` passed it at every version."""
    for version in versions:
        kubernetes_validate.validate(copy.deepcopy(obj), version, strict=True)
    return obj


def validate_meta(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """A ``meta/v1`` object (``status``: an error answer; ``watchevent``: a line of a watch): the
    bundle files their schemas as ``<kind>-meta-v1``, which ``validate()`` does not look up by
    kind, so they are loaded here the same way."""
    for version in VERSIONS:
        folder = f"kubernetes-json-schema/v{version}.0-local-strict"
        schema = schema_contents(f"{folder}/{kind}-meta-v1.json", version)
        registry = Resource.from_contents(schema_contents(f"{folder}/_definitions.json", version)) @ (Resource.from_contents(schema) @ Registry())
        jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(obj)
    return obj


def validate_status(obj: dict[str, Any]) -> dict[str, Any]:
    return validate_meta(obj, "status")


def next_rv() -> str:
    return str(next(_rv))


def meta(name: str, namespace: str = "analytics", **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": next_rv(),
            "creationTimestamp": "2026-11-20T10:00:00Z", **extra}


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return validate_status({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                            "reason": reason, "code": code})


def executor_pod(name: str, phase: str, *, unschedulable: str | None = None, at: str = "2026-11-20T10:01:00Z",
                 deleting: bool = False, app_id: str = "spark-app-1") -> dict[str, Any]:
    """An executor pod as Spark creates it (its labels), in ``phase``; Pending and Unschedulable
    when the scheduler said ``unschedulable``."""
    labels = {"spark-app-selector": app_id, "spark-role": "executor", "spark-exec-id": name.rsplit("-", 1)[-1]}
    md = meta(name, labels=labels, **({"deletionTimestamp": "2026-11-20T10:05:00Z", "deletionGracePeriodSeconds": 30} if deleting else {}))
    conditions = []
    if unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable,
                           "lastProbeTime": None, "lastTransitionTime": at})
    elif phase != "Pending":
        conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": at})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": {"containers": [{"name": "spark-kubernetes-executor", "image": "spark-autoscaler:0.1.0", "args": ["executor"]}],
                 "restartPolicy": "Never"},
        "status": {"phase": phase, "conditions": conditions, "qosClass": "Burstable"},
    }
    return validate(pod)


def pod_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return validate({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": next_rv()}, "items": items})


def config_map(name: str, namespace: str = "analytics", *, binary: dict[str, str] | None = None, rv: str | None = None,
               labels: dict[str, str] | None = None, managers: list[tuple[str, str]] = ()) -> dict[str, Any]:
    md = meta(name, namespace, **({"labels": labels} if labels else {}))
    if rv is not None:
        md["resourceVersion"] = rv
    if managers:
        md["managedFields"] = [{"manager": m, "operation": "Update", "apiVersion": "v1", "time": t, "fieldsType": "FieldsV1",
                                "fieldsV1": {"f:binaryData": {}}} for m, t in managers]
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
    if binary is not None:
        obj["binaryData"] = binary
    return validate(obj)


def kube_api(url: str, sleeps: list[float] | None = None, calls: list[tuple[str, str, int | None]] | None = None) -> KubeApi:
    """The real gateway pointed at ``url``; retries sleep into ``sleeps`` instead of waiting."""
    configuration = one_try(client.Configuration(host=url.rstrip("/")))
    record = (lambda s: sleeps.append(s)) if sleeps is not None else (lambda s: None)
    return KubeApi(
        client.ApiClient(configuration),
        retrying=lambda: api_retrying(sleep=record),
        observe=(lambda verb, res, code: calls.append((verb, res, code))) if calls is not None else None,
    )
