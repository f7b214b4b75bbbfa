"""``dstream-dra``: Spark Streaming's (DStreams) dynamic allocation as a baseline.

Published behaviour (``streaming/scheduler/ExecutorAllocationManager.scala``,
``spark.streaming.dynamicAllocation.*``), evaluated every ``scalingInterval`` (60 s):

1. ``ratio = average processing time of the batches completed in the interval / batch interval``;
2. ``ratio >= scalingUpRatio`` (0.9): request ``max(round(ratio), 1)`` more executors than are
   registered;
3. ``ratio <= scalingDownRatio`` (0.3): kill one executor;
4. no completed batch in the interval: no action.

The timer fires on fixed interval boundaries; between them the target is held.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, ClassVar, Mapping

from pydantic import Field, model_validator

from autoscaler.core.model import Proposal, QueryStatus, Reason
from autoscaler.core.policy import NO_EXTRA_SAFETY, Policy, PolicyInput, PolicyParams
from autoscaler.core.settings import Duration
from policies.registry import register


def interval_due(now_seconds: float, previous_seconds: float, interval: float) -> bool:
    """The timer fired in ``(previous, now]``: a multiple of ``interval`` was crossed."""
    return math.floor(now_seconds / interval) > math.floor(previous_seconds / interval)


@register("dstream-dra")
class DStreamDynamicAllocationPolicy(Policy):
    """DStreams dynamic allocation: batch time / interval ratio, +round(ratio) above 0.9, -1 below 0.3, every 60 s."""

    settings_profile: ClassVar[Mapping[str, Any]] = NO_EXTRA_SAFETY
    needs_cost_model: ClassVar[bool] = False

    class Params(PolicyParams):
        scaling_interval: Duration = Field(timedelta(seconds=60), description="scalingInterval")
        scaling_up_ratio: float = Field(0.9, gt=0, description="scalingUpRatio")
        scaling_down_ratio: float = Field(0.3, ge=0, description="scalingDownRatio (below scalingUpRatio)")

        @model_validator(mode="after")
        def _ordered(self) -> "DStreamDynamicAllocationPolicy.Params":
            if self.scaling_down_ratio >= self.scaling_up_ratio:
                raise ValueError("scaling_down_ratio must be below scaling_up_ratio")
            if self.scaling_interval.total_seconds() <= 0:
                raise ValueError("scaling_interval must be > 0")
            return self

    def __init__(self, params: Params) -> None:
        self.p = params

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        interval = self.p.scaling_interval.total_seconds()
        hold = inp.target_executors
        now = inp.now.timestamp()
        step = inp.interval.total_seconds() if inp.interval else 0.0
        if step > 0 and not interval_due(now, now - step, interval):
            return Proposal(hold, Reason.WAITING_FOR_INTERVAL, f"next evaluation at the next {interval:g}s boundary")
        since = inp.now - self.p.scaling_interval
        ratios = []
        for view in inp.snapshot.queries:
            trigger = view.params.trigger_interval
            if view.status != QueryStatus.RUNNING or not trigger:
                continue
            times = [s.duration.total_seconds() for s in view.samples if since < s.ended_at <= inp.now]
            if times:
                ratios.append(sum(times) / len(times) / trigger.total_seconds())
        if not ratios:
            return Proposal(hold, Reason.NO_METRICS, "no batch completed in the scaling interval")
        ratio = max(ratios)
        registered = inp.current_executors
        if ratio >= self.p.scaling_up_ratio:
            add = max(math.floor(ratio + 0.5), 1)
            return Proposal(registered + add, Reason.SCALE_UP_FOR_LOAD, f"batch time ratio {ratio:.2f}: +{add}")
        if ratio <= self.p.scaling_down_ratio:
            return Proposal(max(inp.min_executors, registered - 1), Reason.SCALE_DOWN_FOR_LOAD, f"batch time ratio {ratio:.2f}: -1")
        return Proposal(hold, Reason.WITHIN_TARGET, f"batch time ratio {ratio:.2f} within [{self.p.scaling_down_ratio}, {self.p.scaling_up_ratio})")
