"""A daemon without Spark: the real reconciler, metrics, audit trail and REST API over the fake
cluster, served by the real HTTP server on a loopback port.

Ticks are driven by the test on a :class:`FakeClock` (``tick()``/``run_for()``), so every
assertion about "the next tick" is deterministic, while HTTP requests go through uvicorn and
httpx exactly as an operator's would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Iterator

import httpx
from prometheus_client import CollectorRegistry

from autoscaler.api import create_app
from autoscaler.auth import ApiAuth
from autoscaler.clock import FakeClock
from autoscaler.loop import ReconcileLoop
from autoscaler.metrics import Metrics
from autoscaler.reconciler import Reconciler, TickRecord
from autoscaler.server import HttpServer
from autoscaler.settings import Settings, load_settings
from tests.fakes import FakeCluster, LoadFeeder, query_view

TOKEN = "test-token-0123456789abcdef"
APP = "harness"
TICK = timedelta(seconds=5)


@dataclass
class Daemon:
    settings: Settings
    clock: FakeClock
    cluster: FakeCluster
    reconciler: Reconciler
    loop: ReconcileLoop
    registry: CollectorRegistry
    metrics: Metrics
    feeder: LoadFeeder | None
    records: list[TickRecord] = field(default_factory=list)
    server: HttpServer | None = None
    client: httpx.Client | None = None

    def tick(self, rate: float | None = None) -> TickRecord:
        self.clock.advance(TICK)
        if self.feeder is not None and rate is not None:
            self.feeder.run_until(self.clock.now(), rate)
        self.loop.run_once()
        assert self.reconciler.last is not None
        return self.reconciler.last

    def run_for(self, seconds: float, rate: float | None = None) -> list[TickRecord]:
        return [self.tick(rate) for _ in range(int(seconds / TICK.total_seconds()))]

    @property
    def auth_header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}


def build(
    overrides: dict[str, Any] | None = None,
    *,
    auth: ApiAuth | None = None,
    query: bool = True,
    executors: int = 1,
    state_store: Any = None,
    **cluster_kw: Any,
) -> Daemon:
    settings = load_settings(
        None,
        {
            "executors.min": 1,
            "executors.max": 6,
            "reconcile_interval": "5s",
            "request_timeout": "30s",
            "normalize.scale_down_delay": "30s",
            "normalize.stabilization": "10s",
            "window.metrics_window": "30s",
            **(overrides or {}),
        },
        environ={},
    )
    clock = FakeClock()
    cluster = FakeCluster(clock.now(), executors=executors, **cluster_kw)
    feeder = None
    if query:
        cluster.add_query(query_view("q", parallelism=8, max_parallelism=8))
        feeder = LoadFeeder(cluster, "q", clock.now())
    registry = CollectorRegistry()
    metrics = Metrics(registry, application=APP, policy=settings.policy.name)
    metrics.configure(settings)
    records: list[TickRecord] = []

    def on_tick(r: TickRecord) -> None:
        records.append(r)
        metrics.observe_tick(r)

    rec = Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock,
                     state_store=state_store, on_tick=on_tick)
    loop = ReconcileLoop(rec, clock, settings.reconcile_interval, on_error=lambda phase, exc: metrics.tick_failed(phase))
    return Daemon(settings, clock, cluster, rec, loop, registry, metrics, feeder, records)


def serve(daemon: Daemon, auth: ApiAuth | None = None) -> Iterator[Daemon]:
    """Serve the daemon's API on an ephemeral loopback port (use as a generator fixture)."""
    auth = auth if auth is not None else ApiAuth({TOKEN: "alice"})
    app = create_app(
        reconciler=daemon.reconciler,
        loop=daemon.loop,
        registry=daemon.registry,
        auth=auth,
        metrics=daemon.metrics,
        clock=daemon.clock,
        application=APP,
    )
    server = HttpServer(app, "127.0.0.1", 0).start()
    daemon.server = server
    with httpx.Client(base_url=server.url, timeout=10) as client:
        daemon.client = client
        try:
            yield daemon
        finally:
            server.stop()
