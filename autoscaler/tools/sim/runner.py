"""Run the real reconciler against the simulator for a trace and score it.

``simulate`` builds the settings (the policy's own ``settings_profile`` first, then the
caller's overrides), a :class:`~autoscaler.tools.sim.cluster.SimCluster` and a
:class:`~autoscaler.runtime.reconciler.Reconciler` on a :class:`~autoscaler.runtime.clock.FakeClock`, ticks it
every ``tick`` seconds over the workload and returns a :class:`SimResult`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Callable, Iterator, Mapping

import structlog

from autoscaler.app.compose import assemble, configure
from autoscaler.core.model import ActionKind, TickRecord
from autoscaler.core.settings import MAX_DURATION, MAX_EXECUTORS, MIN_RECONCILE_INTERVAL
from autoscaler.runtime.audit import AuditTrail
from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.reconciler import TickError
from autoscaler.tools.sim.cluster import SimCluster
from autoscaler.tools.sim.config import SimConfig
from autoscaler.tools.sim.metrics import (
    BUDGET_RESCALES_PER_DAY,
    budget_oracle_schedule,
    ceiling_slo_violation_fraction,
    executors_for_rate,
    lag_percentile,
    max_lag,
    online_reference_for,
    oracle_executor_seconds,
    overshoot_fraction,
    time_above,
)
from autoscaler.tools.sim.workload import Workload, workload_from_trace
from autoscaler.tools.traces import Trace
from policies import load_policies, policy_class, resolve_name


class SimulationError(Exception):
    """A tick of the simulated daemon failed (a policy raised, say): when, in which step, and why."""


@dataclass
class Series:
    """Per-tick samples for plots (seconds since the start)."""

    t: list[float] = field(default_factory=list)
    input_rate: list[float] = field(default_factory=list)
    capacity: list[float] = field(default_factory=list)
    executors: list[int] = field(default_factory=list)  # allocated: registered + starting
    oracle: list[int] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    # the budget bound's schedule: (t, executors from t on) at each change (perfect foresight
    # within the rescale target; filled at the end of the run)
    budget: list[tuple[float, int]] = field(default_factory=list)


@dataclass
class _Tally:
    """What the actions of the ticks changed, counted for the result."""

    executor_changes: int = 0  # ticks that changed the executor count
    restarts: int = 0  # query rescales started (each a restart from the checkpoint)
    rescales: int = 0  # ticks that changed executors or restarted a query

    def add(self, record: TickRecord) -> None:
        done = [r.action for r in record.results if r.ok]
        self.restarts += done.count(ActionKind.RESCALE)
        self.rescales += record.acted
        if record.decision.changes and (ActionKind.SET_TARGET in done or ActionKind.REMOVE in done):
            self.executor_changes += 1


def _record_series(out: Series, cluster: SimCluster, capacity: float, max_executors: int) -> None:
    t = cluster.t
    rate = cluster.workload.rate_at(t)
    out.t.append(t)
    out.input_rate.append(rate)
    out.capacity.append(cluster.capacity_now())
    out.executors.append(cluster.allocated())
    out.oracle.append(min(max_executors, executors_for_rate(rate, capacity)))
    out.lag.append(cluster.lag_now())
    out.partitions.append(cluster.params.parallelism)


@dataclass(frozen=True)
class SimResult:
    policy: str
    trace: str
    executor_seconds: float
    oracle_executor_seconds: float
    cost_ratio: float
    # the cheapest clairvoyant schedule within the rescale target (a lower bound, see metrics)
    budget_oracle_executor_seconds: float
    budget_oracle_cost_ratio: float
    budget_rescales_per_day: float
    # overshoot_fraction of that schedule: above 5 % no policy within the rescale target keeps to 5 %
    budget_oracle_overshoot_fraction: float
    # an idealised online policy within the same budget (instant executors, the need seen as it
    # comes, ski-rental releases at the best price in hindsight; see metrics.online_reference):
    # the part of a policy's distance from the bound that knowing only the past costs by itself
    ski_rental_cost_ratio: float
    slo_violation_fraction: float
    # the SLO violations no policy within the ceiling avoids: the share of time a queue served by
    # every core of the ceiling at once, with no overhead, lags beyond the SLO (metrics)
    ceiling_slo_violation_fraction: float
    # share of executor-seconds above twice the oracle's largest need in the surrounding 10 minutes
    overshoot_fraction: float
    p95_lag_seconds: float
    max_lag_seconds: float
    rescales: int
    rescales_per_day: float
    simulated_seconds: float
    # context
    executor_changes: int
    query_restarts: int
    mean_executors: float
    oracle_mean_executors: float
    peak_executors: int  # executors the trace's scale_quantile needs (1: its peak)
    scale_quantile: float
    max_executors: int
    partitions: int
    slo_lag_seconds: float
    tick_seconds: float
    seed: int
    batches: int
    wall_seconds: float
    series: Series | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("series")
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 6)
        return out


def quiet_logs() -> None:
    """Drop the reconciler's info logs (a simulated month would print millions of lines) and
    write its warnings to stderr: stdout carries the results (``--json``)."""
    if not structlog.is_configured():
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
            # the stream is looked up per logger, not bound once (tests swap sys.stderr)
            logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        )


def build_workload(trace: Trace, *, config: SimConfig, peak_executors: int, days: float | None, scale_quantile: float = 1.0) -> Workload:
    return workload_from_trace(trace, peak_rate=peak_executors * config.executor_capacity(), days=days, quantile=scale_quantile)


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the tick loop.

    A tick allocates a few hundred short-lived objects, which start a young-generation
    collection every few ticks; the loop makes no reference cycles (a day of ELB leaves none
    for the collector), so reference counting frees everything and the pauses only cost time
    (about a tenth of the loop, measured on this 2-core machine).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def policy_ceiling(peak_executors: int, max_executors: int | None = None) -> int:
    """The most executors a simulation lets its policies (and its oracles) use: ``max_executors``,
    else twice what the trace's peak needs, within any cluster's ``MAX_EXECUTORS``."""
    return max_executors or min(MAX_EXECUTORS, 2 * peak_executors)


def simulate(
    source: Trace | Workload,
    *,
    policy: str = "default",
    params: Mapping[str, Any] | None = None,
    peak_executors: int = 32,
    scale_quantile: float = 1.0,
    max_executors: int | None = None,
    slo_lag_seconds: float = 60.0,
    days: float | None = None,
    seed: int = 0,
    config: SimConfig | None = None,
    tick: float = 10.0,
    settings: Mapping[str, Any] | None = None,
    series: bool = False,
    on_tick: Callable[[TickRecord, SimCluster], None] | None = None,
    progress: Callable[[float], None] | None = None,
) -> SimResult:
    """Simulate ``policy`` on a trace (scaled so that its ``scale_quantile``, by default its peak,
    needs ``peak_executors``) or a workload.

    ``on_tick`` sees every tick's record and the cluster (scenario tests, tracing);
    ``progress`` is told the share of the ticks done, about every percent and once at the end.
    """
    if not 1 <= peak_executors <= MAX_EXECUTORS:
        raise ValueError(f"peak executors must be within 1..{MAX_EXECUTORS}")
    if max_executors is not None and not 1 <= max_executors <= MAX_EXECUTORS:
        raise ValueError(f"max executors must be within 1..{MAX_EXECUTORS}")
    longest = MAX_DURATION.total_seconds()
    if not 0 < slo_lag_seconds <= longest:
        raise ValueError(f"the SLO lag must be > 0 s and at most {MAX_DURATION.days} days, got {slo_lag_seconds:g} s")
    shortest = MIN_RECONCILE_INTERVAL.total_seconds()
    if not shortest <= tick <= longest:
        raise ValueError(f"the tick (the daemon's reconcile interval) must be within {shortest:g} s and {MAX_DURATION.days} days, got {tick:g} s")
    if days is not None and days <= 0:
        raise ValueError("days must be > 0")
    cfg = config or SimConfig()
    capacity = cfg.executor_capacity()
    if capacity <= 0:
        raise ValueError("the configured executors cannot process anything within one trigger interval")
    workload = (
        source
        if isinstance(source, Workload)
        else build_workload(source, config=cfg, peak_executors=peak_executors, days=days, scale_quantile=scale_quantile)
    )
    ticks = int(math.floor(workload.duration / tick + 1e-9))
    if ticks < 1:
        raise ValueError(f"the simulated span ({workload.duration:g} s) is shorter than one tick ({tick:g} s): nothing would be decided")
    max_exec = policy_ceiling(peak_executors, max_executors)
    load_policies()
    cls = policy_class(policy)  # PolicyError for unknown names
    name = resolve_name(policy)
    policy_params = dict(params or {})
    if name == "static" and "executors" not in policy_params:
        policy_params["executors"] = peak_executors  # a static deployment sized for the peak
    overrides: dict[str, Any] = {
        "mode": "active",
        "executors.min": 1,
        "executors.max": max_exec,
        "reconcile_interval": tick,  # seconds
        "slo.target_lag": slo_lag_seconds,
        # 20 minutes of batches at the 10 s trigger: every window in use fits, and the
        # reconciler scans half the default buffer each tick
        "window.max_samples": 120,
        **dict(cls.settings_profile),
        **dict(settings or {}),
        "policy.name": policy,
        "policy.params": policy_params,
    }
    s = configure(None, overrides, environ={})
    quiet_logs()

    reactive = s.mode.value == "reactive"
    start_rate = workload.rate_at(0.0)
    initial = peak_executors if reactive else min(max_exec, executors_for_rate(start_rate, capacity))
    cores = cfg.cores_per_executor
    partitions = cfg.partitions or 2 * peak_executors * cores
    cluster = SimCluster(
        config=cfg,
        workload=workload,
        executors=initial,
        partitions=partitions,
        seed=seed,
        max_samples=s.window.max_samples,
        max_parallelism=4 * max_exec * cores,
        report_batch_rows=s.window.running_batch_rows,
        report_planned_rows=s.window.planned_batch_rows,
    )
    clock = FakeClock(workload.start)
    rec = assemble(s, observer=cluster, executors=cluster, queries=cluster, clock=clock, audit=AuditTrail(max_count=1)).reconciler
    out = Series() if series else None
    step = timedelta(seconds=tick)
    tally = _Tally()
    report_every = max(1, math.ceil(ticks / 100))  # at most 100 reports, and the last
    started = time.perf_counter()
    with _without_cycle_collection():
        for i in range(ticks):
            if progress is not None and i % report_every == 0:
                progress(i / ticks)
            clock.advance(step)
            try:
                record = rec.tick()
            except TickError as exc:
                raise _failed(exc, clock.now() - workload.start, name) from exc
            tally.add(record)
            if on_tick is not None:
                on_tick(record, cluster)
            if out is not None:
                _record_series(out, cluster, capacity, max_exec)
    cluster.advance_to(workload.duration)
    wall = time.perf_counter() - started
    if progress is not None:
        progress(1.0)

    duration = workload.duration
    # the oracles within the same bounds as the policies: a spike beyond the ceiling costs them no more
    oracle = oracle_executor_seconds(workload, capacity, s.executors.min, max_exec)
    budget = budget_oracle_schedule(workload, capacity, s.executors.min, BUDGET_RESCALES_PER_DAY, max_exec)
    budget_allocation = budget.allocation()
    ski_rental = online_reference_for(workload, capacity, s.executors.min, BUDGET_RESCALES_PER_DAY, max_exec)
    if out is not None:
        out.budget = budget_allocation
    completions = cluster.completions
    days_simulated = duration / 86400.0
    return SimResult(
        policy=policy,
        trace=workload.name,
        executor_seconds=cluster.executor_seconds,
        oracle_executor_seconds=oracle,
        cost_ratio=cluster.executor_seconds / oracle if oracle > 0 else math.inf,
        budget_oracle_executor_seconds=budget.lower,
        budget_oracle_cost_ratio=budget.lower / oracle if oracle > 0 else math.inf,
        budget_rescales_per_day=BUDGET_RESCALES_PER_DAY,
        budget_oracle_overshoot_fraction=overshoot_fraction(budget_allocation, duration, workload, capacity, s.executors.min, max_exec),
        ski_rental_cost_ratio=ski_rental.executor_seconds / oracle if oracle > 0 else math.inf,
        slo_violation_fraction=time_above(completions, duration, slo_lag_seconds) / duration,
        ceiling_slo_violation_fraction=ceiling_slo_violation_fraction(workload, max_exec * cfg.cores_per_executor * cfg.rows_per_core_second, slo_lag_seconds),
        overshoot_fraction=overshoot_fraction(cluster.allocation, duration, workload, capacity, s.executors.min, max_exec),
        p95_lag_seconds=lag_percentile(completions, duration, 0.95),
        max_lag_seconds=max_lag(completions, duration),
        rescales=tally.rescales,
        rescales_per_day=tally.rescales / days_simulated,
        simulated_seconds=duration,
        executor_changes=tally.executor_changes,
        query_restarts=tally.restarts,
        mean_executors=cluster.executor_seconds / duration,
        oracle_mean_executors=oracle / duration,
        peak_executors=peak_executors,
        scale_quantile=scale_quantile,
        max_executors=max_exec,
        partitions=partitions,
        slo_lag_seconds=slo_lag_seconds,
        tick_seconds=tick,
        seed=seed,
        batches=cluster.batches,
        wall_seconds=wall,
        series=out,
    )


def _failed(exc: TickError, elapsed: timedelta, policy: str) -> SimulationError:
    return SimulationError(
        f"the simulation stopped on day {elapsed.total_seconds() / 86400:.2f} ({elapsed} simulated): "
        f"the {exc.phase} step of a tick failed with policy {policy!r}: {type(exc.cause).__name__}: {exc.cause}"
    )
