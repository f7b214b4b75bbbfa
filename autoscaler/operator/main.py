"""``spark-autoscaler operator``: wire the operator and run it (with leader election, or alone).

The controller runs only while this replica leads: the official client's ``LeaderElection``
calls ``on_started`` once the Lease is held; if renewing it fails, ``run()`` returns and the
process exits non-zero (client-go's behaviour), so Kubernetes restarts it as a follower and no
two replicas act at once. Without election, run exactly one replica (the chart does).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import uuid
from typing import Any, Mapping

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from autoscaler.k8s.client import api_client, own_namespace
from autoscaler.k8s.gateway import KubeApi
from autoscaler.k8s.leader import LeaderElector
from autoscaler.operator.config import AppRef
from autoscaler.operator.controller import Controller
from autoscaler.operator.daemon_client import DaemonClient, token_from_file
from autoscaler.operator.metrics import OperatorMetrics
from autoscaler.operator.reconcile import AppReconciler, EventRecorder
from autoscaler.operator.settings import OperatorSettings
from autoscaler.ops.probes import answer_head
from autoscaler.ops.server import HttpServer
from autoscaler.runtime.clock import SystemClock
from autoscaler.runtime.logs import get_logger
from policies.registry import load_policies

log = get_logger("autoscaler.operator")


def identity() -> str:
    """This replica's name in the Lease: its pod, else the host and a random suffix."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


def build(settings: OperatorSettings, client: Any, metrics: OperatorMetrics, instance: str) -> Controller:
    """The controller and everything it needs, around one ``ApiClient``."""
    load_policies()  # to check the policy and its parameters of every spec
    clock = SystemClock()
    gateway = KubeApi(client, observe=metrics.kube_call)
    token = token_from_file(settings.daemon.token_file, settings.daemon.identity)
    timeout = settings.daemon.timeout.total_seconds()

    def daemon(ref: AppRef, pod: Mapping[str, Any]) -> DaemonClient:
        # by pod IP: the headless Service's name resolves only for Ready pods
        url = f"http://{pod['status']['podIP']}:{settings.daemon.port}"
        return DaemonClient(url, token=token, timeout=timeout, observe=metrics.daemon_call)

    events = EventRecorder(gateway, clock, settings.events_repeat_interval, instance)
    reconciler = AppReconciler(gateway, settings, clock=clock, daemon=daemon, events=events)
    controller = Controller(gateway, reconciler, settings)

    def on_pass(key: str, seconds: float, error: BaseException | None) -> None:
        metrics.pass_done(seconds, error)
        metrics.count_apps(list(controller.cache.values()))

    controller.on_pass = on_pass
    return controller


def http_app(registry: CollectorRegistry, ready: Any) -> FastAPI:
    app = FastAPI(title="spark-autoscaler operator", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> Any:
        ok, reason = ready()
        return JSONResponse({"status": "ready" if ok else "not ready", "reason": reason}, status_code=200 if ok else 503)

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_PLAIN_0_0_4)

    answer_head(app)
    return app


def run_operator(settings: OperatorSettings, *, kubeconfig: str | None = None, once: bool = False) -> int:
    """Run until SIGTERM (0), or until leadership is lost (1); ``once``: one pass over every app."""
    client = api_client(kubeconfig)
    metrics = OperatorMetrics(CollectorRegistry())
    me = identity()
    controller = build(settings, client, metrics, me)
    if once:
        return _once(controller, settings)
    leading = threading.Event()

    def ready() -> tuple[bool, str | None]:
        if not settings.leader_election.enabled or leading.is_set():
            return (True, None) if controller.running else (False, "starting the watches")
        return True, "standing by: another replica leads"  # a follower is ready to take over

    server = HttpServer(http_app(metrics.registry, ready), "0.0.0.0", settings.metrics_port).start() if settings.metrics_port else None
    stopped = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        stopped.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("operator_started", namespaces=settings.namespaces, identity=me, leader_election=settings.leader_election.enabled)
    try:
        if not settings.leader_election.enabled:
            metrics.leader.set(1)
            controller.start()
            stopped.wait()
            return 0
        return _lead(settings, client, controller, metrics, me, leading)
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        controller.stop()
        if server is not None:
            server.stop()


def _lead(settings: OperatorSettings, client: Any, controller: Controller, metrics: OperatorMetrics, me: str, leading: threading.Event) -> int:
    le = settings.leader_election

    def started() -> None:
        log.info("leading", lease=le.lease_name, identity=me)
        leading.set()
        metrics.leader.set(1)
        controller.start()

    def stopped_leading() -> None:
        log.error("leadership_lost", lease=le.lease_name, identity=me)
        leading.clear()
        metrics.leader.set(0)
        controller.stop()

    namespace = le.lease_namespace or own_namespace() or "default"
    elector = LeaderElector(client, namespace=namespace, name=le.lease_name, identity=me, timings=le.timings,
                            on_started=started, on_stopped=stopped_leading)
    elector.run()  # returns once the Lease could not be renewed
    return 1


def _once(controller: Controller, settings: OperatorSettings) -> int:
    """Every app once, in this thread (``--once``: a one-off reconcile, e.g. from a CI job)."""
    for namespace in settings.namespaces:
        controller.on_list(namespace, controller.gateway.list_apps(namespace).items)
    failed = 0

    def count(key: str, seconds: float, error: BaseException | None) -> None:
        nonlocal failed
        failed += error is not None

    controller.on_pass = count
    for key in controller.queue.due():
        controller.process(key)
    return 1 if failed else 0
