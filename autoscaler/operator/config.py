"""What a daemon is told: its ``autoscaler.yaml``, its Spark configuration and its executors' pod
template, all pure functions of the app and the operator's settings.

The configuration is checked here with the daemon's own loader (``validate_settings``), so a
spec the daemon would refuse is reported on the resource instead of in a crash-looping pod.
Files that exist only in the daemon's pod (token files, a mounted pipeline file) are not
checked here; the pod's init container (``run --check``) does, with the daemon's message.

Control-class fields (bounds, mode, dry run, policy parameters) are written too: they are the
values a new pod starts with, before the operator's first REST call reaches it. They do not
enter the restart hash, so changing them updates this file without rolling the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from autoscaler.core.settings import Settings, format_duration, parse_duration
from autoscaler.operator.model import SparkStreamingAppSpec
from autoscaler.operator.settings import OperatorSettings
from autoscaler.runtime.config import SettingsError, validate_settings

MASTER = "k8s://https://kubernetes.default.svc"
CONFIG_DIR = "/etc/spark-autoscaler/config"
CONFIG_FILE = f"{CONFIG_DIR}/autoscaler.yaml"
EXECUTOR_TEMPLATE = f"{CONFIG_DIR}/executor-pod-template.yaml"
OPERATOR_TOKENS_DIR = "/etc/spark-autoscaler/tokens/operator"
OPERATOR_TOKENS = f"{OPERATOR_TOKENS_DIR}/tokens"  # the key of the chart's Secret
USER_TOKENS_DIR = "/etc/spark-autoscaler/tokens/users"
PIPELINES_DIR = "/etc/spark-autoscaler/pipelines"
DRIVER_PORT, BLOCK_MANAGER_PORT = 7078, 7079
EXECUTOR_CONTAINER = "spark-kubernetes-executor"


@dataclass(frozen=True)
class AppRef:
    """Which app: its namespace, name and uid (the owner of its children)."""

    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, app: dict[str, Any]) -> AppRef:
        md = app["metadata"]
        return cls(md["namespace"], md["name"], md.get("uid", ""))

    @property
    def application(self) -> str:
        """The Spark app name and the metrics' ``application`` label: unique across namespaces."""
        return f"{self.namespace}-{self.name}"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def daemon_settings(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> dict[str, Any]:
    """The daemon's settings (``autoscaler.yaml``) as a mapping."""
    s = spec.scaling
    executors: dict[str, Any] = {"cores": spec.executor.cores}
    for key, value in (("min", s.min_executors), ("max", s.max_executors), ("initial", s.initial_executors)):
        if value is not None:
            executors[key] = value
    pipelines = dict(spec.settings.get("pipelines") or {})
    if spec.pipelines.config_map_ref is not None:
        pipelines["module"] = f"{PIPELINES_DIR}/{spec.pipelines.config_map_ref.key}"
    else:
        pipelines["module"] = spec.pipelines.module
    pipelines["checkpoint_root"] = spec.checkpoint_root
    token_files = [OPERATOR_TOKENS]
    if spec.http.token_secret_ref is not None:
        token_files.append(f"{USER_TOKENS_DIR}/{spec.http.token_secret_ref.key}")
    data: dict[str, Any] = {
        **{k: v for k, v in spec.settings.items() if k != "pipelines"},
        "request_timeout": s.request_timeout or format_duration(settings.app_defaults.request_timeout),
        "executors": executors,
        "pipelines": pipelines,
        "spark": {"master": MASTER, "app_name": ref.application, "conf": spark_conf(ref, spec, settings)},
        "http": {"host": "0.0.0.0", "port": settings.daemon.port, "token_files": token_files},
        "state": {"configmap": f"{ref.name}-state"},
    }
    data.setdefault("resource_wait_timeout", format_duration(settings.app_defaults.resource_wait_timeout))
    if s.mode is not None:
        data["mode"] = s.mode.value
    if s.dry_run is not None:
        data["dry_run"] = s.dry_run
    policy: dict[str, Any] = {}
    if s.policy.name is not None:
        policy["name"] = s.policy.name
    if s.policy.params is not None:
        policy["params"] = dict(s.policy.params)
    if policy:
        data["policy"] = policy
    return data


def spark_conf(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> dict[str, str]:
    """Spark on Kubernetes in client mode, the daemon as the driver (docs/kubernetes.md explains each key)."""
    s = spec.scaling
    initial = s.initial_executors if s.initial_executors is not None else max(1, s.min_executors or 1)
    conf = {
        "spark.submit.deployMode": "client",
        "spark.kubernetes.namespace": ref.namespace,
        "spark.kubernetes.container.image": spec.image,
        "spark.kubernetes.authenticate.executor.serviceAccountName": settings.executor_service_account,
        "spark.kubernetes.executor.podTemplateFile": EXECUTOR_TEMPLATE,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.executor.instances": str(initial),
        "spark.executor.cores": str(spec.executor.cores),
        "spark.kubernetes.executor.request.cores": str(spec.executor.cores),
        "spark.executor.memory": spec.executor.memory,
        "spark.driver.memory": spec.driver.memory,
        "spark.driver.port": str(DRIVER_PORT),
        "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
        "spark.local.dir": "/tmp/spark-local",  # the root filesystem is read-only
        "spark.jars.ivy": "/tmp/.ivy2",
        "spark.metrics.namespace": ref.application,
        "spark.kubernetes.executor.deleteOnTermination": "true",
        # Spark's allocator would fight requestTotalExecutors; a user may still turn it on
        # (the daemon then selects reactive mode itself: DynamicAllocationOn)
        "spark.dynamicAllocation.enabled": "false",
    }
    if s.max_executors is not None:
        # pending pods count against quotas; the default is unbounded (taken at the next restart)
        conf["spark.kubernetes.allocation.maxPendingPods"] = str(s.max_executors)
    if spec.image_pull_policy is not None:
        conf["spark.kubernetes.container.image.pullPolicy"] = spec.image_pull_policy
    if spec.image_pull_secrets:
        conf["spark.kubernetes.container.image.pullSecrets"] = ",".join(spec.image_pull_secrets)
    conf.update(spec.spark_conf)
    return conf


def autoscaler_yaml(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> str:
    return yaml.safe_dump(daemon_settings(ref, spec, settings), sort_keys=True)


def check_daemon_settings(ref: AppRef, spec: SparkStreamingAppSpec, settings: OperatorSettings) -> tuple[Settings | None, list[str]]:
    """The daemon's own verdict on its configuration, each problem named by its spec field.

    A policy this operator does not know may come with the user's image (a plugin): that is
    left to the pod's ``run --check``, and not reported here.
    """
    data = daemon_settings(ref, spec, settings)
    try:
        return validate_settings(data, check_files=False), []
    except SettingsError as exc:
        problems = [p for p in exc.problems if not _unknown_policy(p)]
        if not problems:
            return None, []
        return None, [_spec_field(p) for p in problems]


def _unknown_policy(problem: str) -> bool:
    return problem.startswith("policy: unknown policy")


def _spec_field(problem: str) -> str:
    """A daemon problem (``normalize.dead_band: ...``) named by the spec field that set it."""
    key, _, message = problem.partition(": ")
    if key == "request_timeout":
        return f"spec.scaling.requestTimeout: {message}"
    if key == "pipelines.checkpoint_root":  # spec.settings may not set it: the operator writes spec.checkpointRoot there
        return f"spec.checkpointRoot: {message}"
    if key.split(".")[0] == "policy":
        return f"spec.scaling.policy: {message}"
    if key.split(".")[0] == "executors":
        return f"spec.scaling: {problem}"
    return f"spec.settings.{problem}"


def stop_timeout_seconds(spec: SparkStreamingAppSpec) -> int:
    """``pipelines.stop_timeout`` of the daemon (default 120 s): how long its SIGTERM may take."""
    value = (spec.settings.get("pipelines") or {}).get("stop_timeout", "120s")
    try:
        return int(parse_duration(value).total_seconds())
    except ValueError:
        return 120
