"""``flink-autoscaler``: the Flink Kubernetes Operator's job autoscaler (FLIP-271) as a baseline.

Published behaviour (``ScalingMetricEvaluator``, ``JobVertexScaler``, ``AutoScalerUtils``;
release 1.15.0, code defaults), with a query in the role of a job vertex and executor cores in
the role of its parallelism. Each step below is a function named after the Flink method it
ports, and ``tests/policies/test_flink_fidelity.py`` runs the numeric cases of Flink's own
``JobVertexScalerTest``, ``ScalingExecutorTest`` and ``ScalingMetricEvaluatorTest`` through them:

* no metrics for ``stabilization.interval`` (5 min) after a (re)start or rescale, then nothing
  until ``metrics.window`` (15 min) has filled; every value is averaged over the window;
* true processing rate ``TPR = rows / busy seconds`` (+inf when nothing was processed);
* target data rate = input rate + backlog growth; catch-up rate = ``lag / catch-up.duration``
  (30 min); restart term = ``target x restart.time / catch-up.duration`` (5 min);
  :func:`target_capacity` is ``getTargetProcessingCapacity``, rounded as Flink rounds;
* dead band (:func:`rate_thresholds`): scale-up threshold = ``catch-up + target / utilization.max``
  (1.0), scale-down threshold = ``catch-up + restart + target / utilization.min`` (0.4); in
  backlog mode (:func:`processing_backlog`: lag over ``backlog-processing.lag-threshold``, 5 min,
  of the source's processed rate) the band is [0, 1]: no scale-down;
* :func:`scale`: ``ceil(factor x current)`` with ``factor = (catch-up + restart + target / 0.7)
  / TPR`` clamped to ``[1 - 0.6, 1 + 100000]``, within ``[min(current, min), max(current, max)]``
  and the partitions; an unchanged value is no change; otherwise aligned to the partitions
  (``EVENLY_SPREAD``): upwards to a divisor, for a scale-down no further than the current value,
  else downwards to the fewest subtasks with the same records each, never inverting the
  direction;
* a rescale happens only when a query is outside the dead band; then every query whose value
  changed is applied; a scale-down waits for ``scale-down.interval`` (1 h) and then takes the
  largest recommendation of that window (the normalization's delayed scale-down, configured by
  ``settings_profile``); any scale-up or an unchanged recommendation cancels it.

Deliberate adaptations to Spark, each pinned by a test of the fidelity suite:

* **one pool of executors** is one slot-sharing group: the executors a proposal asks for are
  the largest parallelism of any query (Flink's slots), not a sum; every query's current
  parallelism is the pool's cores;
* **bounds are the operator's hard limits**: ``executors.min``/``max`` stand for
  ``vertex.min-parallelism``/``vertex.max-parallelism`` inside :func:`scale`, and the
  normalization then holds them whatever the current count (Flink keeps a vertex that is
  already outside its limits where it is);
* **the restart term stays** although adding executors restarts no Spark query (code defaults);
* **measured by micro-batch, never blind**: a batch's rows over its duration stand for Flink's
  busy time and records; while a long batch runs and fewer than two batches ended in the window,
  the latest completed batches give the TPR and the live load (the arrival rate including a
  running batch, the lag) gives the target and catch-up rates, as Flink's continuous busy-time,
  backpressure and ``pendingRecords`` samples would;
* not modelled (off by default in Flink): ineffective-scaling detection, the observed
  scalability coefficient, restart-time tracking, memory tuning and vetoes, excluded periods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Mapping, Sequence

from pydantic import Field

from autoscaler.core.evaluate import arrival_rate
from autoscaler.core.history import EXECUTORS
from autoscaler.core.model import BatchSample, Proposal, QueryLoad, QueryStatus, QueryView, Reason
from autoscaler.core.policy import NO_EXTRA_SAFETY, Policy, PolicyInput, PolicyParams
from autoscaler.core.settings import Duration
from policies.registry import register
from policies.sizing import waiting_rows


def java_round(x: float) -> float:
    """``Math.round`` on a double (half up; infinities kept)."""
    return x if math.isinf(x) or math.isnan(x) else float(math.floor(x + 0.5))


def target_capacity(
    target_rate: float,
    catch_up_rate: float,
    utilization: float,
    *,
    restart_seconds: float,
    catch_up_seconds: float,
    with_restart: bool,
) -> float:
    """``AutoScalerUtils.getTargetProcessingCapacity``: lag catch-up rate + restart catch-up rate +
    the target rate at ``utilization``, rounded."""
    utilization = min(1.0, max(0.0, utilization))
    if utilization == 0:
        return math.inf
    restart = 0.0 if not with_restart or catch_up_seconds == 0 else target_rate * restart_seconds / catch_up_seconds
    return java_round(catch_up_rate + restart + target_rate / utilization)


def processing_backlog(lag_rows: float, processed_rate: float, threshold_seconds: float) -> bool:
    """``ScalingMetricEvaluator.isProcessingBacklog``: the lag, in seconds of the source's
    processed rate (``numRecordsIn``), beyond the threshold."""
    if processed_rate <= 0 or math.isnan(processed_rate):
        return False
    return lag_rows / processed_rate > threshold_seconds


@dataclass(frozen=True)
class VertexMetrics:
    """What Flink's evaluator averages over the window for one vertex (here one query)."""

    parallelism: int  # cores the query runs on
    tpr: float  # TRUE_PROCESSING_RATE: rows per busy second (+inf: nothing processed)
    target_rate: float  # TARGET_DATA_RATE: input rate + lag growth
    catch_up_rate: float  # CATCH_UP_DATA_RATE: lag / catch-up duration
    backlog: bool = False  # processing backlog: the dead band is [0, 1]


