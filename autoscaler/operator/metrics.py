"""The operator's own Prometheus metrics (``/metrics`` on ``metrics_port``), on an injected registry.

Names follow the daemon's conventions (``spark_autoscaler_operator_`` prefix, base units,
``_total`` on counters); labels are bounded: ``result``, ``verb``, ``resource``, ``code`` (an
HTTP status or ``none``), ``endpoint`` (a path template), ``phase``.
"""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "spark_autoscaler_operator_"
PHASES = ("Pending", "Starting", "Running", "Degraded", "Suspended")


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.reconciles = Counter(f"{PREFIX}reconciles", "Passes over an app, by result (ok, error).", ("result",), registry=r)
        self.reconcile_duration = Histogram(
            f"{PREFIX}reconcile_duration_seconds", "Duration of one pass over an app.", buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r
        )
        self.kube_requests = Counter(
            f"{PREFIX}kube_api_requests", "Answers of the Kubernetes API, by verb, resource and code (none: no answer).", ("verb", "resource", "code"), registry=r
        )
        self.daemon_requests = Counter(
            f"{PREFIX}daemon_requests", "Answers of the daemons' REST APIs, by endpoint and code (none: no answer).", ("endpoint", "code"), registry=r
        )
        self.leader = Gauge(f"{PREFIX}leader", "1 while this replica leads (holds the Lease, or runs without election).", registry=r)
        self.apps = Gauge(f"{PREFIX}apps", "SparkStreamingApps by phase.", ("phase",), registry=r)
        for result in ("ok", "error"):
            self.reconciles.labels(result)
        for phase in PHASES:
            self.apps.labels(phase).set(0)
        self.leader.set(0)

    def kube_call(self, verb: str, resource: str, code: int | None) -> None:
        self.kube_requests.labels(verb, resource, str(code) if code is not None else "none").inc()

    def daemon_call(self, endpoint: str, code: int | None) -> None:
        self.daemon_requests.labels(endpoint, str(code) if code is not None else "none").inc()

    def pass_done(self, seconds: float, error: BaseException | None) -> None:
        self.reconciles.labels("error" if error is not None else "ok").inc()
        self.reconcile_duration.observe(seconds)

    def count_apps(self, apps: Iterable[dict[str, Any]]) -> None:
        phases = Tally(str((a.get("status") or {}).get("phase") or "Pending") for a in apps)
        for phase in sorted(set(PHASES) | set(phases)):
            self.apps.labels(phase).set(phases.get(phase, 0))
