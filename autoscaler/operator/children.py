"""The objects an app owns, as the operator applies them (server-side apply): pure functions.

* ConfigMap ``<name>-config``: ``autoscaler.yaml`` and the executors' pod template;
* ConfigMap ``<name>-state``: created empty, the daemon writes its state there;
* Service ``<name>``: headless, ``publishNotReadyAddresses`` (Prometheus and the operator must
  reach a daemon that is starting or stalled: that is when its metrics matter most);
* StatefulSet ``<name>``: one replica (0 when suspended), the daemon as the Spark driver.
  A StatefulSet, not a Deployment: it never runs two pods of one identity, and two drivers
  on one checkpoint would break exactly-once.

Every object carries an owner reference to the app (``controller: true``), so deleting the
app deletes them (garbage collection); the operator adds no finalizer and deletes nothing.
``blockOwnerDeletion`` is left unset: setting it needs ``update`` on the app's finalizers
(the OwnerReferencesPermissionEnforcement admission plugin), a right the operator does not have.
"""

from __future__ import annotations

from typing import Any

import yaml

from autoscaler.operator.config import (
    BLOCK_MANAGER_PORT,
    CONFIG_DIR,
    CONFIG_FILE,
    DRIVER_PORT,
    EXECUTOR_CONTAINER,
    OPERATOR_TOKENS_DIR,
    PIPELINES_DIR,
    USER_TOKENS_DIR,
    AppRef,
    autoscaler_yaml,
    stop_timeout_seconds,
)
from autoscaler.operator.model import SparkStreamingAppSpec, Toleration, spark_memory_mib
from autoscaler.operator.settings import OperatorSettings

API_VERSION = "streaming.sparkautoscaler.io/v1alpha1"
KIND = "SparkStreamingApp"
RESTART_HASH = "spark-autoscaler.io/restart-hash"
ROLE_LABEL, APP_LABEL = "spark-autoscaler.io/role", "spark-autoscaler.io/app"
RUN_AS = 185  # the official Spark image's user
STOP_GRACE_SECONDS = 60  # after the queries stopped: the session, the HTTP server


def labels(ref: AppRef, component: str = "daemon") -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "spark-autoscaler",
        "app.kubernetes.io/instance": ref.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "spark-autoscaler-operator",
    }


def selector(ref: AppRef) -> dict[str, str]:
    return {k: v for k, v in labels(ref).items() if k != "app.kubernetes.io/managed-by"}


def owner_reference(ref: AppRef) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "name": ref.name, "uid": ref.uid, "controller": True}


def _meta(ref: AppRef, name: str, component: str = "daemon") -> dict[str, Any]:
    return {"name": name, "namespace": ref.namespace, "labels": labels(ref, component), "ownerReferences": [owner_reference(ref)]}


def pod_security_context() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(read_only_root: bool = True) -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": read_only_root, "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]}}


def memory_request(spark_memory: str) -> str:
    """A pod's memory for a JVM of ``spark_memory`` (``2g``): plus Spark's overhead, 10 % and at least 384 MiB."""
    mib = spark_memory_mib(spark_memory)
    return f"{int(mib + max(384, mib * 0.10))}Mi"


def executor_pod_template(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> dict[str, Any]:
    """What Spark starts every executor pod from (``spark.kubernetes.executor.podTemplateFile``)."""
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,  # executors never call the API
        "securityContext": pod_security_context(),
        "containers": [
            {
                "name": EXECUTOR_CONTAINER,
                "securityContext": container_security_context(settings.app_defaults.executor_read_only_root_filesystem),
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "work-dir", "mountPath": "/opt/spark/work-dir"}],
            }
        ],
        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "work-dir", "emptyDir": {}}],
    }
    _place(pod_spec, spec.executor.node_selector, spec.executor.tolerations, None, spec.executor.priority_class_name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {**labels(ref, "executor"), ROLE_LABEL: "executor", APP_LABEL: ref.name}},
        "spec": pod_spec,
    }


def config_map(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(ref, f"{ref.name}-config"),
        "data": {
            "autoscaler.yaml": autoscaler_yaml(ref, spec, settings),
            "executor-pod-template.yaml": yaml.safe_dump(executor_pod_template(ref, spec, settings), sort_keys=True),
        },
    }