def rate_thresholds(m: VertexMetrics, *, target: float, boundary: float, restart_seconds: float, catch_up_seconds: float) -> tuple[float, float]:
    """``computeProcessingRateThresholds``: (scale-up, scale-down) thresholds of the TPR."""
    upper, lower = (1.0, 0.0) if m.backlog else (target + boundary, target - boundary)
    kw: dict[str, Any] = {"restart_seconds": restart_seconds, "catch_up_seconds": catch_up_seconds}
    up = target_capacity(m.target_rate, m.catch_up_rate, upper, with_restart=False, **kw)
    down = target_capacity(m.target_rate, m.catch_up_rate, lower, with_restart=True, **kw)
    return up, down


def scale(current: int, factor: float, *, partitions: int, max_parallelism: int, lower: int, upper: int, aligned: bool = True) -> int:
    """``JobVertexScaler.scale``: ``ceil(factor x current)`` within ``[lower, min(max_parallelism,
    upper)]``, aligned to the partitions (``EVENLY_SPREAD``) when ``aligned``.

    ``partitions`` are the source partitions (or, with none known, the key groups
    ``max_parallelism``). An unchanged value returns before alignment. Phase 1 searches upwards
    for a divisor of the partitions, for a scale-down no further than ``current`` (finding
    ``current`` blocks it); phase 2 goes down to the fewest subtasks that keep the records per
    subtask; a result that would invert the direction keeps ``current``.
    """
    new = int(min(math.ceil(factor * current), 2**31 - 1))
    bound = min(max_parallelism, upper)
    new = min(max(lower, new), bound)
    if not aligned:
        return new
    groups = partitions if partitions > 0 else max_parallelism
    align_bound = min(groups, bound)
    if new == current:
        return new
    up = new > current
    for p in range(new, (align_bound if up else min(current, align_bound)) + 1):
        if groups % p == 0:
            return p
    p = new
    while p > 0:
        if groups // p > groups // new:
            if groups % p != 0:
                p += 1
            break
        p -= 1
    p = max(p, lower)
    if (up and p <= current) or (not up and p >= current):
        return current
    return p


@dataclass(frozen=True)
class VertexDecision:
    name: str
    current: int  # cores the query runs on
    new: int  # recommended cores (== current: no change)
    outside: bool  # TPR outside the utilization dead band
    busy: float
    message: str


