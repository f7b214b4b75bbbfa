"""``flink-autoscaler``: the Flink Kubernetes Operator's job autoscaler (FLIP-271) as a baseline.

Published behaviour (``ScalingMetricEvaluator``, ``JobVertexScaler``, ``AutoScalerUtils``;
code defaults), with a query in the role of a job vertex and executor cores in the role of
its parallelism:

* no metrics for ``stabilization.interval`` (5 min) after a (re)start or rescale, then nothing
  until ``metrics.window`` (15 min) has filled; every value is averaged over the window;
* true processing rate ``TPR = input rate / busy ratio`` (rows per busy second);
* target data rate = input rate + backlog growth; catch-up rate = ``lag / catch-up.duration``
  (30 min); restart term = ``target x restart.time / catch-up.duration`` (5 min);
* dead band: scale-up threshold = ``catch-up + target / utilization.max`` (1.0), scale-down
  threshold = ``catch-up + restart + target / utilization.min`` (0.4); in backlog mode (lag over
  ``backlog-processing.lag-threshold``, 5 min, of input) the minimum is 0: no scale-down;
* new parallelism ``ceil(factor x current)`` with ``factor = (catch-up + restart + target / 0.7)
  / TPR`` clamped to ``[1 - 0.6, 1 + 100000]``, aligned upwards to a divisor of the source
  partitions (``EVENLY_SPREAD``; never more than the partitions), keeping the current value if
  alignment would invert the direction;
* a rescale happens only when the vertex is outside the dead band; a scale-down waits for
  ``scale-down.interval`` (1 h) and then takes the largest recommendation of that window (the
  normalization's delayed scale-down, configured by ``settings_profile``); any scale-up or an
  unchanged recommendation cancels it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Mapping

from pydantic import Field

from autoscaler.core.evaluate import arrival_rate
from autoscaler.core.history import EXECUTORS
from autoscaler.core.model import Proposal, QueryLoad, QueryStatus, QueryView, Reason
from autoscaler.core.policy import NO_EXTRA_SAFETY, Policy, PolicyInput, PolicyParams
from autoscaler.core.settings import Duration
from policies.registry import register
from policies.sizing import waiting_rows


def evenly_spread(new: int, current: int, partitions: int) -> int:
    """Flink's EVENLY_SPREAD alignment: the smallest divisor of the partitions >= ``new``."""
    if new >= partitions:
        aligned = partitions
    else:
        aligned = next(p for p in range(max(1, new), partitions + 1) if partitions % p == 0)
    if (aligned - current) * (new - current) < 0:
        return current  # alignment must not invert the scaling direction
    return aligned


@dataclass(frozen=True)
class VertexDecision:
    name: str
    current: int  # cores the query runs on
    new: int  # recommended cores
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

    def _vertex(self, view: QueryView, load: QueryLoad, inp: PolicyInput) -> VertexDecision | str:
        p = self.p
        now = inp.now
        starts = [t for t in (view.run_started_at, inp.history.last_change_at(EXECUTORS)) if t is not None]
        collect_from = max(starts) + p.stabilization_interval if starts else now
        if now - collect_from < p.metrics_window:
            return "metrics window not full yet"
        since = now - p.metrics_window
        samples = [s for s in view.samples if s.started_at >= collect_from and since <= s.ended_at <= now]
        if len(samples) < 2:
            return "too few batches in the metrics window"
        window = p.metrics_window.total_seconds()
        busy_seconds = sum(s.duration.total_seconds() for s in samples)
        rows = sum(s.input_rows for s in samples)
        target_rate = arrival_rate(samples) or 0.0
        tpr = rows / busy_seconds if busy_seconds > 0 and rows > 0 else math.inf
        lag_rows = waiting_rows(load, view.params.trigger_interval)
        catch_up = p.catch_up_duration.total_seconds()
        catch_up_rate = lag_rows / catch_up if catch_up > 0 else 0.0
        restart_rate = target_rate * p.restart_time.total_seconds() / catch_up if catch_up > 0 else 0.0
        backlog_mode = target_rate > 0 and lag_rows / target_rate > p.backlog_lag_threshold.total_seconds()
        u_max = 1.0 if backlog_mode else min(1.0, p.target_utilization + p.utilization_boundary)
        u_min = 0.0 if backlog_mode else max(0.0, p.target_utilization - p.utilization_boundary)
        up_threshold = catch_up_rate + target_rate / u_max
        down_threshold = catch_up_rate + restart_rate + target_rate / u_min if u_min > 0 else math.inf
        outside = tpr < up_threshold or tpr > down_threshold
        capacity = catch_up_rate + restart_rate + target_rate / p.target_utilization
        factor = capacity / tpr if math.isfinite(tpr) else 0.0
        factor = min(max(factor, 1 - p.scale_down_max_factor), 1 + p.scale_up_max_factor)
        current = max(1, inp.current_cores)
        max_cores = inp.max_executors * max(1, inp.cores_per_executor)
        new = max(1, min(max_cores, math.ceil(factor * current)))
        new = evenly_spread(new, current, view.params.parallelism)
        message = (
            f"{view.name}: TPR {tpr:.0f} rows/s, target {target_rate:.0f} rows/s, busy {busy_seconds / window:.2f}, "
            f"bounds ({up_threshold:.0f}, {down_threshold:.0f}){' backlog mode' if backlog_mode else ''}: {current} -> {new}"
        )
        return VertexDecision(view.name, current, new, outside, busy_seconds / window, message)

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
        if not any(d.outside and d.new != d.current for d in decisions):
            return Proposal(hold, Reason.WITHIN_TARGET, message, details=details)
        k = max(1, inp.cores_per_executor)
        executors = math.ceil(sum(d.new if d.outside else d.current for d in decisions) / k)
        up = any(d.outside and d.new > d.current for d in decisions)
        return Proposal(executors, Reason.SCALE_UP_FOR_LOAD if up else Reason.SCALE_DOWN_FOR_LOAD, message, details=details)
