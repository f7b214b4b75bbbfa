"""``spark-autoscaler benchmark load``: the daemon with many queries, and its API under many clients.

Three measurements, in one process, against an application simulated in memory (no Spark):

* **the reconcile tick with N queries**: the real reconciler (default policy, its memos, the
  audit trail, the metrics) over an application whose N queries each receive rows at their own
  rate and run one batch per trigger, timed by a batch cost model; CPU time per tick
  (``time.process_time``) over the ticks after a warm-up, for each N, and how it grows with N;
* **the hindsight price**: CPU time of the default policy's rescale price over 1 and 7 days of
  remembered spiky load (what a tick adds per query once a rate step);
* **the REST API under concurrent clients**: the real HTTP server on a loopback port, the
  daemon ticking in a thread, C client threads each sending R requests (status, queries,
  decisions, metrics, and control changes with a valid token): how many answered 5xx, and the
  latency p50 and p99. Bounded in count (C x R) and in time (``deadline``).
"""

from __future__ import annotations

import json
import math
import random
import statistics
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from autoscaler.app.compose import assemble, configure, new_metrics
from autoscaler.core.model import (
    BatchCostModel,
    BatchSample,
    Executor,
    ExecutorView,
    QueryChange,
    QueryLoad,
    QueryParams,
    QueryStatus,
    QueryView,
    Reason,
    Snapshot,
)
from autoscaler.ops.api import create_app
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.server import HttpServer
from autoscaler.runtime.clock import FakeClock
from autoscaler.tools.sim.runner import quiet_logs

TRIGGER = timedelta(seconds=10)
MODEL = BatchCostModel(per_slot=900.0, per_task=0.05, fixed=0.2)
TOKEN = "load-benchmark-token-0123456789"


