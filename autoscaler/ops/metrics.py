"""Prometheus metrics of the daemon, in one place, on an injected registry.

``Metrics(registry, application=...)`` declares every family; the daemon feeds it each
:class:`~autoscaler.runtime.reconciler.TickRecord` (:meth:`Metrics.observe_tick`), each failed tick
(:meth:`Metrics.tick_failed`) and each operator change (:meth:`Metrics.operator_change`).

Conventions (https://prometheus.io/docs/practices/naming/, checked by ``promtool check
metrics`` in the tests): every name starts with ``spark_autoscaler_``, carries its base unit
(``_seconds``, ``_rows``, ``_rows_per_second``, ``_ratio``), counters end in ``_total``. Labels
are bounded: ``application``, ``query``, ``mode``, ``direction``, ``reason`` (a ``Reason``
value), ``phase``, ``action``, ``result``, ``status``, ``change``; never an executor id or a
batch id. A query's label sets are removed when the query goes away, and a value that is
unknown (``None``) is absent rather than 0. ``*_created`` series are switched off.
"""

from __future__ import annotations

from typing import Iterable

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from autoscaler._version import __version__
from autoscaler.core.model import Mode, QueryStatus, Reason, TickRecord
from autoscaler.core.settings import Settings
from autoscaler.runtime.views import capacity, executor_direction

# One exposition, no `_created` twin of every counter and histogram.
prometheus_client.disable_created_metrics()

PREFIX = "spark_autoscaler_"
ERROR_PHASES = ("observe", "policy", "decide", "tick")
ACTIONS = ("set_target", "remove", "rescale")
OPERATOR_CHANGES = ("paused", "mode", "dry_run", "min_executors", "max_executors", "manual_executors", "policy_params",
                    "query_params", "query_request_cancel", "log_level")
# (direction, reason) pairs an executor decision can take with the built-in policies and the
# normalization; exported at 0 from the start so that increase() and rate() see the first one
# (Prometheus cannot tell how a counter born at 1 got there). Other pairs appear when first used.
DECISION_KINDS = (
    *(("up", r) for r in (Reason.SCALE_UP_FOR_LOAD, Reason.SCALE_UP_FOR_BACKLOG, Reason.STATIC_TARGET, Reason.MANUAL_TARGET,
                          Reason.BOUNDED_MIN, Reason.BOUNDED_MAX, Reason.MAX_STEP_UP, Reason.PAUSED, Reason.DRY_RUN)),
    *(("down", r) for r in (Reason.SCALE_DOWN_FOR_LOAD, Reason.STATIC_TARGET, Reason.MANUAL_TARGET, Reason.BOUNDED_MIN,
                            Reason.BOUNDED_MAX, Reason.MAX_STEP_DOWN, Reason.PAUSED, Reason.DRY_RUN)),
    *(("hold", r) for r in (Reason.DEAD_BAND, Reason.STABILIZING, Reason.SCALE_DOWN_DELAYED, Reason.BACKLOG_BLOCKS_SCALE_DOWN,
                            Reason.ACTION_IN_FLIGHT)),
)
PAUSE_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

A = ("application",)
Q = ("application", "query")