@register("flink-autoscaler")
class FlinkAutoscalerPolicy(Policy):
    """Flink operator autoscaler: TPR at utilization 0.7 +- 0.3, catch-up 30 min, restart 5 min, lazy scale-down 1 h."""

    settings_profile: ClassVar[Mapping[str, Any]] = {**NO_EXTRA_SAFETY, "normalize.scale_down_delay": "1h"}
    needs_cost_model: ClassVar[bool] = False

    class Params(PolicyParams):
        target_utilization: float = Field(0.7, gt=0, le=1, description="utilization.target")
        utilization_boundary: float = Field(0.3, ge=0, description="target.utilization.boundary")
        catch_up_duration: Duration = Field(timedelta(minutes=30), description="catch-up.duration")
        restart_time: Duration = Field(timedelta(minutes=5), description="restart.time")
        metrics_window: Duration = Field(timedelta(minutes=15), description="metrics.window")
        stabilization_interval: Duration = Field(timedelta(minutes=5), description="stabilization.interval")
        backlog_lag_threshold: Duration = Field(timedelta(minutes=5), description="backlog-processing.lag-threshold")
        scale_down_max_factor: float = Field(0.6, ge=0, le=1, description="scale-down.max-factor")
        scale_up_max_factor: float = Field(100000.0, ge=0, description="scale-up.max-factor")

    def __init__(self, params: Params) -> None:
        self.p = params

    def vertex_change(
        self, m: VertexMetrics, *, partitions: int, max_parallelism: int, lower: int, upper: int, aligned: bool = True
    ) -> tuple[int, bool]:
        """``computeScaleTargetParallelism`` (without the delayed scale-down, which the
        normalization applies): (new parallelism, outside the dead band); ``new == current``
        is Flink's ``noChange``."""
        p = self.p
        kw = {"restart_seconds": p.restart_time.total_seconds(), "catch_up_seconds": p.catch_up_duration.total_seconds()}
        if math.isnan(m.tpr):
            return m.parallelism, False
        capacity = target_capacity(m.target_rate, m.catch_up_rate, p.target_utilization, with_restart=True, **kw)
        factor = capacity / m.tpr
        factor = min(max(factor, 1 - p.scale_down_max_factor), 1 + p.scale_up_max_factor)
        new = scale(m.parallelism, factor, partitions=partitions, max_parallelism=max_parallelism, lower=lower, upper=upper, aligned=aligned)
        if new == m.parallelism:
            return new, False
        up, down = rate_thresholds(m, target=p.target_utilization, boundary=p.utilization_boundary, **kw)
        return new, m.tpr < up or m.tpr > down

    def metrics(self, view: QueryView, load: QueryLoad, inp: PolicyInput) -> tuple[VertexMetrics, float] | str:
        """The query's :class:`VertexMetrics` over the window and its busy share, or why none yet."""
        p = self.p
        now = inp.now
        starts = [t for t in (view.run_started_at, inp.history.last_change_at(EXECUTORS)) if t is not None]
        collect_from = max(starts) + p.stabilization_interval if starts else now
        if now - collect_from < p.metrics_window:
            return "metrics window not full yet"
        since = now - p.metrics_window
        done = [s for s in view.samples if s.started_at >= collect_from and s.ended_at <= now]
        window = [s for s in done if s.ended_at >= since]
        live = False
        if len(window) < 2:
            # fewer than two batches ended in the window: a long batch runs (or the query
            # stalled). Flink's busy time, records and pendingRecords would keep coming: the
            # latest completed batches tell the TPR, the live load the target and the lag
            if len(done) < 2 or not (view.batch_running or (load.lag is not None and load.lag > p.metrics_window)):
                return "too few batches in the metrics window"
            window, live = done[-2:], True
        seconds = p.metrics_window.total_seconds()
        busy = sum(s.duration.total_seconds() for s in window)
        rows = sum(s.input_rows for s in window)
        tpr = rows / busy if busy > 0 and rows > 0 else math.inf
        target = (load.input_rate or 0.0) if live else (arrival_rate(window) or 0.0)
        lag_rows = waiting_rows(load, view.params.trigger_interval)
        catch_up = p.catch_up_duration.total_seconds()
        backlog = processing_backlog(lag_rows, processed_rate(window), p.backlog_lag_threshold.total_seconds())
        metrics = VertexMetrics(
            parallelism=max(1, inp.current_cores),
            tpr=tpr,
            target_rate=target,
            catch_up_rate=lag_rows / catch_up if catch_up > 0 else 0.0,
            backlog=backlog,
        )
        return metrics, (1.0 if live else busy / seconds)

    def _vertex(self, view: QueryView, load: QueryLoad, inp: PolicyInput) -> VertexDecision | str:
        found = self.metrics(view, load, inp)
        if isinstance(found, str):
            return found
        m, busy = found
        p = self.p
        k = max(1, inp.cores_per_executor)
        partitions = view.params.parallelism
        lower = min(m.parallelism, inp.min_executors * k)
        upper = max(m.parallelism, inp.max_executors * k)
        # a Spark source cannot use more cores than its partitions (Flink caps Kafka sources so)
        new, outside = self.vertex_change(m, partitions=partitions, max_parallelism=partitions, lower=lower, upper=upper)
        kw = {"restart_seconds": p.restart_time.total_seconds(), "catch_up_seconds": p.catch_up_duration.total_seconds()}
        up, down = rate_thresholds(m, target=p.target_utilization, boundary=p.utilization_boundary, **kw)
        message = (
            f"{view.name}: TPR {m.tpr:.0f} rows/s, target {m.target_rate:.0f} rows/s, busy {busy:.2f}, "
            f"bounds ({up:.0f}, {down:.0f}){' backlog mode' if m.backlog else ''}: {m.parallelism} -> {new}"
        )
        return VertexDecision(view.name, m.parallelism, new, outside, busy, message)

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        hold = inp.target_executors
        decisions: list[VertexDecision] = []
        for view in inp.snapshot.queries:
            load = inp.loads.get(view.name)
            if view.status != QueryStatus.RUNNING or load is None or not load.known:
                continue
            result = self._vertex(view, load, inp)
            if isinstance(result, str):
                return Proposal(hold, Reason.STABILIZING, f"{view.name}: {result}")
            decisions.append(result)
        if not decisions:
            return Proposal(None, Reason.NO_METRICS, "no query has evaluated batches yet")
        message = "; ".join(d.message for d in decisions)
        details = {f"{d.name}.busy": round(d.busy, 3) for d in decisions}
        return pool_proposal(decisions, hold, max(1, inp.cores_per_executor), message, details)


