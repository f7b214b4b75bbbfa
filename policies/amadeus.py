"""``amadeus``: AmadeusITGroup/Elastic-Scaling (a Structured Streaming listener) as a baseline.

Published behaviour (README and source, release 2.0.5): on every progress event,

* ``usage = triggerExecution / configured batch duration``;
* exponentially weighted mean: ``num = a x num + usage``, ``den = a x den + 1``,
  ``mean = num / den`` with ``a = smoothing_factor`` (0.6);
* if ``mean > threshold.high`` (1.0) or ``mean < threshold.low`` (0.75): set the workers to
  ``ceil(current x mean)`` within ``[executors.min, executors.max]``;
* skip while the cluster is resizing.

Each tick evaluates the mean over the buffered batches (older weights vanish: ``0.6^40`` is
``1e-9``) and acts only if a progress event arrived since the previous tick.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any, ClassVar, Mapping

from pydantic import Field, model_validator

from autoscaler.core.model import BatchSample, Proposal, QueryStatus, Reason
from autoscaler.core.policy import NO_EXTRA_SAFETY, Policy, PolicyInput, PolicyParams
from policies.registry import register


def ewma_usage(samples: tuple[BatchSample, ...] | list[BatchSample], trigger: float, alpha: float) -> float | None:
    """Amadeus' weighted mean of ``duration / trigger`` over the batches in order."""
    num = den = 0.0
    for s in samples:
        num = alpha * num + s.duration.total_seconds() / trigger
        den = alpha * den + 1.0
    return num / den if den else None


@register("amadeus")
class AmadeusPolicy(Policy):
    """Amadeus Elastic-Scaling: EWMA (0.6) of batch time / trigger, resize to ceil(n x mean) outside 0.75-1.0."""

    settings_profile: ClassVar[Mapping[str, Any]] = NO_EXTRA_SAFETY
    needs_cost_model: ClassVar[bool] = False

    class Params(PolicyParams):
        smoothing_factor: float = Field(0.6, ge=0, lt=1, description="weight of the past in the mean")
        threshold_low: float = Field(0.75, ge=0, description="scale down below this mean usage")
        threshold_high: float = Field(1.0, gt=0, description="scale up above this mean usage")

        @model_validator(mode="after")
        def _ordered(self) -> "AmadeusPolicy.Params":
            if self.threshold_low >= self.threshold_high:
                raise ValueError("threshold_low must be below threshold_high")
            return self

    def __init__(self, params: Params) -> None:
        self.p = params

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        hold = inp.target_executors
        since = inp.now - (inp.interval or timedelta(0))
        means = []
        fresh = False
        for view in inp.snapshot.queries:
            trigger = view.params.trigger_interval
            if view.status != QueryStatus.RUNNING or not trigger or not view.samples:
                continue
            done = [s for s in view.samples if s.ended_at <= inp.now]
            fresh = fresh or any(s.ended_at > since for s in done[-3:])
            mean = ewma_usage(done, trigger.total_seconds(), self.p.smoothing_factor)
            if mean is not None:
                means.append(mean)
        if not means:
            return Proposal(None, Reason.NO_METRICS, "no progress event yet")
        mean = max(means)
        if not fresh:
            return Proposal(hold, Reason.WAITING_FOR_INTERVAL, "no new progress event since the previous decision")
        if inp.resizing:
            return Proposal(hold, Reason.ACTION_IN_FLIGHT, "the cluster is resizing")
        workers = inp.current_executors
        if mean > self.p.threshold_high or mean < self.p.threshold_low:
            target = max(inp.min_executors, min(inp.max_executors, math.ceil(workers * mean)))
            reason = Reason.SCALE_UP_FOR_LOAD if target > workers else Reason.SCALE_DOWN_FOR_LOAD
            if target == workers:
                reason = Reason.WITHIN_TARGET
            return Proposal(target, reason, f"mean usage {mean:.2f}: {workers} -> {target}")
        return Proposal(hold, Reason.WITHIN_TARGET, f"mean usage {mean:.2f} within [{self.p.threshold_low}, {self.p.threshold_high}]")
