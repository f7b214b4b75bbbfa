"""``target-utilization``: size executors so each query runs at a target utilization.

In the spirit of DS2 and Flink's autoscaler, adapted to micro-batches:

* each query's batch cost model (:mod:`autoscaler.core.costmodel`) predicts how long a batch of
  ``R`` rows takes on ``C`` cores: ``o + ceil(P / C) x (w + R / (P x mu))``;
* with trigger interval ``I`` a batch holds ``lambda x I`` rows, so the query's utilization
  on ``C`` cores is ``duration(P, C, lambda x I) / I`` (without a trigger, the share of its
  large-batch throughput ``lambda / throughput(P, C)``);
* nothing changes while every query's utilization stays within ``target +- band`` and no
  query lags beyond the SLO (Flink's dead band: "rescale only if a vertex is out of bounds");
* otherwise the required rate ``R = lambda + backlog / catch_up`` gives the fewest cores whose
  predicted utilization is at most the target. Because the duration only changes when the
  number of task waves does, the chosen count is always aligned with the partitions;
* when the partitions cap what the allowed cores can do, the query's partitions grow too
  (a rescale from the checkpoint, paying ``lambda x restart_time / catch_up`` on top).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from pydantic import Field

from autoscaler.core.capacity import aligned_parallelism
from autoscaler.core.evaluate import schedule_lag
from autoscaler.core.model import BatchCostModel, Proposal, QueryLoad, QueryView, Reason
from autoscaler.core.policy import Policy, PolicyInput, PolicyParams
from autoscaler.core.settings import Duration
from policies.registry import register
from policies.sizing import utilization, utilization_floor, waiting_rows


@dataclass(frozen=True)
class QueryNeed:
    name: str
    cores: int
    busy: float
    reason: Reason  # WITHIN_TARGET, SCALE_UP_FOR_LOAD, SCALE_UP_FOR_BACKLOG, SCALE_DOWN_FOR_LOAD
    parallelism: int | None = None  # new partitions, when the current ones cannot carry the load


def fewest_cores(
    model: BatchCostModel, partitions: int, rate: float, trigger: timedelta | None, target: float, max_cores: int
) -> int | None:
    if utilization_floor(model, partitions, trigger, rate) > target:
        return None  # the per-batch costs alone exceed the target on any number of cores
    # more cores than partitions run the same single wave: the utilization stops changing there
    for cores in range(1, min(max_cores, max(1, partitions)) + 1):
        if utilization(model, partitions, cores, rate, trigger) <= target:
            return cores
    return None


@register("target-utilization")
class TargetUtilizationPolicy(Policy):
    """Executors for a target utilization from a fitted batch cost model, aligned to task waves."""

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

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        needs = [self._need(view, load, inp) for view, load in inp.modelled_queries()]
        if not needs:
            return Proposal(executors=None, reason=Reason.NO_METRICS, message="no query has evaluated batches yet")
        details = {f"{n.name}.busy": round(n.busy, 3) for n in needs}
        moving = [n for n in needs if n.reason != Reason.WITHIN_TARGET]
        # "where we are" is the target the daemon asserts, as for every policy: registered
        # executors above it (late ones nobody asked for, or a removal in flight) are not kept
        # because they are there, and a scale-up still in flight is not proposed away
        hold = inp.target_executors
        if not moving:
            return Proposal(
                executors=hold,
                reason=Reason.WITHIN_TARGET,
                message="utilization within target band for every query",
                details=details,
            )
        k = max(1, inp.cores_per_executor)
        executors = math.ceil(sum(n.cores for n in needs) / k)
        parallelism = {n.name: n.parallelism for n in needs if n.parallelism is not None}
        if executors == hold and not parallelism:
            return Proposal(
                executors=executors,
                reason=Reason.WITHIN_TARGET,
                message="already at the fewest executors that keep every query within target",
                details=details,
            )
        reason = next(
            (r for r in (Reason.SCALE_UP_FOR_BACKLOG, Reason.SCALE_UP_FOR_LOAD) if any(n.reason == r for n in moving)),
            Reason.SCALE_DOWN_FOR_LOAD,
        )
        message = "; ".join(f"{n.name}: busy {n.busy:.2f} -> {n.cores} core(s)" for n in needs)
        return Proposal(executors, reason, message, parallelism, details)

    def _restart_time(self, inp: PolicyInput) -> timedelta:
        return max([self.p.restart_time, *inp.history.restart_pauses()])

    def _need(self, view: QueryView, load: QueryLoad, inp: PolicyInput) -> QueryNeed:
        assert load.model is not None
        model, u, band = load.model, self.p.target_utilization, self.p.utilization_band
        trigger = view.params.trigger_interval
        partitions = view.params.parallelism
        arrival = load.input_rate or 0.0
        busy = utilization(model, partitions, max(1, inp.current_cores), arrival, trigger)
        target_lag = inp.target_lag_for(view)
        lagging = load.lag is not None and load.lag > target_lag
        # a scale-down waits while rows wait beyond a quarter of the SLO or the schedule's own lag
        backlogged = load.lag is not None and load.lag > max(target_lag / 4, schedule_lag(trigger))
        if lagging:
            reason = Reason.SCALE_UP_FOR_BACKLOG
        elif busy > u + band:
            reason = Reason.SCALE_UP_FOR_LOAD
        elif busy < u - band and not backlogged:
            reason = Reason.SCALE_DOWN_FOR_LOAD
        else:
            reason = Reason.WITHIN_TARGET
        catch_up = self.p.catch_up_duration.total_seconds()
        rate = arrival + (waiting_rows(load, trigger) / catch_up if catch_up > 0 else 0.0)
        max_cores = inp.max_executors * max(1, inp.cores_per_executor)
        cores = fewest_cores(model, partitions, rate, trigger, u, max_cores)
        if cores is not None:
            return QueryNeed(view.name, cores, busy, reason)
        # The partitions cap what the allowed cores can do: fewest cores giving the fewest waves.
        best = math.ceil(partitions / math.ceil(partitions / max_cores))
        overloaded = utilization(model, partitions, best, arrival, trigger) > u + band or lagging
        if overloaded and view.rescalable and partitions < view.max_parallelism:
            # More partitions through a restart from the checkpoint: pay for the restart too.
            restart = self._restart_time(inp).total_seconds()
            rate += arrival * restart / catch_up if catch_up > 0 else 0.0
            chosen = (max_cores, aligned_parallelism(max_cores, view.partitions_per_core, view.min_parallelism, view.max_parallelism))
            for c in range(1, max_cores + 1):
                p = aligned_parallelism(c, view.partitions_per_core, view.min_parallelism, view.max_parallelism)
                if utilization(model, p, c, rate, trigger) <= u:
                    chosen = (c, p)
                    break
            if chosen[1] > partitions:
                return QueryNeed(view.name, chosen[0], busy, reason, chosen[1])
        return QueryNeed(view.name, best, busy, reason)