class ManyQueries:
    """An application with ``queries`` queries on ``executors`` executors (cluster ports).

    Query ``i`` receives ``base_rate x (1 + i mod 7) / 4`` rows/s, swinging +-50 % over an hour,
    and runs a batch every trigger timed by :data:`MODEL` on its share of the cores. Executor
    requests are granted at once; rescales take effect at once.
    """

    def __init__(self, queries: int, *, executors: int = 8, cores: int = 4, base_rate: float = 400.0, start: datetime) -> None:
        self.cores = cores
        self.executors = [Executor(id=str(i), cores=cores, added_at=start) for i in range(executors)]
        self.requested: int | None = None
        self.base_rate = base_rate
        self.start = start
        self.views = {
            f"q{i:03d}": QueryView(
                name=f"q{i:03d}",
                status=QueryStatus.RUNNING,
                params=QueryParams(parallelism=8, trigger_interval=TRIGGER),
                max_parallelism=64,
                run_started_at=start,
            )
            for i in range(queries)
        }
        self._next_batch = {name: start for name in self.views}
        self._batch_id = dict.fromkeys(self.views, 0)

    def _rate(self, index: int, at: datetime) -> float:
        hour = (at - self.start).total_seconds() / 3600.0
        return self.base_rate * (1 + index % 7) / 4 * (1 + 0.5 * math.sin(2 * math.pi * hour + index))

    def observe(self, now: datetime) -> Snapshot:
        cores = sum(e.cores for e in self.executors)
        share = max(1, cores // max(1, len(self.views)))
        for index, (name, view) in enumerate(self.views.items()):
            samples = list(view.samples[-60:])
            while self._next_batch[name] + TRIGGER <= now:
                t = self._next_batch[name]
                rows = int(self._rate(index, t) * TRIGGER.total_seconds())
                seconds = MODEL.duration(view.params.parallelism, share, rows)
                samples.append(
                    BatchSample(self._batch_id[name], t, timedelta(seconds=seconds), rows, rows / TRIGGER.total_seconds(),
                                rows / seconds, 0, cores=share, parallelism=view.params.parallelism, fixed_overhead=timedelta(seconds=MODEL.fixed))
                )
                self._batch_id[name] += 1
                self._next_batch[name] = t + max(TRIGGER, timedelta(seconds=seconds))
            self.views[name] = replace(view, samples=tuple(samples))
        executors = ExecutorView(tuple(self.executors), self.cores, True, Reason.CAN_REQUEST_EXECUTORS, requested_total=self.requested)
        return Snapshot(now, executors, tuple(self.views.values()))

    def set_target(self, total: int, now: datetime) -> bool:
        self.requested = total
        while len(self.executors) < total:
            self.executors.append(Executor(id=str(len(self.executors)), cores=self.cores, added_at=now))
        return True

    def remove(self, ids: Sequence[str], now: datetime) -> bool:
        self.executors = [e for e in self.executors if e.id not in set(ids)]
        if self.requested is not None:
            self.requested = max(0, self.requested - len(ids))
        return True

    def rescale(self, change: QueryChange, now: datetime) -> bool:
        self.views[change.name] = replace(self.views[change.name], params=change.to_params, run_started_at=now)
        return True


def _daemon(queries: int, *, policy: str = "default", max_executors: int = 64) -> tuple[Any, FakeClock, ManyQueries]:
    quiet_logs()  # a decision log line per tick would time the terminal, and stdout carries --json
    settings = configure(None, {"policy.name": policy, "executors.max": max_executors, "reconcile_interval": "10s", "mode": "active"}, environ={})
    clock = FakeClock()
    app = ManyQueries(queries, start=clock.now())
    daemon = assemble(settings, observer=app, executors=app, queries=app, clock=clock, metrics=new_metrics(settings, "load"))
    return daemon, clock, app


def tick_cost(queries: int, *, ticks: int = 60, warmup: int = 30, policy: str = "default") -> dict[str, Any]:
    """CPU milliseconds per tick of the reconciler with ``queries`` queries (after ``warmup`` ticks)."""
    daemon, clock, _ = _daemon(queries, policy=policy)
    costs = []
    for i in range(warmup + ticks):
        clock.advance(TRIGGER)
        began = time.process_time()
        daemon.reconciler.tick()
        if i >= warmup:
            costs.append((time.process_time() - began) * 1000)
    costs.sort()
    return {
        "queries": queries,
        "ticks": ticks,
        "cpu_ms_per_tick_median": round(statistics.median(costs), 3),
        "cpu_ms_per_tick_p95": round(costs[min(len(costs) - 1, math.ceil(0.95 * len(costs)) - 1)], 3),
    }


def _requests(i: int, queries: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    """The requests of client ``i``: mostly reads, and a control change now and then."""
    reads: list[tuple[str, str, dict[str, Any] | None]] = [("GET", "/api/v1/status", None), ("GET", "/api/v1/queries", None), ("GET", "/api/v1/decisions", None), ("GET", "/metrics", None)]
    query = f"q{i % queries:03d}"
    writes: list[tuple[str, str, dict[str, Any] | None]] = [("PATCH", "/api/v1/control", {"max_executors": 48 + i % 8}), ("PATCH", f"/api/v1/queries/{query}", {"max_rows_per_batch": 5000 + i})]
    return reads + writes[: 1 + i % 2]


def _send(url: str, method: str, body: dict[str, Any] | None) -> int:
    """The status of one request (0: no answer at all)."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {TOKEN}", **({"Content-Type": "application/json"} if data else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=30) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def api_under_load(*, clients: int = 50, requests_per_client: int = 40, queries: int = 20, deadline: float = 120.0) -> dict[str, Any]:
    """The API of a ticking daemon with ``queries`` queries under ``clients`` concurrent clients."""
    daemon, clock, _ = _daemon(queries)
    for _ in range(6):
        clock.advance(TRIGGER)
        daemon.reconciler.tick()
    app = create_app(reconciler=daemon.reconciler, loop=daemon.loop, registry=daemon.registry, auth=ApiAuth({TOKEN: "load"}),
                     metrics=daemon.metrics, clock=clock, application="load")
    stop = threading.Event()
    ticks = [0]

    def tick() -> None:
        while not stop.is_set():
            clock.advance(TRIGGER)
            daemon.reconciler.tick()
            ticks[0] += 1
            stop.wait(0.05)

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    ends = time.monotonic() + deadline

    def client(i: int, url: str) -> None:
        plan = _requests(i, queries)
        for n in range(requests_per_client):
            if time.monotonic() > ends:
                return
            method, path, body = plan[n % len(plan)]
            began = time.perf_counter()
            status = _send(url + path, method, body)
            with lock:
                latencies.append((time.perf_counter() - began) * 1000)
                statuses[status] = statuses.get(status, 0) + 1

    with HttpServer(app, "127.0.0.1", 0) as server:
        ticker = threading.Thread(target=tick, name="load-ticker", daemon=True)
        ticker.start()
        began = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i, server.url), daemon=True) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(deadline + 30)
        wall = time.perf_counter() - began
        stop.set()
        ticker.join(30)
    latencies.sort()
    return {
        "clients": clients,
        "requests": len(latencies),
        "seconds": round(wall, 2),
        "ticks_meanwhile": ticks[0],
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors": sum(v for k, v in statuses.items() if k >= 500 or k == 0),
        "latency_ms_p50": round(statistics.median(latencies), 1) if latencies else None,
        "latency_ms_p99": round(latencies[min(len(latencies) - 1, math.ceil(0.99 * len(latencies)) - 1)], 1) if latencies else None,
    }


def hindsight_price_cost(days: Sequence[int] = (1, 7), *, repeats: int = 5, seed: int = 1) -> list[dict[str, Any]]:
    """CPU milliseconds the default policy takes to price a rescale (its hindsight price, the
    rescale budget's dynamic programme over the remembered load) with ``days`` remembered.

    The load is the worst case for the programme: 5-minute steps of a seeded random burst each,
    no two steps of the same need to join. The daemon recomputes the price once a rate step per
    query that considers a scale-down, in the tick that crosses the step: with N such queries
    that tick takes about N times this. The steady load of :func:`tick_cost` never shows it
    (one need, one step)."""
    from autoscaler.core.history import RatePoint, ScalingHistory
    from autoscaler.core.policy import PolicyInput
    from policies import create_policy
    from policies.predictive import PredictiveMemo, PredictivePolicy

    rnd = random.Random(seed)
    steps = max(days) * 288
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    now = start + timedelta(minutes=5 * steps)
    rates = tuple(RatePoint(start + timedelta(minutes=5 * i), "q", rnd.choice((0.0, 500.0, 2000.0, 9000.0, 20000.0)) * rnd.random()) for i in range(steps))
    view = QueryView(name="q", status=QueryStatus.RUNNING, params=QueryParams(parallelism=32, trigger_interval=TRIGGER), max_parallelism=256)
    load = QueryLoad(name="q", samples=60, input_rate=5000.0, model=MODEL)
    executors = ExecutorView(tuple(Executor(id=str(i), cores=1) for i in range(16)), 1, True, Reason.CAN_REQUEST_EXECUTORS)
    inp = PolicyInput(now, Snapshot(now, executors, (view,)), {"q": load}, ScalingHistory(rates=rates), 1, 64, 1, timedelta(seconds=60))
    out = []
    for d in days:
        policy = create_policy("default", {"hindsight": f"{d}d"})
        assert isinstance(policy, PredictivePolicy)
        costs, price = [], 0.0
        for _ in range(repeats):
            began = time.process_time()
            price = policy._hindsight(view, MODEL, inp, PredictiveMemo()).price  # a fresh memo: computed, not kept
            costs.append((time.process_time() - began) * 1000)
        out.append({"days_remembered": d, "steps": d * 288, "price_executor_seconds": round(price), "cpu_ms_median": round(statistics.median(costs), 1)})
    return out


def run(query_counts: Sequence[int], *, ticks: int, clients: int, requests_per_client: int) -> dict[str, Any]:
    costs = [tick_cost(n, ticks=ticks) for n in query_counts]
    first, last = costs[0], costs[-1]
    growth = last["cpu_ms_per_tick_median"] / first["cpu_ms_per_tick_median"] if first["cpu_ms_per_tick_median"] else None
    return {
        "tick_cost": costs,
        "growth": {
            "queries": [first["queries"], last["queries"]],
            "cpu_ratio": round(growth, 2) if growth else None,
            "per_query_ratio": round(growth / (last["queries"] / first["queries"]), 2) if growth else None,
        },
        "hindsight_price": hindsight_price_cost(),
        "api": api_under_load(clients=clients, requests_per_client=requests_per_client),
    }


def format_table(result: dict[str, Any]) -> str:
    lines = ["queries  cpu ms/tick (median)  p95"]
    lines += [f"{c['queries']:7d}  {c['cpu_ms_per_tick_median']:20.2f}  {c['cpu_ms_per_tick_p95']:.2f}" for c in result["tick_cost"]]
    g, a = result["growth"], result["api"]
    lines.append(f"{g['queries'][0]} -> {g['queries'][1]} queries: {g['cpu_ratio']}x the CPU a tick ({g['per_query_ratio']}x per query)")
    for h in result["hindsight_price"]:
        lines.append(f"hindsight price, {h['days_remembered']} day(s) of spiky 5-minute steps remembered: {h['cpu_ms_median']} ms CPU per query and rate step")
    lines.append(
        f"API: {a['clients']} clients, {a['requests']} requests in {a['seconds']} s while {a['ticks_meanwhile']} ticks ran: "
        f"{a['server_errors']} server errors, latency p50 {a['latency_ms_p50']} ms, p99 {a['latency_ms_p99']} ms; statuses {a['statuses']}"
    )
    return "\n".join(lines)
