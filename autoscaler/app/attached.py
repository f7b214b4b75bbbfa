"""Attach the daemon to a Spark session you own (your own driver script).

::

    import autoscaler
    q = df.writeStream.queryName("events")....start()
    handle = autoscaler.attach(spark, queries=[q], parallelism={"events": 8}, max_executors=6)
    ...
    handle.stop()

Executors are scaled as in driver mode. Queries you started yourself are observed and drive
the decisions, but are never restarted (the daemon cannot rebuild them); pass ``pipelines``
(``@pipeline`` functions) to let the daemon host and rescale queries from their checkpoints.

Metrics (``handle.registry``), the audit trail and the state store (``state.path``) work as in
driver mode; ``serve_http=True`` also serves ``/metrics`` and the REST API on
``http.host:http.port`` from this driver.

Your session is yours: set ``spark.sql.streaming.noDataProgressEventInterval=1s`` in it, as the
daemon's own session does, for a quiet stream to be seen at its first trigger without rows
(Spark's 10 s keeps its last rate and a growing lag that long); on standalone, also
``spark.standalone.executorRemoveDelayOnDisconnection=1s``, for an executor the daemon removed
to leave the driver's list a second after its process, not five. ``attach`` logs a warning
(``session_setting_slows_the_daemon``) for each it finds slower.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from prometheus_client import CollectorRegistry

from autoscaler.app.compose import assemble, configure, new_metrics, open_store
from autoscaler.app.driver import saved_queries
from autoscaler.core.settings import Settings
from autoscaler.ops.server import HttpServer, serve_daemon
from autoscaler.runtime.clock import Clock, SystemClock
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost
from autoscaler.spark.observer import SparkObserver
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.spark.session import untimely_session_conf

log = get_logger("autoscaler.attach")


@dataclass
class AttachedDaemon:
    reconciler: Reconciler
    loop: ReconcileLoop
    host: QueryHost
    thread: threading.Thread
    registry: CollectorRegistry | None = None
    http: HttpServer | None = None

    def stop(self, stop_hosted_queries: bool = True) -> None:
        """Stop the reconcile loop; hosted pipelines stop at a batch boundary, yours keep running."""
        self.loop.stop()
        self.thread.join(30)
        if stop_hosted_queries:
            self.host.stop_all()
        if self.http is not None:
            self.http.stop()


def attach(
    spark: Any,
    *,
    queries: Sequence[Any] = (),
    parallelism: Mapping[str, int] | None = None,
    pipelines: Sequence[PipelineSpec | Any] = (),
    settings: Settings | None = None,
    clock: Clock | None = None,
    serve_http: bool = False,
    **overrides: Any,
) -> AttachedDaemon:
    """Start the reconcile loop in a background thread of this driver.

    Without ``settings``, the common keys can be given directly: ``mode``,
    ``min_executors``, ``max_executors``, ``policy``, ``dry_run``.
    """
    named = {
        "mode": overrides.pop("mode", None),
        "executors.min": overrides.pop("min_executors", None),
        "executors.max": overrides.pop("max_executors", None),
        "policy.name": overrides.pop("policy", None),
        "dry_run": overrides.pop("dry_run", None),
    }
    if overrides:
        raise TypeError(f"unknown attach() options: {', '.join(sorted(overrides))}")
    settings = settings or configure(None, named)
    clock = clock or SystemClock()
    store = open_store(settings)
    if store is not None:
        store.check_writable()  # before anything starts, as `run` does
    for advice in untimely_session_conf(spark):
        log.warning("session_setting_slows_the_daemon", detail=advice)
    specs = [p.pipeline_spec if hasattr(p, "pipeline_spec") else p for p in pipelines]
    executors = SparkExecutors(spark, settings.executors.cores)
    host = QueryHost(
        spark,
        specs,
        checkpoint_root=settings.pipelines.checkpoint_root,
        clock=clock,
        registered_cores=executors.registered_cores,
        max_samples=settings.window.max_samples,
        stop_timeout=settings.pipelines.stop_timeout,
        restart_backoff_max=settings.pipelines.restart_backoff_max,
        max_failures=settings.pipelines.max_failures,
        running_batch_rows=settings.window.running_batch_rows,
        planned_batch_rows=settings.window.planned_batch_rows,
    )
    for q in queries:
        name = q.name or str(q.id)
        host.attach(q, (parallelism or {}).get(name, max(1, executors.registered_cores())))
    if specs:
        host.prepare(max(1, executors.registered_cores()), saved_queries(store))
        host.start_all()
    application = str(spark.sparkContext.appName)
    metrics = new_metrics(settings, application)
    daemon = assemble(
        settings, observer=SparkObserver(executors, host), executors=executors, queries=host, clock=clock, state_store=store, metrics=metrics
    )
    http = None
    if serve_http:
        http = serve_daemon(settings, reconciler=daemon.reconciler, loop=daemon.loop, registry=metrics.registry, metrics=metrics,
                            clock=clock, application=application, live_status=host.statuses)
    thread = daemon.loop.start_thread()
    return AttachedDaemon(daemon.reconciler, daemon.loop, host, thread, metrics.registry, http)
