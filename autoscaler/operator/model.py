"""The ``SparkStreamingApp`` spec as the operator reads it: a pydantic model of the CRD.

The CRD (``helm/spark-autoscaler/crds/sparkstreamingapps.yaml``) is what the API server
checks; this model is what the operator checks before acting. The two agree on every field
(``tests/unit/operator/test_crd.py`` checks samples and generated specs against both); the
model adds what a schema cannot say, each with a message naming the field:

* durations are the daemon's (``1h30m``, at most ten years), ``scaling.requestTimeout`` is more
  than 0 (the daemon's ``PositiveDuration``) and a trigger lies within 0.1 s .. 1 day, as the
  daemon's REST API takes it;
* ``minExecutors`` does not exceed ``maxExecutors``, and ``initialExecutors`` and
  ``manualExecutors`` lie within them, each bound as the daemon holds it (its default,
  ``ExecutorSettings``, where the spec gives none; the check of the daemon's settings,
  ``config.check_daemon_settings``, says the same of the first two in the daemon's words, and a
  ``manualExecutors`` outside was refused only by the daemon's REST API);
* ``sparkConf`` and ``settings`` do not set what the operator writes from other fields (the
  message names the field to use instead), and ``settings.pipelines`` is a mapping;
* ``checkpointRoot`` is a URI or an absolute path (a mounted volume): a relative one is under the
  pod's working directory, lost with the pod;
* what the API server checks on the children and a schema of the CR cannot: label and
  annotation syntax, tolerations (a key or Exists, a value only with Equal, tolerationSeconds only with NoExecute), the driver's
  ``env`` names once each and none the operator sets; and what
  Spark refuses at start: a JVM's memory of at least 450m.

The chart copies these rules (``sa.operatorSpecChecks`` in ``templates/_helpers.tpl``), so an
app of its values the operator would refuse fails the render instead of being installed;
``tests/unit/chart/test_chart_schema.py`` checks the two refuse the same specs.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from autoscaler.core.model import JAVA_LONG_MAX, Mode
from autoscaler.core.settings import MAX_EXECUTORS, CheckpointRoot, Duration, ExecutorSettings, PositiveDuration, is_uri, local_path, parse_duration

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
CONFIG_KEY = r"^[-._a-zA-Z0-9]+$"
DURATION = r"^([0-9]+(\.[0-9]+)?d)?([0-9]+(\.[0-9]+)?h)?([0-9]+(\.[0-9]+)?m)?([0-9]+(\.[0-9]+)?s)?([0-9]+(\.[0-9]+)?ms)?$"
SPARK_MEMORY = r"^[1-9][0-9]*[kmgtKMGT]$"
# A container image reference as the container runtimes parse it (the grammar of
# github.com/distribution/reference): an optional registry host[:port], lower-case path
# components, an optional :tag and @digest. "app:1.0:0.1.0", "App:1", "app:1.0 beta" and
# "ghcr.io//app" are refused here instead of failing each pod with InvalidImageName.
IMAGE_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
IMAGE_HOST = r"[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
IMAGE_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
IMAGE_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE = rf"^(?:{IMAGE_HOST}/)?{IMAGE_PATH}(?::{IMAGE_TAG})?(?:@{IMAGE_DIGEST})?$"
MIN_TRIGGER, MAX_TRIGGER = timedelta(milliseconds=100), timedelta(days=1)
DAEMON_EXECUTORS = ExecutorSettings()  # the daemon's executor bounds where a spec gives none

# Spark configuration the operator writes itself, and where to set it instead
OWNED_SPARK_CONF = {
    "spark.master": "the operator runs the daemon as the driver on Kubernetes",
    "spark.submit.deployMode": "the daemon is the driver (client mode)",
    "spark.kubernetes.namespace": "executors run in the app's namespace",
    "spark.kubernetes.container.image": "set spec.image",
    "spark.kubernetes.container.image.pullPolicy": "set spec.imagePullPolicy",
    "spark.kubernetes.container.image.pullSecrets": "set spec.imagePullSecrets",
    "spark.kubernetes.executor.podTemplateFile": "set spec.executor",
    "spark.kubernetes.authenticate.executor.serviceAccountName": "the chart's executor service account",
    "spark.kubernetes.driver.pod.name": "the daemon sets it from its pod",
    "spark.executor.cores": "set spec.executor.cores",
    "spark.kubernetes.executor.request.cores": "set spec.executor.cores",
    "spark.executor.memory": "set spec.executor.memory",
    "spark.driver.memory": "set spec.driver.memory",
    "spark.executor.instances": "set spec.scaling.initialExecutors",
    "spark.driver.port": "fixed (7078) for the network policies",
    "spark.blockManager.port": "fixed (7079) for the network policies",
    "spark.app.name": "set to <namespace>-<name>, the application label of the metrics",
}
# daemon settings the operator writes from other fields
OWNED_SETTINGS = {
    "mode": "set spec.scaling.mode",
    "dry_run": "set spec.scaling.dryRun",
    "request_timeout": "set spec.scaling.requestTimeout",
    "executors": "set spec.scaling and spec.executor",
    "policy": "set spec.scaling.policy",
    "spark": "set spec.sparkConf",
    "http": "set spec.http",
    "state": "the operator keeps the state in the ConfigMap <name>-state",
}
OWNED_PIPELINE_SETTINGS = {"module": "set spec.pipelines", "checkpoint_root": "set spec.checkpointRoot"}
# the driver's environment the operator writes (children.statefulset): a second entry of a name
# is refused by the API server's apply, which left the children half updated
OPERATOR_ENV = ("POD_NAME", "POD_NAMESPACE", "POD_IP", "SPARK_LOCAL_IP", "HOME")
# Spark refuses a JVM with less (UnifiedMemoryManager: 1.5 x its 300 MiB reserved): the pod
# started and failed, with one replica after the running one was gone
MIN_SPARK_MEMORY_MIB = 450
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_LABEL_VALUE = re.compile(rf"(?:{_LABEL_NAME})?")
_QUALIFIED_NAME = re.compile(rf"(?:[a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?{_LABEL_NAME}")
# an app's children are named after it: the Service a DNS-1035 label, the StatefulSet's pods'
# controller-revision-hash label <name>-<10 characters> within 63
APP_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_APP_NAME = 52


def _key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if not _QUALIFIED_NAME.fullmatch(key) or len(name) > 63 or len(prefix) > 253:
        return f"key {key!r} is not a Kubernetes label or annotation key ([prefix/]name, name at most 63 letters, digits, '-', '_', '.')"
    return None


def _value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return f"value {value!r} is not a Kubernetes label value (at most 63 letters, digits, '-', '_', '.')"
    return None


def _labels(labels: dict[str, str]) -> dict[str, str]:
    for key, value in labels.items():
        if problem := _key_problem(key):
            raise ValueError(problem)
        if problem := _value_problem(value):
            raise ValueError(f"{key}: {problem}")
    return labels


def _annotation_keys(annotations: dict[str, str]) -> dict[str, str]:
    for key in annotations:
        if problem := _key_problem(key):
            raise ValueError(problem)
    return annotations


def spark_memory_mib(memory: str) -> float:
    """MiB of a Spark memory string (``2g``, ``512m``; ``SPARK_MEMORY``'s form)."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    return int(memory[:-1]) * units[memory[-1].lower()]


def _spark_memory(memory: str) -> str:
    if spark_memory_mib(memory) < MIN_SPARK_MEMORY_MIB:
        raise ValueError(f"{memory!r} is less than the {MIN_SPARK_MEMORY_MIB}m a Spark JVM starts with")
    return memory


Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Annotations = Annotated[dict[str, str], AfterValidator(_annotation_keys)]
SparkMemory = Annotated[str, Field(pattern=SPARK_MEMORY), AfterValidator(_spark_memory)]


def _read_as(daemon_type: Any) -> AfterValidator:
    """The text kept as written, once the daemon's own type has read it: its range, its message."""
    adapter: TypeAdapter[Any] = TypeAdapter(daemon_type)

    def check(text: str) -> str:
        try:
            adapter.validate_python(text)
        except ValidationError as exc:
            raise ValueError("; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())) from None
        return text

    return AfterValidator(check)


def _lasting(root: str) -> str:
    """A checkpoint root that outlives the pod: a URI (``s3a://``...) or an absolute path."""
    if not is_uri(root) and not local_path(root).is_absolute():
        raise ValueError(f"{root!r} is relative: under the pod's working directory, lost with the pod; give a URI (s3a://bucket/ck) "
                         "or the absolute path of a mounted volume")
    return root


DurationText = Annotated[str, Field(min_length=1, pattern=DURATION), _read_as(Duration)]
# more than 0, as the daemon's request_timeout (and the CRD's second pattern) has it
PositiveDurationText = Annotated[str, Field(min_length=1, pattern=DURATION), _read_as(PositiveDuration)]
Name = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
Count = Annotated[int, Field(ge=0, le=MAX_EXECUTORS, strict=True)]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


class ConfigMapRef(_Spec):
    name: Name
    key: Annotated[str, Field(min_length=1, max_length=253, pattern=CONFIG_KEY)] = "pipelines.py"


class PipelinesSpec(_Spec):
    module: Annotated[str, Field(min_length=1)] | None = None
    config_map_ref: ConfigMapRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PipelinesSpec:
        if (self.module is None) == (self.config_map_ref is None):
            raise ValueError("set exactly one of pipelines.module and pipelines.configMapRef")
        return self


class EnvVar(_Spec):
    name: Annotated[str, Field(min_length=1, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")]
    value: str | None = None


class Toleration(_Spec):
    """A Kubernetes toleration, its fields and their values as the API server takes them: a
    misspelt one was refused only when the pods were made (the driver's StatefulSet; for the
    executors, by Spark, its executors never coming)."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = None
    toleration_seconds: Annotated[int, Field(strict=True)] | None = None

    @model_validator(mode="after")
    def _as_kubernetes_matches(self) -> Toleration:
        """The API server's rules (ValidateTolerations): no key matches every taint, with Exists
        only; Exists matches any value, so it takes none; a key is a label key, Equal's value a
        label value; a time to stay only where a taint evicts (NoExecute)."""
        exists = self.operator == "Exists"
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            effect = repr(self.effect) if self.effect else "none"
            raise ValueError(f"effect must be NoExecute when tolerationSeconds is set (only NoExecute evicts), got {effect}")
        if not self.key and not exists:
            raise ValueError("operator must be Exists when key is empty (which tolerates every taint)")
        if self.key and (problem := _key_problem(self.key)):
            raise ValueError(problem)
        if exists and self.value:
            raise ValueError(f"value must be empty when operator is Exists, got {self.value!r}")
        if not exists and self.value and (problem := _value_problem(self.value)):
            raise ValueError(problem)
        return self


class DriverSpec(_Spec):
    cores: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    memory: SparkMemory = "1g"
    service_account_name: Name | None = None
    node_selector: Labels = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None
    pod_annotations: Annotations = Field(default_factory=dict)
    pod_labels: Labels = Field(default_factory=dict)
    env: Annotated[list[EnvVar], Field(max_length=64)] = Field(default_factory=list)

    @field_validator("env")
    @classmethod
    def _env_names_once(cls, env: list[EnvVar]) -> list[EnvVar]:
        names = [e.name for e in env]
        if owned := sorted({n for n in names if n in OPERATOR_ENV}):
            raise ValueError(f"{', '.join(owned)}: set by the operator")
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"{', '.join(twice)} listed more than once")
        return env


class ExecutorSpec(_Spec):
    cores: Annotated[int, Field(ge=1, le=64, strict=True)] = 1
    memory: SparkMemory = "1g"
    node_selector: Labels = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    priority_class_name: Annotated[str, Field(min_length=1, max_length=253)] | None = None


class PolicySpec(_Spec):
    name: Annotated[str, Field(min_length=1)] | None = None
    params: dict[str, Any] | None = None


class ScalingSpec(_Spec):
    mode: Mode | None = None
    min_executors: Count | None = None
    max_executors: Annotated[int, Field(ge=1, le=MAX_EXECUTORS, strict=True)] | None = None
    initial_executors: Count | None = None
    manual_executors: Count | None = None
    paused: Annotated[bool, Field(strict=True)] | None = None
    dry_run: Annotated[bool, Field(strict=True)] | None = None
    request_timeout: PositiveDurationText | None = None
    policy: PolicySpec = Field(default_factory=PolicySpec)

    @model_validator(mode="after")
    def _bounds(self) -> ScalingSpec:
        """The bounds as the daemon holds them: the spec's, else the daemon's defaults (the
        operator writes only the bounds the spec gives into the daemon's settings)."""
        lo = self.min_executors if self.min_executors is not None else DAEMON_EXECUTORS.min
        hi = self.max_executors if self.max_executors is not None else DAEMON_EXECUTORS.max
        if lo > hi:
            if self.min_executors is not None and self.max_executors is not None:
                raise ValueError("scaling.minExecutors must not exceed scaling.maxExecutors")
            raise ValueError(f"scaling.minExecutors ({lo}) exceeds the daemon's default maxExecutors ({hi}): set scaling.maxExecutors too")
        for name, value in (("initialExecutors", self.initial_executors), ("manualExecutors", self.manual_executors)):
            if value is not None and not lo <= value <= hi:
                raise ValueError(f"scaling.{name} ({value}) must lie within minExecutors and maxExecutors, [{lo}, {hi}] (the daemon's defaults where unset)")
        return self


class QuerySpec(_Spec):
    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")]
    max_rows_per_batch: Annotated[int, Field(ge=1, le=JAVA_LONG_MAX, strict=True)] | None = None
    trigger_interval: DurationText | None = None

    @field_validator("trigger_interval")
    @classmethod
    def _trigger_range(cls, value: str | None) -> str | None:
        if value is not None and not MIN_TRIGGER <= parse_duration(value) <= MAX_TRIGGER:
            raise ValueError(f"must lie within 100ms and 24h (the daemon's REST API takes no other), got {value!r}")
        return value


class TokenSecretRef(_Spec):
    name: Name
    key: Annotated[str, Field(min_length=1, max_length=253, pattern=CONFIG_KEY)] = "tokens"


class HttpSpec(_Spec):
    token_secret_ref: TokenSecretRef | None = None


class SparkStreamingAppSpec(_Spec):
    image: Annotated[str, Field(min_length=1, max_length=1024, pattern=IMAGE)]
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    image_pull_secrets: Annotated[list[Name], Field(max_length=16)] = Field(default_factory=list)
    pipelines: PipelinesSpec
    checkpoint_root: Annotated[str, Field(min_length=1), _read_as(CheckpointRoot), AfterValidator(_lasting)]  # not blank (the CRD's pattern \S)
    spark_conf: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    driver: DriverSpec = Field(default_factory=DriverSpec)
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    scaling: ScalingSpec = Field(default_factory=ScalingSpec)
    queries: Annotated[list[QuerySpec], Field(max_length=64)] = Field(default_factory=list)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] | None = None
    http: HttpSpec = Field(default_factory=HttpSpec)
    suspend: Annotated[bool, Field(strict=True)] = False

    @field_validator("spark_conf")
    @classmethod
    def _not_owned_conf(cls, conf: dict[str, str]) -> dict[str, str]:
        owned = [f"{key}: set by the operator ({OWNED_SPARK_CONF[key]})" for key in sorted(conf) if key in OWNED_SPARK_CONF]
        if owned:
            raise ValueError("; ".join(owned))
        return conf

    @field_validator("settings")
    @classmethod
    def _not_owned_settings(cls, settings: dict[str, Any]) -> dict[str, Any]:
        owned = [f"{key}: written by the operator ({OWNED_SETTINGS[key]})" for key in sorted(settings) if key in OWNED_SETTINGS]
        pipelines = settings.get("pipelines")
        if pipelines is not None and not isinstance(pipelines, dict):  # the operator adds its keys to it
            owned.append(f"pipelines: must be a mapping of pipeline settings, got {pipelines!r}")
        if isinstance(pipelines, dict):
            owned += [f"pipelines.{key}: written by the operator ({why})" for key, why in OWNED_PIPELINE_SETTINGS.items() if key in pipelines]
        if owned:
            raise ValueError("; ".join(owned))
        return settings

    @field_validator("queries")
    @classmethod
    def _unique_queries(cls, queries: list[QuerySpec]) -> list[QuerySpec]:
        names = [q.name for q in queries]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"query {', '.join(twice)} listed more than once")
        return queries


def parse_spec(spec: Any) -> tuple[SparkStreamingAppSpec | None, list[str]]:
    """The spec, or the problems with it: one ``spec.<field>: <message>`` line each."""
    try:
        return SparkStreamingAppSpec.model_validate(spec), []
    except ValidationError as exc:
        return None, [_problem(e) for e in exc.errors()]


def _problem(err: Any) -> str:
    loc = ".".join(str(p) for p in ("spec", *err["loc"]) if not str(p).startswith("function-"))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field"
    return f"{loc}: {msg}"


def spec_json(spec: SparkStreamingAppSpec) -> dict[str, Any]:
    """The spec as the CR writes it (camelCase, unset fields left out)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
