"""Configuration, declared once: every setting's type, default and description.

The declarations are pure data; :mod:`autoscaler.runtime.config` loads them (defaults < the
YAML file < ``SPARK_AUTOSCALER_*`` environment variables < command-line flags), checks what
needs the outside world (files, the policy registry) and names every problem by key.
``docs/settings.md`` is generated from these declarations (``spark-autoscaler settings-doc``).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import reprlib
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Mapping, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)

from autoscaler.core.model import Mode

# a number of seconds, or parts such as 1h30m (Prometheus and Go write them so): largest unit first
_NUMBER = r"(\d+(?:\.\d+)?)"
_PART = re.compile(_NUMBER + r"\s*(ms|s|m|h|d)")
_SECONDS = re.compile(r"\s*" + _NUMBER + r"\s*")
_PARTS = re.compile(r"\s*(?:" + _PART.pattern + r"\s*)+")
_EXPECTED = "expected a duration such as 30s, 5m, 1h or 1h30m"
# longer durations are no setting anyone means, and "now minus" them overflows the calendar
MAX_DURATION = timedelta(days=3650)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration_seconds(text: str) -> float:
    """Seconds in ``text``: ``90``, ``250ms``, ``1.5h``, ``1h30m``, ``2m30s``, ``1d12h``."""
    if m := _SECONDS.fullmatch(text):
        return float(m.group(1))
    if not _PARTS.fullmatch(text):
        raise ValueError(f"{_EXPECTED}, got {text!r}")
    parts = _PART.findall(text)
    sizes = [_UNIT_SECONDS[unit] for _, unit in parts]
    if any(a <= b for a, b in pairwise(sizes)):
        raise ValueError(f"{_EXPECTED} (each unit once, the largest first), got {text!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def parse_duration(value: Any) -> timedelta:
    """Accept ``timedelta``, a number of seconds, or a string such as ``250ms``, ``30s``, ``5m``, ``1h``, ``1h30m``."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError(f"{_EXPECTED}, got a boolean")
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _duration_seconds(value)
    else:
        raise ValueError(f"{_EXPECTED}, got {value!r}")
    if not math.isfinite(seconds):
        raise ValueError(f"duration must be a finite number of seconds, got {value!r}")
    if seconds < 0:
        raise ValueError(f"duration must not be negative, got {value!r}")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"duration must be at most {MAX_DURATION.days}d (about ten years), got {value!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest of ``2h``, ``5m`` or seconds that :func:`parse_duration` reads back exactly."""
    seconds = value.total_seconds()
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    # microseconds, the resolution of a timedelta; not {:g}, which rounds to 6 digits (1234567.5
    # became 1.23457e+06, a text no duration parser reads) and drops fractions (100000.25 -> 100000)
    return f"{seconds:.6f}".rstrip("0").rstrip(".") + "s"


Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str)]


def _more_than_zero(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"must be more than 0, got {format_duration(value)}")
    return value


# a timeout or an interval that 0 would break: not "never", but "at once" (every call fails, a loop spins)
PositiveDuration = Annotated[Duration, AfterValidator(_more_than_zero)]


