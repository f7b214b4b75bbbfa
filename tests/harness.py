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

from autoscaler.app.compose import assemble, configure, new_metrics
from autoscaler.core.model import TickRecord
from autoscaler.core.settings import Settings
from autoscaler.ops.api import create_app
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.metrics import Metrics
from autoscaler.ops.server import HttpServer
from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.tools.dashboard.recording import MetricsRecorder
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
    query_name: str = "q",
    report_backlog: bool = False,
    executors: int = 1,
    state_store: Any = None,
    **cluster_kw: Any,
) -> Daemon:
    settings = configure(
        None,
        {
            "executors.min": 1,
            "executors.max": 6,
            # the harness follows quick steps up and down: this policy turns within a minute
            "policy.name": "target-utilization",
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
        cluster.add_query(query_view(query_name, parallelism=8, max_parallelism=8))
        feeder = LoadFeeder(cluster, query_name, clock.now(), report_backlog=report_backlog)
    metrics = new_metrics(settings, APP)
    records: list[TickRecord] = []
    wired = assemble(settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=state_store,
                     metrics=metrics, on_tick=records.append)
    return Daemon(settings, clock, cluster, wired.reconciler, wired.loop, metrics.registry, metrics, feeder, records)


def serve(daemon: Daemon, auth: ApiAuth | None = None, live_status: Any = None) -> Iterator[Daemon]:
    """Serve the daemon's API on an ephemeral loopback port (use as a generator fixture);
    ``live_status`` stands for the query host's ``statuses``."""
    auth = auth if auth is not None else ApiAuth({TOKEN: "alice"})
    app = create_app(
        reconciler=daemon.reconciler,
        loop=daemon.loop,
        registry=daemon.registry,
        auth=auth,
        metrics=daemon.metrics,
        clock=daemon.clock,
        application=APP,
        live_status=live_status,
    )
    server = HttpServer(app, "127.0.0.1", 0).start()
    daemon.server = server
    with httpx.Client(base_url=server.url, timeout=10) as client:
        daemon.client = client
        try:
            yield daemon
        finally:
            server.stop()


def record_scenario(path: Any) -> Daemon:
    """A fake-cluster run that moves every dashboard panel, recorded like `demo --record`.

    Load 400 -> 2500 -> 400 rows/s, an executor lost at the peak, a failed observation, an
    operator pause and resume, and an operator rate-limit change (a query restart with its
    pause). Used for the docs' dashboard PNG until it is regenerated from a real demo run.
    """
    d = build({"normalize.query_rescale_cooldown": "20s"}, query_name="taxi", report_backlog=True)
    recorder = MetricsRecorder(d.registry, path)
    d.reconciler.on_tick = _chain(d.reconciler.on_tick, recorder)
    commands = _commands(d)
    d.run_for(60, rate=400)
    d.run_for(90, rate=2500)
    d.cluster.lose(sorted(d.cluster.alive)[-1])
    d.run_for(30, rate=2500)
    d.cluster.fail_next_observe = RuntimeError("driver REST timed out")
    d.run_for(20, rate=400)
    commands.change_control("alice", {"paused": True}, "maintenance window")
    d.run_for(30, rate=400)
    commands.change_control("alice", {"paused": False})
    d.run_for(30, rate=400)
    commands.request_query("bob", "taxi", {"max_rows_per_batch": 2000})
    d.run_for(120, rate=400)
    recorder.close()
    return d


def _chain(*callbacks: Any) -> Any:
    def call(record: TickRecord) -> None:
        for cb in callbacks:
            if cb is not None:
                cb(record)

    return call


def _commands(d: Daemon) -> Any:
    from autoscaler.runtime.commands import Commands

    return Commands(d.reconciler, clock=d.clock, metrics=d.metrics)


if __name__ == "__main__":  # python -m tests.harness docs/img/dashboard.png
    import sys
    import tempfile
    from pathlib import Path

    from autoscaler.tools.dashboard.recording import Recording
    from autoscaler.tools.dashboard.render import render_recording

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img/dashboard.png")
    with tempfile.TemporaryDirectory() as tmp:
        rec_path = Path(tmp) / "recording.jsonl"
        record_scenario(rec_path)
        report = render_recording(Recording.load(rec_path), out,
                                  title="spark-autoscaler dashboard (fake-cluster scenario; regenerate from `demo --record`)")
    print(f"wrote {out}: " + ", ".join(f"{k}={v}" for k, v in report.series.items()))
