"""``target-utilization``: size executors so each query runs at a target utilization.

In the spirit of DS2 and Flink's autoscaler, adapted to micro-batches:

* per-slot capacity ``mu`` (rows/s) and the fixed batch overhead ``a`` are fitted from the
  observed batches (:func:`autoscaler.window.fit_capacity`);
* a query with trigger interval ``I`` processes ``lambda x I`` rows per batch, which takes
  ``a + lambda x I / (mu x S)`` seconds on ``S`` effective slots, so its utilization is
  ``busy(S) = (a + lambda I / (mu S)) / I`` (``lambda / (mu S)`` without a trigger);
* nothing changes while every query's utilization stays within ``target +- band`` and no
  query lags beyond the SLO (Flink's dead band, "rescale only if a vertex is out of bounds");
* otherwise the required rate ``R = lambda + backlog / catch_up`` (plus
  ``lambda x restart_time / catch_up`` when a restart is needed) gives the slots
  ``S = R I / (mu (u I - a))`` and the fewest cores whose task waves reach them
  (:func:`autoscaler.capacity.min_cores_for`), so executors stay aligned with partitions;
* when even one task per partition is not enough, the query's partitions grow too (a rescale
  from the checkpoint), aligned to whole waves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from pydantic import Field

from autoscaler.capacity import aligned_parallelism, effective_slots, min_cores_for
from autoscaler.model import Proposal, QueryLoad, QueryStatus, QueryView, Reason
from autoscaler.settings import Duration
from policies.base import PolicyInput, PolicyParams, register


@dataclass(frozen=True)
class QueryNeed:
    name: str
    cores: int
    busy: float
    reason: Reason  # WITHIN_TARGET, SCALE_UP_FOR_LOAD, SCALE_UP_FOR_BACKLOG, SCALE_DOWN_FOR_LOAD
    parallelism: int | None = None  # new partitions, when the current ones cannot carry the load


def slots_for(rate: float, load: QueryLoad, trigger: timedelta | None, utilization: float) -> float:
    """Effective slots that process ``rate`` rows/s at ``utilization`` (see module docstring)."""
    mu = load.capacity_per_slot or 0.0
    if mu <= 0:
        return math.inf
    overhead = load.batch_overhead.total_seconds() if load.batch_overhead else 0.0
    interval = trigger.total_seconds() if trigger else 0.0
    if interval > 0 and utilization * interval > overhead:
        return rate * interval / (mu * (utilization * interval - overhead))
    return rate / (mu * utilization)


def busy_at(slots: float, load: QueryLoad, trigger: timedelta | None) -> float:
    """Predicted share of time a query spends executing batches on ``slots`` effective slots."""
    mu = load.capacity_per_slot or 0.0
    rate = load.input_rate or 0.0
    if slots <= 0 or mu <= 0:
        return math.inf
    overhead = load.batch_overhead.total_seconds() if load.batch_overhead else 0.0
    interval = trigger.total_seconds() if trigger else 0.0
    if interval > 0:
        return (overhead + rate * interval / (mu * slots)) / interval
    return rate / (mu * slots)


@register("target-utilization", aliases=("default",))
class TargetUtilizationPolicy:
    class Params(PolicyParams):
        target_utilization: float = Field(0.7, gt=0, le=1, description="Busy share each query is sized for.")
        utilization_band: float = Field(
            0.2, ge=0, lt=1, description="No change while utilization stays within target +- band."
        )
        catch_up_duration: Duration = Field(
            timedelta(minutes=2), description="Time allowed to drain a backlog after scaling."
        )
        restart_time: Duration = Field(
            timedelta(seconds=10),
            description="Assumed query restart pause; the largest measured pause is used once known.",
        )

    def __init__(self, params: Params) -> None:
        self.p = params

    def propose(self, inp: PolicyInput) -> Proposal:
        needs = [
            self._need(view, load, inp)
            for view in inp.snapshot.queries
            if view.status == QueryStatus.RUNNING
            and (load := inp.loads.get(view.name)) is not None
            and load.known
            and load.capacity_per_slot
        ]
        if not needs:
            return Proposal(executors=None, reason=Reason.NO_METRICS, message="no query has evaluated batches yet")
        details = {f"{n.name}.busy": round(n.busy, 3) for n in needs}
        moving = [n for n in needs if n.reason != Reason.WITHIN_TARGET]
        if not moving:
            return Proposal(
                executors=inp.current_executors,
                reason=Reason.WITHIN_TARGET,
                message="utilization within target band for every query",
                details=details,
            )
        k = max(1, inp.cores_per_executor)
        executors = math.ceil(sum(n.cores for n in needs) / k)
        reason = next(
            (r for r in (Reason.SCALE_UP_FOR_BACKLOG, Reason.SCALE_UP_FOR_LOAD) if any(n.reason == r for n in moving)),
            Reason.SCALE_DOWN_FOR_LOAD,
        )
        parallelism = {n.name: n.parallelism for n in needs if n.parallelism is not None}
        message = "; ".join(f"{n.name}: busy {n.busy:.2f} -> {n.cores} core(s)" for n in needs)
        return Proposal(executors, reason, message, parallelism, details)

    def _restart_time(self, inp: PolicyInput) -> timedelta:
        measured = inp.history.restart_pauses()
        return max([self.p.restart_time, *measured])

    def _need(self, view: QueryView, load: QueryLoad, inp: PolicyInput) -> QueryNeed:
        u, band = self.p.target_utilization, self.p.utilization_band
        trigger = view.params.trigger_interval
        partitions = view.params.parallelism
        cores_now = max(1, inp.current_cores)
        busy = busy_at(effective_slots(partitions, cores_now), load, trigger)
        lagging = load.lag is not None and load.lag > inp.target_lag
        backlog = load.backlog_rows or 0.0
        catch_up = self.p.catch_up_duration.total_seconds()
        if lagging:
            reason = Reason.SCALE_UP_FOR_BACKLOG
        elif busy > u + band:
            reason = Reason.SCALE_UP_FOR_LOAD
        elif busy < u - band and not (load.lag and load.lag > inp.target_lag / 4):
            reason = Reason.SCALE_DOWN_FOR_LOAD
        else:
            reason = Reason.WITHIN_TARGET
        rate = (load.input_rate or 0.0) + (backlog / catch_up if catch_up > 0 else 0.0)
        slots = slots_for(rate, load, trigger, u)
        max_cores = inp.max_executors * max(1, inp.cores_per_executor)
        cores = min_cores_for(partitions, slots)
        if cores is not None and cores <= max_cores:
            return QueryNeed(view.name, cores, busy, reason)
        # The partitions cap what max_cores can do: the fewest cores reaching the best waves.
        best_slots = effective_slots(partitions, max_cores)
        best_cores = min_cores_for(partitions, best_slots) or max_cores
        overloaded = busy_at(best_slots, load, trigger) > u + band or lagging
        if overloaded and view.rescalable and partitions < view.max_parallelism:
            # More partitions, through a restart from the checkpoint: pay for the restart too.
            restart = self._restart_time(inp).total_seconds()
            rate += (load.input_rate or 0.0) * restart / catch_up if catch_up > 0 else 0.0
            cores = min(max_cores, max(1, math.ceil(slots_for(rate, load, trigger, u))))
            new_p = aligned_parallelism(cores, view.partitions_per_core, view.min_parallelism, view.max_parallelism)
            if new_p > partitions:
                return QueryNeed(view.name, cores, busy, reason, new_p)
        return QueryNeed(view.name, best_cores, busy, reason)