def state_config_map(ref: AppRef) -> dict[str, Any]:
    """Empty: the daemon writes ``binaryData`` (a field this apply never names, so never takes)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(ref, f"{ref.name}-state")}


def service(ref: AppRef, settings: OperatorSettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(ref, ref.name),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(ref),
            "ports": [{"name": "http", "port": settings.daemon.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def statefulset(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings, restart_hash: str) -> dict[str, Any]:
    config_args = ["run", "--config", CONFIG_FILE]
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # the driver binds to the pod IP (the daemon's default elsewhere is 127.0.0.1)
        {"name": "SPARK_LOCAL_IP", "value": "$(POD_IP)"},
        {"name": "HOME", "value": "/tmp"},
        *({"name": e.name, "value": e.value or ""} for e in spec.driver.env),
    ]
    mounts = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "operator-token", "mountPath": OPERATOR_TOKENS_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": f"{ref.name}-config"}},
        # whole Secrets, not subPath: a rotated token reaches the file, the daemon re-reads it
        {"name": "operator-token", "secret": {"secretName": settings.daemon.token_secret}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}},
    ]
    if spec.http.token_secret_ref is not None:
        mounts.append({"name": "user-tokens", "mountPath": USER_TOKENS_DIR, "readOnly": True})
        volumes.append({"name": "user-tokens", "secret": {"secretName": spec.http.token_secret_ref.name}})
    if spec.pipelines.config_map_ref is not None:
        mounts.append({"name": "pipelines", "mountPath": PIPELINES_DIR, "readOnly": True})
        volumes.append({"name": "pipelines", "configMap": {"name": spec.pipelines.config_map_ref.name}})
    memory = memory_request(spec.driver.memory)
    resources = {"requests": {"cpu": str(spec.driver.cores), "memory": memory}, "limits": {"memory": memory}}
    image_policy = {"imagePullPolicy": spec.image_pull_policy} if spec.image_pull_policy else {}
    http = {"httpGet": {"path": "/healthz", "port": "http"}}
    daemon = {
        "name": "daemon",
        "image": spec.image,
        **image_policy,
        "command": ["spark-autoscaler"],
        "args": [*config_args, "--http-host", "0.0.0.0", "--log-format", "json"],
        "env": env,
        "ports": [
            {"name": "http", "containerPort": settings.daemon.port, "protocol": "TCP"},
            {"name": "driver-rpc", "containerPort": DRIVER_PORT, "protocol": "TCP"},
            {"name": "blockmanager", "containerPort": BLOCK_MANAGER_PORT, "protocol": "TCP"},
        ],
        "resources": resources,
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",  # a failed start's last lines in the pod's status
        "startupProbe": {**http, "periodSeconds": 5, "failureThreshold": 60},
        "livenessProbe": {**http, "periodSeconds": 10, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5, "failureThreshold": 3},
    }
    check = {
        # the daemon's own start-up check (configuration, pipelines import, state readable and
        # writable): a bad spec fails here with the daemon's message (its last lines, as the
        # container's termination message, reach the pod's status). With one replica the
        # StatefulSet has deleted the running pod by then: the app is down until the spec is
        # mended and the failing pod deleted (docs/kubernetes.md, "Limits")
        "name": "check",
        "image": spec.image,
        **image_policy,
        "command": ["spark-autoscaler"],
        "args": [*config_args, "--check"],
        "env": env,
        "resources": resources,
        "volumeMounts": mounts,
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": spec.driver.service_account_name or settings.driver_service_account,
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": stop_timeout_seconds(spec) + STOP_GRACE_SECONDS,
        "initContainers": [check],
        "containers": [daemon],
        "volumes": volumes,
    }
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in spec.image_pull_secrets]
    _place(pod_spec, spec.driver.node_selector, spec.driver.tolerations, spec.driver.affinity, settings.app_defaults.driver_priority_class_name)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(ref, ref.name),
        "spec": {
            "replicas": 0 if spec.suspend else 1,
            "serviceName": ref.name,
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": selector(ref)},
            "template": {
                "metadata": {
                    "labels": {**spec.driver.pod_labels, **labels(ref)},
                    "annotations": {**spec.driver.pod_annotations, RESTART_HASH: restart_hash},
                },
                "spec": pod_spec,
            },
        },
    }


def desired_children(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings, restart_hash: str) -> list[dict[str, Any]]:
    """In the order they are applied: what the pod mounts comes before the pod."""
    return [config_map(ref, spec, settings), state_config_map(ref), service(ref, settings), statefulset(ref, spec, settings, restart_hash)]


def _place(pod_spec: dict[str, Any], node_selector: Any, tolerations: list[Toleration], affinity: Any, priority_class_name: str | None) -> None:
    """Where the pod may run, each field set only when the app asks for it."""
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in tolerations]
    if affinity:
        pod_spec["affinity"] = dict(affinity)
    if priority_class_name:
        pod_spec["priorityClassName"] = priority_class_name