# a scheme (RFC 3986) and ":" before any "/": storage Spark reaches through a Hadoop file system.
# Hadoop's Path reads a scheme the same way, so "hdfs:/ck" (the default name node) is one too.
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*:)(//)?")


def is_uri(location: str | os.PathLike[str]) -> bool:
    """Whether a checkpoint location is a URI (``s3a://``, ``gs://``, ``hdfs://``, ``hdfs:/``,
    ``abfss://``...) to hand to Spark as written: never a local path (``Path`` makes ``s3a://b/ck``
    the relative ``s3a:/b/ck``). A ``file:`` URI is no such URI: it names a local directory
    (:func:`local_path`)."""
    text = os.fspath(location)
    return _URI.match(text) is not None and not text.lower().startswith("file:")


def uri_key(uri: str) -> str:
    """A URI without its trailing slashes, never those of its scheme (``hdfs:///`` stays
    ``hdfs://``, ``hdfs:/ck/`` is ``hdfs:/ck``): one spelling per place, to compare and to join."""
    match = _URI.match(uri)
    assert match is not None, uri
    return match.group(0) + uri[match.end():].rstrip("/")


def _local_text(location: str | os.PathLike[str]) -> str:
    """A local location's path as text: a ``file:`` URI (``file:///w/ck``, ``file:/w/ck``) its path."""
    text = os.fspath(location)
    return urlsplit(text).path if text.lower().startswith("file:") else text


def local_path(location: str | os.PathLike[str]) -> Path:
    """A local checkpoint location as a path; a ``file:`` URI (``file:///w/ck``, ``file:/w/ck``) as its path."""
    return Path(_local_text(location))


def _checkpoint_root(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        # the union's own check named its internals (lax-or-strict[...]) twice
        raise ValueError("must name a directory or a URI as text (checkpoints, s3a://bucket/checkpoints)")
    if is_uri(value):
        return value
    path = _local_text(value)
    if not path.strip():
        # Path("") is Path("."): every query would checkpoint straight into the working directory
        raise ValueError("must name a directory or a URI (s3a://bucket/checkpoints), got an empty value")
    return Path(path)


def _trimmed(value: Any) -> Any:
    # ` /data/state.json` is a relative path starting with a space: the file went under the working
    # directory, and `checkpoint_root: "/ck "` made a directory whose name ends in a space
    if isinstance(value, str) and value.strip() and value != value.strip():  # only spaces: empty, told as such
        raise ValueError("has a space at its start or end")  # the value told where it is no secret (format_validation_error)
    return value


# a URI stays its text, anything else is a local directory (a file: URI its path)
CheckpointRoot = Annotated[Path | str, BeforeValidator(_checkpoint_root), BeforeValidator(_trimmed)]
# a file's name as written: no space around it
FileName = Annotated[Path, BeforeValidator(_trimmed)]


def _takes_only_numbers(annotation: Any) -> bool:
    """``int``, ``float``, or either or none of them (``int | None``)."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not NoneType]
        return bool(args) and all(a in (int, float) for a in args)
    return False


class NumbersNotBooleans(BaseModel):
    """A model whose number fields refuse a boolean. pydantic takes ``True`` for 1, and YAML reads
    ``yes``, ``no``, ``on`` and ``off`` as booleans: ``dead_band: on`` was 1.0 (every change under
    100 % ignored), ``http.port: yes`` port 1."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name and _takes_only_numbers(cls.model_fields[info.field_name].annotation):
            raise ValueError(f"expected a number, got the boolean {str(value).lower()} (YAML reads yes, no, on and off as booleans)")
        return value


class _Model(NumbersNotBooleans):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)


MIN_RECONCILE_INTERVAL = timedelta(milliseconds=100)

# far beyond any Spark application, well within the Java int Spark's executor requests take
MAX_EXECUTORS = 100_000
# a step of this factor reaches MAX_EXECUTORS from one executor: larger lifts no further limit, and
# an infinite one passed validation only to overflow math.ceil on every tick (Flink's default, too)
MAX_SCALE_UP_FACTOR = float(MAX_EXECUTORS)
# a catch-up batch bounded to more triggers than this is not bounded (an infinite one overflowed)
MAX_BATCH_TRIGGERS = 1000.0


class ExecutorSettings(_Model):
    min: int = Field(1, ge=0, le=MAX_EXECUTORS, description="Fewest executors kept in active mode.")
    max: int = Field(8, ge=1, le=MAX_EXECUTORS, description="Most executors requested in active mode.")
    initial: int | None = Field(
        None, ge=0, le=MAX_EXECUTORS, description="Executors to wait for at start-up; defaults to `min` (at least 1)."
    )
    cores: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Cores per executor; defaults to `spark.executor.cores`, else the cores of a `local-cluster[N,C,M]` master, else 1.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ExecutorSettings:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        if self.initial is not None and not self.min <= self.initial <= self.max:
            raise ValueError(f"initial ({self.initial}) must lie within [min, max] = [{self.min}, {self.max}]")
        return self

    @property
    def start_count(self) -> int:
        return self.initial if self.initial is not None else max(1, self.min)


class PolicySettings(_Model):
    name: str = Field("default", description="Policy by registered name (`spark-autoscaler policies` lists them).")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Parameters of the chosen policy, validated by the policy."
    )