class Metrics:
    def __init__(self, registry: CollectorRegistry, *, application: str, policy: str = "", version: str = __version__) -> None:
        self.registry = registry
        self.application = application
        r = registry

        self.build_info = Info(f"{PREFIX}build", "Version and policy of the running daemon.", A, registry=r)
        # executors
        self.executors = Gauge(f"{PREFIX}executors", "Executors registered with the driver.", A, registry=r)
        self.executor_cores = Gauge(f"{PREFIX}executor_cores", "Cores of the registered executors.", A, registry=r)
        self.executors_target = Gauge(
            f"{PREFIX}executors_target", "Executor count decided after normalization (or the current count when the policy does not drive executors).", A, registry=r
        )
        self.executors_proposed = Gauge(
            f"{PREFIX}executors_proposed", "Executor count the policy proposed before normalization; absent when it proposes none.", A, registry=r
        )
        self.executors_requested = Gauge(
            f"{PREFIX}executors_requested", "Executor total last asserted to the cluster manager (active mode); absent before the first request.", A, registry=r
        )
        self.executors_pending = Gauge(f"{PREFIX}executors_pending", "Executors requested but not registered yet.", A, registry=r)
        self.executor_pods_pending = Gauge(
            f"{PREFIX}executor_pods_pending",
            "On Kubernetes: executor pods in phase Pending (being scheduled, pulling the image, or unschedulable); absent elsewhere.",
            A,
            registry=r,
        )
        self.executor_pods_unschedulable = Gauge(
            f"{PREFIX}executor_pods_unschedulable",
            "On Kubernetes: Pending executor pods the scheduler cannot place (PodScheduled=False, Unschedulable); absent elsewhere.",
            A,
            registry=r,
        )
        self.executors_lost = Counter(f"{PREFIX}executors_lost", "Executors that disappeared without being removed by the daemon.", A, registry=r)
        self.executors_min = Gauge(f"{PREFIX}executors_min", "Effective lower executor bound (configuration or operator override).", A, registry=r)
        self.executors_max = Gauge(f"{PREFIX}executors_max", "Effective upper executor bound (configuration or operator override).", A, registry=r)
        self.executor_rescales = Counter(
            f"{PREFIX}executor_rescales", "Executor target changes applied, by direction (up, down).", (*A, "direction"), registry=r
        )
        # queries
        self.query_input = Gauge(f"{PREFIX}query_input_rows_per_second", "Rows per second arriving at the query.", Q, registry=r)
        self.query_processing = Gauge(
            f"{PREFIX}query_processing_rows_per_second", "Rows per second the query processes while a batch runs.", Q, registry=r
        )
        self.query_capacity = Gauge(
            f"{PREFIX}query_capacity_rows_per_second",
            "Rows per second the query can sustain at its partitions on the registered cores (batch cost model).",
            Q,
            registry=r,
        )
        self.query_busy = Gauge(f"{PREFIX}query_busy_ratio", "Share of wall time the query spends running batches.", Q, registry=r)
        self.query_batch_duration = Gauge(f"{PREFIX}query_batch_duration_seconds", "Duration of the query's last completed batch.", Q, registry=r)
        self.query_backlog = Gauge(f"{PREFIX}query_backlog_rows", "Rows available at the source but not yet read, where the source reports it.", Q, registry=r)
        self.query_lag = Gauge(
            f"{PREFIX}query_lag_seconds", "Age of the newest data the query has processed plus its backlog in seconds of input.", Q, registry=r
        )
        self.query_partitions = Gauge(f"{PREFIX}query_partitions", "Source partitions (tasks per batch) the query runs with.", Q, registry=r)
        self.query_max_rows = Gauge(
            f"{PREFIX}query_max_rows_per_batch", "Rate limit of the query in rows per batch; absent when unlimited.", Q, registry=r
        )
        self.query_trigger = Gauge(
            f"{PREFIX}query_trigger_interval_seconds", "Trigger interval of the query; absent when it runs batches back to back.", Q, registry=r
        )
        self.query_status = Gauge(f"{PREFIX}query_status", "1 for the query's current status, 0 for the others.", (*Q, "status"), registry=r)
        self.query_rescales = Counter(
            f"{PREFIX}query_rescales", "Query restarts from the checkpoint with new settings, by result (ok, failed).", (*Q, "result"), registry=r
        )
        self.query_rescale_pause = Histogram(
            f"{PREFIX}query_rescale_pause_seconds",
            "Measured pause of a query rescale: from the stop at a batch boundary to the end of the first batch at the new settings.",
            Q,
            buckets=PAUSE_BUCKETS,
            registry=r,
        )
        self.query_changes_held = Counter(
            f"{PREFIX}query_changes_held", "Ticks on which a wanted query change was held or refused, by reason.", (*Q, "reason"), registry=r
        )
        # decisions and actions
        self.decisions = Counter(
            f"{PREFIX}decisions",
            "Executor decisions that changed the target (direction up or down) or held a wanted change (hold), by reason.",
            (*A, "direction", "reason"),
            registry=r,
        )
        self.actions = Counter(
            f"{PREFIX}actions", "Actions taken on the cluster, by action (set_target, remove, rescale) and result (ok, failed).", (*A, "action", "result"), registry=r
        )
        self.last_decision = Gauge(
            f"{PREFIX}last_decision_timestamp_seconds", "When the daemon last changed or held something (Unix time).", A, registry=r
        )
        # the loop
        self.tick_duration = Histogram(
            f"{PREFIX}reconcile_duration_seconds", "Duration of successful reconcile ticks.", A, buckets=TICK_BUCKETS, registry=r
        )
        self.last_tick = Gauge(f"{PREFIX}last_reconcile_timestamp_seconds", "When the last successful tick ran (Unix time).", A, registry=r)
        self.errors = Counter(f"{PREFIX}reconcile_errors", "Failed reconcile ticks, by phase.", (*A, "phase"), registry=r)
        self.interval = Gauge(f"{PREFIX}reconcile_interval_seconds", "Configured time between two ticks.", A, registry=r)
        # modes and control
        self.mode = Gauge(f"{PREFIX}mode", "1 for the effective mode (active or reactive), 0 for the other.", (*A, "mode"), registry=r)
        self.configured_mode = Gauge(
            f"{PREFIX}configured_mode", "1 for the configured mode (auto, reactive or active, after operator overrides).", (*A, "mode"), registry=r
        )
        self.mode_fallback = Gauge(
            f"{PREFIX}mode_fallback", "1 while active mode is wanted but the daemon runs on the executors that exist.", A, registry=r
        )
        self.paused = Gauge(f"{PREFIX}paused", "1 while scaling is paused by an operator.", A, registry=r)
        self.dry_run = Gauge(f"{PREFIX}dry_run", "1 while the daemon only recommends (dry run).", A, registry=r)
        self.operator_changes = Counter(
            f"{PREFIX}operator_changes", "Changes made through the control API, by change.", (*A, "change"), registry=r
        )
        self.token_file_valid = Gauge(
            f"{PREFIX}token_file_valid",
            "1 while the control API's token file can be used, 0 while it cannot (every control change is refused); absent without one.",
            A,
            registry=r,
        )
        self.token_file_errors = Counter(
            f"{PREFIX}token_file_errors", "Times the token file became unreadable or malformed (a rotation gone wrong).", A, registry=r
        )
        self.slo_target_lag = Gauge(f"{PREFIX}slo_target_lag_seconds", "The lag every query should stay under (slo.target_lag).", A, registry=r)

        self.build_info.labels(application).info({"version": version, "policy": policy})
        # counters start at 0 so the first increment shows in increase()/rate()
        for phase in ERROR_PHASES:
            self.errors.labels(application, phase)
        for direction, reason in DECISION_KINDS:
            self.decisions.labels(application, direction, reason.value)
        for direction in ("up", "down"):
            self.executor_rescales.labels(application, direction)
        for action in ACTIONS:
            for result in ("ok", "failed"):
                self.actions.labels(application, action, result)
        for change in OPERATOR_CHANGES:
            self.operator_changes.labels(application, change)
        self.executors_lost.labels(application)
        self._queries: set[str] = set()

    # --- families ------------------------------------------------------------------------------

    QUERY_FAMILIES = (
        "query_input",
        "query_processing",
        "query_capacity",
        "query_busy",
        "query_batch_duration",
        "query_backlog",
        "query_lag",
        "query_partitions",
        "query_max_rows",
        "query_trigger",
        "query_status",
        "query_rescales",
        "query_rescale_pause",
        "query_changes_held",
    )

    @staticmethod
    def names(registry: CollectorRegistry) -> set[str]:
        """Every sample name the registry can expose (families plus ``_total``, ``_bucket``, ...)."""
        out: set[str] = set()
        for family in registry.collect():
            out.add(family.name)
            suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "info": ("_info",)}.get(family.type, ())
            out.update(family.name + s for s in suffixes)
        return out

    # --- updates -------------------------------------------------------------------------------

    def configure(self, settings: Settings) -> None:
        """Values that come from the configuration."""
        a = self.application
        self.slo_target_lag.labels(a).set(settings.slo.target_lag.total_seconds())
        self.interval.labels(a).set(settings.reconcile_interval.total_seconds())
        self.paused.labels(a).set(0)
        self.dry_run.labels(a).set(1 if settings.dry_run else 0)
        self._state_set(self.configured_mode, settings.mode.value, [m.value for m in Mode])

    def token_file_state(self, problem: str | None) -> None:
        """The token file became usable (``problem`` None) or not."""
        self.token_file_valid.labels(self.application).set(0 if problem else 1)
        if problem:
            self.token_file_errors.labels(self.application).inc()

    def tick_failed(self, phase: str) -> None:
        self.errors.labels(self.application, phase).inc()

    def operator_change(self, change: str) -> None:
        self.operator_changes.labels(self.application, change).inc()

    def observe_tick(self, r: TickRecord) -> None:
        a = self.application
        self.executors.labels(a).set(r.executors_alive)
        self.executor_cores.labels(a).set(r.executors_cores)
        d = r.decision
        self.executors_target.labels(a).set(d.target if d.target is not None else d.current)
        self._maybe(self.executors_proposed, (a,), r.proposal.executors)
        self._maybe(self.executors_requested, (a,), r.executors_requested)
        self.executors_pending.labels(a).set(r.executors_pending)
        pods = r.executor_pods
        self._maybe(self.executor_pods_pending, (a,), pods.pending if pods is not None else None)
        self._maybe(self.executor_pods_unschedulable, (a,), pods.unschedulable if pods is not None else None)
        if r.executors_lost:
            self.executors_lost.labels(a).inc(len(r.executors_lost))
        self._maybe(self.executors_min, (a,), r.min_executors)
        self._maybe(self.executors_max, (a,), r.max_executors)

        direction = executor_direction(r)
        if direction is not None:
            self.decisions.labels(a, direction[0], direction[1].value).inc()
        if r.notable:
            self.last_decision.labels(a).set(r.at.timestamp())
        for res in r.results:
            if res.action == "set_target" and not d.changes:
                continue  # re-asserting the same target every tick is not an action worth counting
            self.actions.labels(a, res.action, "ok" if res.ok else "failed").inc()
            if res.action == "set_target" and res.ok and d.target is not None:
                self.executor_rescales.labels(a, "up" if d.target > d.current else "down").inc()

        self._state_set(self.mode, r.mode.mode.value, [Mode.ACTIVE.value, Mode.REACTIVE.value])
        self._state_set(self.configured_mode, r.mode.configured.value, [m.value for m in Mode])
        self.mode_fallback.labels(a).set(1 if r.mode.fallback else 0)
        self.paused.labels(a).set(1 if r.paused else 0)
        self.dry_run.labels(a).set(1 if r.dry_run else 0)

        self._observe_queries(r)
        self.tick_duration.labels(a).observe(r.duration.total_seconds())
        self.last_tick.labels(a).set(r.at.timestamp())

    def _observe_queries(self, r: TickRecord) -> None:
        a = self.application
        names = {q.name for q in r.queries} | {ld.name for ld in r.loads}
        for gone in self._queries - names:
            self.remove_query(gone)
        for new in names - self._queries:
            for result in ("ok", "failed"):
                self.query_rescales.labels(a, new, result)
            self.query_rescale_pause.labels(a, new)
        self._queries = names
        for ld in r.loads:
            key = (a, ld.name)
            self._maybe(self.query_input, key, ld.input_rate)
            self._maybe(self.query_processing, key, ld.processing_rate)
            self._maybe(self.query_capacity, key, capacity(ld, r.executors_cores))
            self._maybe(self.query_busy, key, ld.busy_fraction)
            self._maybe(self.query_batch_duration, key, ld.batch_duration.total_seconds() if ld.batch_duration else None)
            self._maybe(self.query_backlog, key, ld.backlog_rows)
            self._maybe(self.query_lag, key, ld.lag.total_seconds() if ld.lag is not None else None)
        for q in r.queries:
            key = (a, q.name)
            self.query_partitions.labels(*key).set(q.params.parallelism)
            self._maybe(self.query_max_rows, key, q.params.max_rows_per_batch)
            self._maybe(self.query_trigger, key, q.params.trigger_interval.total_seconds() if q.params.trigger_interval else None)
            for status in QueryStatus:
                self.query_status.labels(*key, status.value).set(1 if q.status == status else 0)
        for o in r.outcomes:
            if o.kind != "rescale" or o.subject not in names:
                continue
            self.query_rescales.labels(a, o.subject, "ok" if o.ok else "failed").inc()
            if o.ok and o.pause is not None:
                self.query_rescale_pause.labels(a, o.subject).observe(o.pause.total_seconds())
        for ref in r.plan.refusals:
            self.query_changes_held.labels(a, ref.name, ref.reason.value).inc()

    def remove_query(self, name: str) -> None:
        """Drop every label set of a query that went away."""
        for attr in self.QUERY_FAMILIES:
            getattr(self, attr).remove_by_labels({"application": self.application, "query": name})

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _maybe(metric: Gauge, labels: tuple[str, ...], value: float | None) -> None:
        """Set the value, or remove the label set when it is unknown (never report unknown as 0)."""
        if value is None:
            try:
                metric.remove(*labels)
            except KeyError:
                pass
        else:
            metric.labels(*labels).set(value)

    def _state_set(self, metric: Gauge, value: str, values: Iterable[str]) -> None:
        for v in values:
            metric.labels(self.application, v).set(1 if v == value else 0)


def render_metrics_table() -> str:
    """The Markdown table of every metric family (``docs/operations.md`` embeds it)."""
    metrics = Metrics(CollectorRegistry(), application="x")
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    wrappers = [m for m in vars(metrics).values() if hasattr(m, "_labelnames") and hasattr(m, "_documentation")]
    for m in sorted(wrappers, key=lambda w: w._name):
        kind = m._type
        name = {"counter": f"{m._name}_total", "info": f"{m._name}_info"}.get(kind, m._name)
        kind = "gauge (info)" if kind == "info" else kind
        labels = ", ".join(f"`{label}`" for label in (*m._labelnames, *(("version", "policy") if kind == "gauge (info)" else ())))
        rows.append(f"| `{name}` | {kind} | {labels} | {m._documentation} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m autoscaler.ops.metrics: the table for docs/operations.md
    print(render_metrics_table(), end="")