def pool_proposal(decisions: Sequence[VertexDecision], hold: int, cores_per_executor: int, message: str, details: Mapping[str, float]) -> Proposal:
    """``ScalingExecutor``'s job-level rule over one slot-sharing group: nothing changes unless a
    query is outside its dead band; then every query whose value changed is applied, and the pool
    needs as many cores as the largest of them (slots = the largest vertex parallelism)."""
    if not any(d.outside and d.new != d.current for d in decisions):
        return Proposal(hold, Reason.WITHIN_TARGET, message, details=dict(details))
    cores = max(d.new for d in decisions)
    executors = math.ceil(cores / cores_per_executor)
    up = any(d.new > d.current for d in decisions)
    return Proposal(executors, Reason.SCALE_UP_FOR_LOAD if up else Reason.SCALE_DOWN_FOR_LOAD, message, details=dict(details))


def processed_rate(samples: Sequence[BatchSample]) -> float:
    """The source's ``numRecordsIn`` rate over the batches: rows taken per second of the span from
    the first batch's start to the last one's (0 with fewer than two batches)."""
    if len(samples) < 2:
        return 0.0
    span = (samples[-1].started_at - samples[0].started_at).total_seconds()
    return sum(s.input_rows for s in samples[1:]) / span if span > 0 else 0.0
