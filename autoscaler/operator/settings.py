"""The operator's own configuration: a YAML file the chart renders (``--config``), then flags.

Declared once here with defaults and descriptions; an unknown key or a bad value is an error
naming the key (``operator.leaseDuration: ...``), as the daemon's settings are.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Mapping

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from autoscaler.core.settings import Duration, NumbersNotBooleans, PositiveDuration, format_duration, format_validation_error
from autoscaler.k8s.leader import LeaseTimings
from autoscaler.runtime.config import ConfigFileError, read_yaml_mapping

NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Namespace = Annotated[str, Field(min_length=1, max_length=63, pattern=NAMESPACE)]
Name = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
# the Kubernetes watch's timeoutSeconds is whole seconds, and 0 means the API server's default
MIN_WATCH_TIMEOUT = timedelta(seconds=1)
# more than 0 is not enough: a resync of 10 us spins as 0 does, a daemon call of 0.5 ms always times out
MIN_RESYNC_INTERVAL = timedelta(seconds=1)
MIN_DAEMON_TIMEOUT = timedelta(milliseconds=100)


def _at_least(value: timedelta, least: timedelta, why: str) -> timedelta:
    if value < least:
        raise ValueError(f"must be at least {format_duration(least)} ({why}), got {format_duration(value)}")
    return value


class OperatorSettingsError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid operator configuration:\n" + "\n".join(f"  - {p}" for p in problems))


class _Model(NumbersNotBooleans):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True, validate_default=True)


class LeaderElection(_Model):
    enabled: bool = Field(True, description="Run a Lease election so that one replica acts; off: run exactly one replica.")
    lease_name: Name = Field("spark-autoscaler-operator", description="The Lease in the operator's namespace.")
    lease_namespace: Annotated[str, Field(max_length=63, pattern=r"^$|" + NAMESPACE)] = Field(
        "", description="The Lease's namespace; empty: the operator pod's."
    )
    # at most an hour (the chart's maximum too): a failover slower than that is none
    lease_duration: int = Field(15, ge=1, le=3600, description="Seconds a leader's Lease lasts without renewal (client-go's default).")
    renew_deadline: int = Field(10, ge=1, le=3600, description="Seconds a leader keeps trying to renew before it gives up.")
    retry_period: int = Field(2, ge=1, le=3600, description="Seconds between two tries.")

    @property
    def timings(self) -> LeaseTimings:
        return LeaseTimings(self.lease_duration, self.renew_deadline, self.retry_period)

    @model_validator(mode="after")
    def _timings(self) -> LeaderElection:
        # checked only when on, as the chart checks them: timings a disabled election never uses
        # do not stop the operator (--leader-election turns it on, and they are checked then)
        if self.enabled and (problems := self.timings.problems()):
            raise ValueError("; ".join(problems))
        return self


class AppDefaults(_Model):
    request_timeout: PositiveDuration = Field(  # the daemon's request_timeout: it refuses 0
        timedelta(minutes=5),
        description="An app's scaling.requestTimeout when it sets none: long enough for a new node and a ~1 GB image pull.",
    )
    resource_wait_timeout: Duration = Field(timedelta(minutes=5), description="How long a starting daemon waits for its first executors.")
    driver_priority_class_name: str = Field(
        "", max_length=253, pattern=r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="PriorityClass of the driver pods, a DNS subdomain (empty: none).",
    )
    executor_read_only_root_filesystem: bool = Field(
        True, description="Executors' root filesystem read-only (their scratch space is an emptyDir); off if a library writes elsewhere."
    )


class DaemonAccess(_Model):
    port: int = Field(8090, ge=1, le=65535, description="The daemons' HTTP port (REST API, metrics, health).")
    timeout: PositiveDuration = Field(
        timedelta(seconds=5), description=f"Timeout of one request to a daemon (at least {format_duration(MIN_DAEMON_TIMEOUT)}: less fails every call)."
    )
    token_file: Path = Field(
        Path("/etc/spark-autoscaler/operator-token/tokens"),
        description="The control token file (the chart's Secret, mounted): the line `k8s-operator TOKEN` is the operator's.",
    )
    identity: str = Field("k8s-operator", description="The token's name: who the daemons' audit trail says changed what.")
    token_secret: Name = Field(
        "spark-autoscaler-control-token", description="The Secret (in every app namespace) the daemons mount their token file from."
    )

    @field_validator("timeout")
    @classmethod
    def _long_enough(cls, value: timedelta) -> timedelta:
        return _at_least(value, MIN_DAEMON_TIMEOUT, "a daemon's answer takes milliseconds")


class OperatorSettings(_Model):
    namespaces: Annotated[list[Namespace], Field(min_length=1)] = Field(
        default_factory=lambda: ["default"], description="Namespaces whose SparkStreamingApps this operator runs (a Role in each)."
    )
    workers: int = Field(4, ge=1, le=32, description="Apps reconciled at once.")
    resync_interval: PositiveDuration = Field(
        timedelta(seconds=30),
        description=f"Every app is reconciled (and its daemon polled) this often (at least {format_duration(MIN_RESYNC_INTERVAL)}: less spins the resync loop).",
    )
    watch_timeout: Duration = Field(
        timedelta(minutes=5), description=f"A watch is renewed from its resourceVersion after this long (at least {MIN_WATCH_TIMEOUT.seconds}s)."
    )
    unreachable_after: int = Field(3, ge=1, description="Failed polls in a row before a daemon counts as unreachable.")
    events_repeat_interval: Duration = Field(
        timedelta(minutes=30), description="The same Event is not repeated within this time (its count catches up afterwards)."
    )
    metrics_port: int = Field(8080, ge=0, le=65535, description="Port of the operator's /metrics, /healthz and /readyz (0: none).")
    driver_service_account: Name = Field("spark-autoscaler-driver", description="Service account of the driver pods (the chart's).")
    executor_service_account: Name = Field("spark-autoscaler-executor", description="Service account of the executor pods (the chart's).")
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    app_defaults: AppDefaults = Field(default_factory=AppDefaults)
    daemon: DaemonAccess = Field(default_factory=DaemonAccess)

    @field_validator("resync_interval")
    @classmethod
    def _not_spinning(cls, value: timedelta) -> timedelta:
        return _at_least(value, MIN_RESYNC_INTERVAL, "less spins the resync loop")

    @field_validator("watch_timeout")
    @classmethod
    def _whole_seconds(cls, value: timedelta) -> timedelta:
        # the watch takes whole seconds (timeoutSeconds): under 1 s it was sent as 0, which the
        # API server reads as its own default, not as what was set
        if value < MIN_WATCH_TIMEOUT:
            raise ValueError(f"must be at least {MIN_WATCH_TIMEOUT.seconds}s (the watch takes whole seconds), got {format_duration(value)}")
        return value


def load_operator_settings(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> OperatorSettings:
    """The YAML file (camelCase keys, as the chart writes them) with ``overrides`` (flags) over it."""
    data: dict[str, Any] = {}
    if path is not None:
        try:  # the daemon's reader: a file missing, not UTF-8, not YAML or no mapping is named
            data = read_yaml_mapping(path)
        except ConfigFileError as exc:
            raise OperatorSettingsError([str(exc)]) from None
    for dotted, value in (overrides or {}).items():
        if value is not None:
            _override(data, dotted, value)
    try:
        return OperatorSettings.model_validate(data)
    except ValidationError as exc:
        # as the daemon's settings tell theirs: with the value as read (`namespaces.0: String
        # should match pattern ...` did not say which namespace)
        raise OperatorSettingsError([format_validation_error(e) for e in exc.errors()]) from None


def _override(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set a flag's dotted key over the file's. A section the file sets to no mapping
    (``leaderElection: 5``, or empty) is left for validation to name, not indexed."""
    node = data
    *parents, last = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return
    node[last] = value