class NormalizeSettings(_Model):
    stabilization: Duration = Field(
        timedelta(seconds=20), description="No scale-down within this time after the previous executor change."
    )
    scale_up_stabilization: Duration = Field(
        timedelta(0), description="No scale-up within this time after the previous executor change."
    )
    scale_down_delay: Duration = Field(
        timedelta(seconds=60),
        description="A scale-down waits this long after it is first proposed and then uses the largest "
        "count recommended meanwhile (when that count leaves the window within `stabilization`, it waits for it "
        "to leave: one change instead of two); any scale-up cancels it.",
    )
    dead_band: float = Field(
        0.0, ge=0, le=1, description="Ignore executor changes smaller than this fraction of the current count."
    )
    max_scale_up_factor: float = Field(
        1000.0,
        gt=0,
        le=MAX_SCALE_UP_FACTOR,
        description="One step adds at most `current x factor` executors (at least one). The default 1000 limits nothing "
        "below 1000 times the current count (Flink's autoscaler: `scale-up.max-factor` 100000): a scale-up split into steps "
        "costs a rescale a step while the load waits. At most 100000.",
    )
    max_scale_down_factor: float = Field(
        1.0,
        gt=0,
        le=1, description="One step removes at most `current x factor` executors (at least one)."
    )
    backlog_lag_threshold: Duration = Field(
        timedelta(seconds=30),
        description="No scale-down while any query's lag exceeds this (and two of its trigger intervals, the lag it has while keeping up).",
    )
    query_rescale_cooldown: Duration = Field(
        timedelta(seconds=30),
        description="Least time between two automatic re-alignments of a query's partitions to its cores; "
        "partitions a policy proposes and operator requests are not delayed.",
    )
    max_batch_triggers: float = Field(
        3.0,
        ge=0,
        le=MAX_BATCH_TRIGGERS,
        description="When the daemon restarts a query whose source takes a rate limit it manages, bound each batch to "
        "the rows the cores one scale-up step can reach process in this many trigger intervals (the batch cost model's "
        "estimate; with no step limit, the default `max_scale_up_factor`, the cores of `executors.max`, as many as the "
        "partitions use), so a batch that catches up a backlog ends and reports progress; 0 leaves the rate limit as it is. "
        "At most 1000.",
    )
    min_wave_efficiency: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Rescale a query when its partitions keep less than this share of the cores busy "
        "(partitions / ceil(partitions / cores) / cores).",
    )


class SloSettings(_Model):
    target_lag: Duration = Field(
        timedelta(seconds=60),
        description="Lag a query should stay under. Scaling judges a query against at least two of its "
        "trigger intervals, the lag it has while keeping up.",
    )


class WindowSettings(_Model):
    # 0 fed no batch to any decision: every policy blind
    metrics_window: PositiveDuration = Field(
        timedelta(seconds=60), description="Batches that ended within this window feed each decision (more than 0)."
    )
    # each bound is far above any use and keeps a number with too many zeros from failing after
    # Spark started (1e20 batches overflowed the buffer's C size)
    max_samples: int = Field(240, ge=1, le=100_000, description="Batches kept per query.")
    running_batch_rows: bool = Field(
        True,
        description="Read a running batch's rows from the input its finished tasks read (Spark's live stage metrics, from "
        "the driver's REST API), so a step in the load shows while its first, long batch runs; before a task has "
        "finished, and with this off, the rows are inferred from how long it runs (at most 20x the batch before).",
    )
    planned_batch_rows: bool = Field(
        True,
        description="Read a running batch's rows from its checkpoint's offset log, written when the batch is planned, "
        "where the source's offsets count rows (Kafka's, the trace source's: checked on each finished batch against "
        "its input rows), so a step in the load shows from the batch's first tick; elsewhere, and with this off, "
        "as running_batch_rows says.",
    )


