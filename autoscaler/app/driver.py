"""Driver mode: the daemon owns the Spark session and hosts the user's pipelines.

Start-up order keeps "nothing started half-way": import and validate the pipelines, start the
HTTP server (health, metrics and the REST API answer while Spark starts; ``/readyz`` only
after the first successful tick), create the session, wait (at most
``resource_wait_timeout``) for the initial executors, build every pipeline once without
starting it, then start them all and run the reconcile loop until SIGTERM/SIGINT, which stops
every query at a batch boundary before the session stops and the HTTP server closes (the
daemon owns that order: ``app/signals.py``).

Metrics, the audit trail and the state store (``state.path``) belong to the daemon; the
reconciler restores history and operator overrides from the store when it is created.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry

from autoscaler.app.compose import assemble, new_metrics, open_store
from autoscaler.app.signals import StopSignals
from autoscaler.core.model import Mode, TickRecord
from autoscaler.core.modes import resolve_mode
from autoscaler.core.plan import QueryResume, choose_removals
from autoscaler.core.settings import Settings
from autoscaler.k8s.client import api_client, own_namespace
from autoscaler.k8s.gateway import KubeApi
from autoscaler.k8s.pods import ExecutorPodLister
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.metrics import Metrics
from autoscaler.ops.server import HttpServer, serve_daemon
from autoscaler.runtime.audit import AuditTrail
from autoscaler.runtime.clock import Clock, SystemClock
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.observe import WithExecutorPods
from autoscaler.runtime.ports import ClusterObserver, StateStore
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.runtime.state.schema import restore_state
from autoscaler.spark.executors import SparkExecutors, driver_runs_tasks
from autoscaler.spark.host import QueryHost, StopReport
from autoscaler.spark.kubernetes import is_kubernetes
from autoscaler.spark.observer import SparkObserver
from autoscaler.spark.pipelines import PipelineError, PipelineSpec, checkpoint_locations, load_pipelines
from autoscaler.spark.session import build_session, stop_session

log = get_logger("autoscaler.driver")


@dataclass(frozen=True)
class StartupReport:
    mode: Mode
    mode_reason: str
    wanted_executors: int
    executors: int
    waited: timedelta


class DriverDaemon:
    def __init__(
        self,
        settings: Settings,
        *,
        specs: Sequence[PipelineSpec] | None = None,
        spark: Any = None,
        clock: Clock | None = None,
        state_store: StateStore | None = None,
        on_tick: Callable[[TickRecord], None] | None = None,
        registry: CollectorRegistry | None = None,
        auth: ApiAuth | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.state_store = state_store if state_store is not None else open_store(settings)
        self.on_tick = on_tick
        self.application = _application(spark, settings)
        if registry is None:
            self.metrics = new_metrics(settings, self.application)
        else:
            self.metrics = Metrics(registry, application=self.application, policy=settings.policy.name)
            self.metrics.configure(settings)
        self.registry = self.metrics.registry
        self.audit = AuditTrail(settings.audit.max_count, settings.audit.max_age)
        self.auth = auth
        self.http: HttpServer | None = None
        if specs is None:
            if not settings.pipelines.module:
                raise PipelineError("no pipelines: set pipelines.module (a .py file or module with @pipeline functions)")
            specs = load_pipelines(settings.pipelines.module, checkpoint_root=settings.pipelines.checkpoint_root)
        else:  # given ones too (no module loading checked them), before Spark starts
            checkpoint_locations(specs, settings.pipelines.checkpoint_root)
        self.specs = list(specs)
        self._own_spark = spark is None
        self.spark = spark
        self.executors: SparkExecutors | None = None
        self.host: QueryHost | None = None
        self.reconciler: Reconciler | None = None
        self.loop: ReconcileLoop | None = None
        self.startup: StartupReport | None = None
        self.stopped_queries: list[StopReport] = []
        self._stopped = threading.Event()
        self._signals: StopSignals | None = None

    # --- start-up ----------------------------------------------------------------------------

    def start(self) -> StartupReport:
        s = self.settings
        if s.http.enabled and self.http is None:
            self.start_http()
        try:
            if self.spark is None:
                self.spark = build_session(s.spark)
                if self._signals is not None:
                    self._signals.install()  # PySpark's context took SIGINT over: ours again
            self.executors = SparkExecutors(self.spark, s.executors.cores)
            self.startup = self._wait_for_resources()
            self.host = QueryHost(
                self.spark,
                self.specs,
                checkpoint_root=s.pipelines.checkpoint_root,
                clock=self.clock,
                registered_cores=self.executors.registered_cores,
                max_samples=s.window.max_samples,
                stop_timeout=s.pipelines.stop_timeout,
                restart_backoff_max=s.pipelines.restart_backoff_max,
                max_failures=s.pipelines.max_failures,
                running_batch_rows=s.window.running_batch_rows,
                planned_batch_rows=s.window.planned_batch_rows,
            )
            self.host.prepare(max(1, self.executors.registered_cores()), saved_queries(self.state_store))
            if not self._stopped.is_set():  # a stop asked for while Spark started: nothing to start
                self.host.start_all()
            daemon = assemble(
                s,
                observer=self._observer(SparkObserver(self.executors, self.host)),
                executors=self.executors,
                queries=self.host,
                clock=self.clock,
                state_store=self.state_store,
                metrics=self.metrics,
                audit=self.audit,
                on_tick=self.on_tick,
            )
            self.reconciler, self.loop = daemon.reconciler, daemon.loop
        except BaseException:
            self._teardown()
            self.stop_http()
            raise
        if self.reconciler.control != type(self.reconciler.control)():
            log.info("overrides_restored", control=self.reconciler.control.to_json())
        return self.startup

    def _observer(self, spark: ClusterObserver) -> ClusterObserver:
        """On Kubernetes, the executor pods explain a request that waits (``WithExecutorPods``)."""
        if not is_kubernetes(self.settings.spark.master):
            return spark
        sc = self.spark.sparkContext
        namespace = sc.getConf().get("spark.kubernetes.namespace", None) or own_namespace()
        try:
            pods = ExecutorPodLister(KubeApi(api_client()), namespace or "default", sc.applicationId)
        except Exception as exc:  # the client's config loaders raise their own types
            log.warning("executor_pods_unavailable", error=f"cannot reach the Kubernetes API: {exc}")
            return spark
        return WithExecutorPods(spark, pods)

    # --- HTTP: metrics, health, REST API --------------------------------------------------

    def start_http(self) -> HttpServer:
        """Serve ``/metrics``, ``/healthz``, ``/readyz`` and the REST API on ``http.host:http.port``."""
        self.http = serve_daemon(
            self.settings,
            reconciler=lambda: self.reconciler,
            loop=lambda: self.loop,
            registry=self.registry,
            metrics=self.metrics,
            clock=self.clock,
            application=self.application,
            stopping=self._stopped.is_set,
            auth=self.auth,
            live_status=lambda: self.host.statuses() if self.host is not None else {},
        )
        return self.http

    def stop_http(self) -> None:
        if self.http is not None:
            self.http.stop()
            self.http = None

    def _wait_for_resources(self) -> StartupReport:
        """Ask for (active) or wait for (reactive) the initial executors, then go with what is there."""
        assert self.executors is not None
        s, ex = self.settings, self.executors
        now = self.clock.now()
        view = ex.observe(now)
        mode = resolve_mode(s.mode, view)
        wanted = s.executors.start_count
        if self._stopped.is_set():
            # a stop asked for while Spark started: ask for nothing and wait for nothing (the
            # request would be taken back at once; no query starts either)
            log.info("stopped_while_starting", executors=view.count, detail="no executors requested, no query started")
            return StartupReport(mode.mode, "stopped while Spark started", wanted, view.count, timedelta(0))
        if mode.mode == Mode.ACTIVE:
            # standalone and local-cluster start an executor on every worker: keep `wanted`
            extra = choose_removals(view, wanted)
            if extra:
                ex.remove(extra, now)
            ex.set_target(wanted, now)
        if driver_runs_tasks(s.spark.master):
            # local[N]: the driver runs the tasks and no executor will ever register; waiting
            # for one would only delay the start by the whole timeout
            have, waited = view.count, timedelta(0)
            log.info("no_executors_to_wait_for", master=s.spark.master, detail="the driver runs the tasks")
        else:
            have = ex.wait_for(wanted, s.resource_wait_timeout, self.clock, self._stopped)
            waited = self.clock.now() - now
            if have < wanted:
                log.warning("starting_with_fewer_executors", wanted=wanted, registered=have, waited_seconds=waited.total_seconds())
        log.info("mode_selected", mode=mode.mode.value, reason=mode.reason.value, detail=mode.message)
        return StartupReport(mode.mode, mode.message, wanted, have, waited)

    # --- running -----------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT stop the daemon in order, even while it starts (main thread only)."""
        self._signals = StopSignals(on_stop=self.request_stop)
        self._signals.install(graceful=True)

    def request_stop(self) -> None:
        self._stopped.set()
        if self.loop is not None:
            self.loop.stop()

    def run(self, duration: timedelta | None = None) -> None:
        """Run the reconcile loop until stopped (or for ``duration``), then shut down gracefully."""
        assert self.loop is not None, "start() first"
        if duration is not None:
            timer = threading.Timer(duration.total_seconds(), self.request_stop)
            timer.daemon = True
            timer.start()
        try:
            if not self._stopped.is_set():
                self.loop.run()
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        self._stopped.set()  # /readyz reports "stopping" from here on
        if self.loop is not None:
            self.loop.stop()
        if self.host is not None:
            self.stopped_queries = self.host.stop_all()
        self._teardown()
        self.stop_http()

    def _teardown(self) -> None:
        if self._own_spark and self.spark is not None:
            stop_session(self.spark)
            self.spark = None


def saved_queries(store: StateStore | None) -> Mapping[str, QueryResume]:
    """How the previous daemon on this state last ran each hosted query (empty without state)."""
    state = store.load() if store is not None else None
    return restore_state(state, str(store)).queries if state else {}


def _application(spark: Any, settings: Settings) -> str:
    """The ``application`` label: the running session's app name, else ``spark.app_name``."""
    if spark is not None:
        try:
            return str(spark.sparkContext.appName)
        except Exception:  # a session being torn down, or a stand-in in tests
            pass
    return settings.spark.app_name