class HistorySettings(_Model):
    max_age: Duration = Field(timedelta(hours=24), description="Scaling history older than this is dropped.")
    max_count: int = Field(500, ge=1, le=1_000_000, description="Most scaling events kept.")
    rate_step: Duration = Field(
        timedelta(minutes=5),
        description="Each query's arrival rate is remembered as one mean per step of this length (for forecasts).",
    )
    rate_max_age: Duration = Field(
        timedelta(days=8), description="Remembered arrival rates older than this are dropped (8 days cover a weekly cycle)."
    )

    @model_validator(mode="after")
    def _positive_step(self) -> HistorySettings:
        if self.rate_step.total_seconds() <= 0:
            raise ValueError("rate_step must be > 0")
        if self.rate_step > self.rate_max_age:
            # every step's mean would be dropped before it could be used: forecasts without a past
            raise ValueError(f"rate_step ({format_duration(self.rate_step)}) must not exceed rate_max_age ({format_duration(self.rate_max_age)})")
        return self


class PipelineSettings(_Model):
    module: Annotated[str, BeforeValidator(_trimmed)] | None = Field(
        None, description="Python file or dotted module defining the pipelines (`@pipeline`)."
    )
    checkpoint_root: CheckpointRoot = Field(
        Path("checkpoints"),
        description="Directory, or URI of storage such as `s3a://`, `gs://`, `hdfs://`, `abfss://` (kept as written), under "
        "which each pipeline without its own `checkpoint=` gets `<name>/` as checkpoint; a `file:` URI is a local directory.",
    )
    restart_backoff_max: Duration = Field(
        timedelta(minutes=5), description="Longest wait before restarting a failed query (exponential back-off)."
    )
    max_failures: int = Field(
        10,
        ge=0,
        le=1_000_000,
        description="Failures in a row (without a batch done in between) after which a query is given up: status "
        "`failed`, no more restarts; the daemon and the other queries go on. 0: never give up.",
    )
    # 0 stopped every query mid-batch, never at the boundary a rescale from the checkpoint waits for
    stop_timeout: PositiveDuration = Field(
        timedelta(seconds=120), description="Longest wait for a batch boundary when stopping a query (more than 0)."
    )


# the master URLs Spark's SparkContext accepts (its createTaskScheduler's patterns; Mesos is gone
# since Spark 4): anything else fails only once the session starts, after `run --check` said valid
_SPARK_MASTER = re.compile(
    r"local"
    r"|local\[([0-9]+|\*)\]"
    r"|local\[([0-9]+|\*)\s*,\s*[0-9]+\]"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]"
    r"|spark://\S+"
    r"|k8s://\S+"
    r"|yarn"
)


def _spark_master(url: str) -> str:
    if not _SPARK_MASTER.fullmatch(url):
        raise ValueError(
            f"{url!r} is not a Spark master URL (local, local[N], local[*], local[N,F], local-cluster[N,C,M], "
            "spark://HOST:PORT, k8s://URL, yarn)"
        )
    # Spark refuses 0 threads at start ("Asked to run locally with 0 threads"), and a cluster of
    # no workers, cores or memory never gets an executor: told here, before a JVM starts
    counts = [int(n) for n in re.findall(r"[0-9]+", url)]
    if url.startswith("local[") and counts and counts[0] < 1:
        raise ValueError("the threads must be at least 1")
    if url.startswith("local-cluster[") and min(counts) < 1:
        raise ValueError("the workers, cores per worker and MiB per worker must each be at least 1")
    return url


def _positive_whole(key: str, value: str | int | float | bool) -> str | None:
    """The problem with ``value`` as a count of at least 1 (Spark reads it as an int), or None."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        return f"{key}: must be a whole number of at least 1, got {value!r}"
    return None


# Spark properties the daemon sets from settings of their own
OWN_SPARK_KEYS = {"spark.master": "spark.master", "spark.app.name": "spark.app_name"}


class SparkSettings(_Model):
    master: Annotated[str, AfterValidator(_spark_master)] = Field("local-cluster[4,1,512]", description="Spark master URL for driver mode.")
    # the name Spark's UI, its event log and the metrics' application label show: blank is none
    app_name: str = Field("spark-autoscaler", min_length=1, pattern=r"\S", description="Spark application name.")
    conf: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra Spark properties for the session (each `spark.*`; the master and the name are the settings "
        "above). One variable per property keeps its case: `SPARK_AUTOSCALER_SPARK__CONF__spark.executor.extraJavaOptions`.",
    )

    @field_validator("conf", mode="before")
    @classmethod
    def _one_problem_per_value(cls, conf: Any) -> Any:
        # a null or a nested value was four lines, one per type of the union it matched none of
        if isinstance(conf, dict):
            for key, value in conf.items():
                if value is None or isinstance(value, (dict, list)):
                    raise ValueError(f"{key}: must be a string, number or boolean, got {value!r}")
        return conf

    @field_validator("conf")
    @classmethod
    def _spark_properties(cls, conf: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        # Spark ignores a key without the prefix with a warning nobody reads (an environment
        # variable's entry spelt SPARK_EXECUTOR_MEMORY), and the session's master and name are
        # settings of their own: in conf they replaced the validated ones for part of the start
        for key in conf:
            if key in OWN_SPARK_KEYS:
                raise ValueError(f"{key}: set it as the setting {OWN_SPARK_KEYS[key]}, not in spark.conf")
            if not key.startswith("spark."):
                raise ValueError(f"{key!r}: not a Spark property (they start with 'spark.', e.g. spark.executor.memory)")
        return conf

    @field_validator("conf")
    @classmethod
    def _executor_cores(cls, conf: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        # the daemon sizes executors by it (cores per executor): "abc" failed at the first tick,
        # 0 made every executor worth no cores
        if "spark.executor.cores" in conf and (problem := _positive_whole("spark.executor.cores", conf["spark.executor.cores"])):
            raise ValueError(problem)
        return conf


# labels of letters, digits, '-' and '_' (not DNS's, but resolvers take it: Docker Compose names services so)
_HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?)*\.?$")


def listen_address(host: str) -> str:
    """``host`` if a server can be told to bind to it (an IP address or a host name, no port),
    else ValueError naming what is wrong."""
    # `127.0.0.1:8090` and ` 0.0.0.0` passed `run --check`, then the server failed to start with
    # a guess of "address in use"; an empty address binds every interface, never what it meant
    if not host:
        raise ValueError("must be an IP address or a host name, got an empty value (which binds every interface; 0.0.0.0 says so)")
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    name, colon, port = host.rpartition(":")
    if colon and port.isdigit() and (_HOST_NAME.match(name) or name.startswith("[")):
        raise ValueError(f"must be an address without a port, got {host!r}: set the port as http.port")
    if host.startswith("[") and host.endswith("]"):
        raise ValueError(f"must be an IPv6 address without brackets, got {host!r}")
    if not _HOST_NAME.match(host):
        raise ValueError(f"must be an IP address or a host name (letters, digits, '-', '_' and '.', no spaces), got {host!r}")
    return host


class HttpSettings(_Model):
    enabled: bool = Field(True, description="Serve `/metrics`, the health checks and the REST API.")
    host: Annotated[str, AfterValidator(listen_address)] = Field(
        "127.0.0.1",
        description="Address the HTTP server binds to (an IP address or a host name, no port); `0.0.0.0` only behind a network policy.",
    )
    port: int = Field(8090, ge=0, le=65535, description="HTTP port (0: any free port, for tests).")
    max_connections: int = Field(
        100,
        ge=1,
        le=100_000,  # beyond the open files a process may have
        description="Open connections served at once; a request on one more is answered 503 (Prometheus, "
        "the operator and health probes need a few).",
    )
    token_file: FileName | None = Field(
        None,
        description="File with the bearer token(s) of the control API: one `TOKEN` or `NAME TOKEN` per line "
        "(`NAME` is the identity written to the audit trail). Without any token the control "
        "endpoints are disabled, never open.",
    )
    token_files: list[FileName] = Field(
        default_factory=list,
        description="More files of bearer tokens, read like `token_file` (on Kubernetes: one per Secret, the operator's and your own).",
    )
    token_env: str = Field(
        "SPARK_AUTOSCALER_API_TOKEN",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable holding one more bearer token (identity `operator`).",
    )


# a ConfigMap's name is a DNS subdomain; its namespace a DNS label
_CONFIGMAP = r"^(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$"


class StateSettings(_Model):
    path: FileName | None = Field(
        None,
        description="JSON file keeping the daemon's state (scaling history, pending scale-downs, operator "
        "overrides) across restarts, written atomically by each tick that changed it (one that changed only a pending "
        "scale-down's window: at most once a minute); unset: kept in memory only.",
    )
    configmap: str | None = Field(
        None,
        pattern=_CONFIGMAP,
        description="On Kubernetes: the ConfigMap keeping the state instead of a file, `NAME` (in the pod's namespace) "
        "or `NAMESPACE/NAME`; gzip-compressed, at most 1,000,000 bytes (a ConfigMap holds 1 MiB). Exclusive with `path`.",
    )

    @model_validator(mode="after")
    def _one_store(self) -> StateSettings:
        if self.path is not None and self.configmap is not None:
            raise ValueError("set either path (a file) or configmap (Kubernetes), not both")
        return self


class AuditSettings(_Model):
    max_age: Duration = Field(timedelta(hours=24), description="Audit entries older than this are dropped.")
    max_count: int = Field(1000, ge=1, le=1_000_000, description="Most audit entries kept (decisions and operator changes).")


class Settings(_Model):
    mode: Mode = Field(Mode.AUTO, description="`auto`, `reactive` or `active`.")
    dry_run: bool = Field(False, description="Decide and report, but do not act.")
    reconcile_interval: Duration = Field(
        timedelta(seconds=5), description=f"Time between two ticks (at least {MIN_RECONCILE_INTERVAL.total_seconds() * 1000:.0f}ms)."
    )
    resource_wait_timeout: Duration = Field(
        timedelta(seconds=60), description="At start-up, wait at most this long for the initial executors."
    )
    # 0 meant every request "not granted" at once: active mode never tried, with no word of why
    request_timeout: PositiveDuration = Field(
        timedelta(seconds=60),
        description="An executor request during which no requested executor registered for this long is reported "
        "as not granted and the daemon falls back to reactive behaviour (more than 0).",
    )
    executors: ExecutorSettings = Field(default_factory=ExecutorSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    normalize: NormalizeSettings = Field(default_factory=NormalizeSettings)
    slo: SloSettings = Field(default_factory=SloSettings)
    window: WindowSettings = Field(default_factory=WindowSettings)
    history: HistorySettings = Field(default_factory=HistorySettings)
    pipelines: PipelineSettings = Field(default_factory=PipelineSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)

    @model_validator(mode="after")
    def _one_executor_size(self) -> Settings:
        # Spark gave executors spark.executor.cores while the daemon sized them by executors.cores
        in_spark = self.spark.conf.get("spark.executor.cores")
        if self.executors.cores is not None and in_spark is not None and int(in_spark) != self.executors.cores:
            raise ValueError(
                f"executors.cores ({self.executors.cores}) contradicts spark.conf spark.executor.cores ({in_spark}), "
                "the cores Spark gives each executor: set one of them"
            )
        return self

    @field_validator("reconcile_interval")
    @classmethod
    def _not_spinning(cls, value: timedelta) -> timedelta:
        if value < MIN_RECONCILE_INTERVAL:
            # 0 would tick (and on errors back off) without pause, hammering the driver
            raise ValueError(f"must be at least {MIN_RECONCILE_INTERVAL.total_seconds() * 1000:.0f}ms, got {format_duration(value)}")
        return value


# settings whose values an error never repeats (a token given where a path belongs, say)
_SECRET_WORDS = ("token", "password", "secret", "key", "credential")


def format_validation_error(err: Mapping[str, Any], *, unknown: str = "unknown key") -> str:
    """One pydantic error as ``where: what``, with the value as read where it is no secret: the
    daemon's settings, the operator's and a policy's parameters (``unknown`` names an extra key)."""
    loc = ".".join(str(p) or "''" for p in err["loc"] if not str(p).startswith("function-"))  # an empty name shown as ''
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = unknown
    elif _tellable(err.get("input"), loc) and "got" not in msg:
        # what was given, as read: YAML reads `1e9` as text and `yes` as true, which the message
        # alone does not show
        msg += f", got {reprlib.repr(err['input'])}"
    return f"{loc}: {msg}" if loc else msg


def _tellable(value: object, loc: str) -> bool:
    return isinstance(value, (str, int, float, bool)) and not any(word in loc.lower() for word in _SECRET_WORDS)
