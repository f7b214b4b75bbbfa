"""Safety steps applied after any policy, each with a named reason (after Kubernetes' HPA).

Order: action in flight -> bounds -> dead band -> stabilization -> backlog -> delayed
scale-down (largest recommendation over the delay window, one change for a falling one) -> step limits. A held decision keeps the current target, so it is re-asserted unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from autoscaler.core.history import EXECUTORS, ScalingHistory
from autoscaler.core.model import ExecutorDecision, Proposal, Reason
from autoscaler.core.settings import NormalizeSettings


@dataclass(frozen=True, slots=True)
class NormalizeInput:
    now: datetime
    proposal: Proposal
    current: int  # executors we are at, or heading to while a request is outstanding
    min_executors: int
    max_executors: int
    history: ScalingHistory
    settings: NormalizeSettings
    in_flight: bool = False  # a request or removal has not completed yet
    backlogged: bool = False  # some query lags beyond settings.backlog_lag_threshold


def normalize(inp: NormalizeInput) -> tuple[ExecutorDecision, ScalingHistory]:
    """Return the decision and the history with this tick's recommendation recorded."""
    p, s, now, current = inp.proposal, inp.settings, inp.now, inp.current
    history = inp.history
    outside = _bound_crossed(inp)
    if p.executors is None:
        if outside is not None:
            # no opinion on the count, but the bounds still hold (HPA checks them before any metric)
            bound, reason = outside
            return ExecutorDecision(current, None, bound, reason, (reason,), _outside_message(inp, bound)), history
        return ExecutorDecision(current, None, None, p.reason, (), p.message), history

    limits: list[Reason] = []
    target = p.executors
    if target < inp.min_executors:
        target = inp.min_executors
        limits.append(Reason.BOUNDED_MIN)
    if target > inp.max_executors:
        target = inp.max_executors
        limits.append(Reason.BOUNDED_MAX)
    history = history.with_recommendation(now, target)

    def hold(reason: Reason, msg: str, hist: ScalingHistory = history) -> tuple[ExecutorDecision, ScalingHistory]:
        return ExecutorDecision(current, p.executors, current, reason, (*limits, reason), msg), hist

    def done(value: int, msg: str, hist: ScalingHistory) -> tuple[ExecutorDecision, ScalingHistory]:
        reason = limits[-1] if limits else p.reason
        return ExecutorDecision(current, p.executors, value, reason, tuple(limits), msg), hist

    if target == current:
        # a tick at the current count does not restart a pending scale-down's wait: the
        # largest recommendation over the delay window (this one included) decides it
        return done(current, p.message, history)
    if outside is not None:
        # outside the bounds (an operator changed them): move to the bound at once, no delay,
        # even while a change is in flight (lowering the target cancels executors still
        # starting). Only to the bound, as HPA does ("Current number of replicas above
        # Spec.MaxReplicas"): a proposal beyond it takes the usual steps from there on (a
        # scale-down its delay and step limit), the bound change alone does not skip them.
        bound, reason = outside
        if reason not in limits:
            limits.append(reason)
        return done(bound, _outside_message(inp, bound), history.with_scale_down_since(None))
    if inp.in_flight and target < current:
        # never reverse or cut short a change in flight; a larger scale-up may go ahead
        return hold(Reason.ACTION_IN_FLIGHT, f"waiting for the previous executor change before {current} -> {target}")
    if abs(target - current) <= s.dead_band * current:
        return hold(Reason.DEAD_BAND, f"{current} -> {target} is within the dead band of {s.dead_band:.0%}")
    last = history.last_change_at(EXECUTORS)
    settle = s.scale_up_stabilization if target > current else s.stabilization
    if last is not None and now - last < settle:
        wait = (settle - (now - last)).total_seconds()
        return hold(Reason.STABILIZING, f"stabilizing after the last change, {wait:.0f}s left")

    if target > current:
        history = history.with_scale_down_since(None)
        step = max(1, math.ceil(max(current, 1) * s.max_scale_up_factor))
        if target > current + step:
            target = current + step
            limits.append(Reason.MAX_STEP_UP)
        return done(target, p.message, history)

    # scale-down
    if inp.backlogged:
        return hold(
            Reason.BACKLOG_BLOCKS_SCALE_DOWN,
            "a query is catching up a backlog; no scale-down",
            history.with_scale_down_since(None),
        )
    # Delayed scale-down (HPA's stabilization window, Flink's scale-down.interval): down to
    # the largest count recommended within the last delay, once recommendations have been
    # watched for a whole delay. The start time is kept across steps, so a further drop
    # follows as soon as the sliding window allows it; only a scale-up resets it.
    since = history.scale_down_since or now
    history = history.with_scale_down_since(since)
    waited = now - since
    if waited < s.scale_down_delay:
        left = (s.scale_down_delay - waited).total_seconds()
        return hold(Reason.SCALE_DOWN_DELAYED, f"scale-down to {target} waits {left:.0f}s more", history)
    proposed = target
    window_max = history.max_recommendation_since(now - s.scale_down_delay) or target
    target = max(target, window_max)
    if target >= current:
        return hold(Reason.SCALE_DOWN_DELAYED, f"{window_max} recommended within the delay window", history)
    lasting = _lasting_window_max(history, now, s, since, last, proposed)
    if lasting is not None and lasting < window_max:
        return hold(
            Reason.SCALE_DOWN_DELAYED,
            f"{window_max} recommended within the delay window leaves it within {s.stabilization.total_seconds():.0f}s, "
            f"{lasting} after: one change instead of two",
            history,
        )
    step = max(1, math.floor(current * s.max_scale_down_factor))
    if target < current - step:
        target = current - step
        limits.append(Reason.MAX_STEP_DOWN)
    return done(target, p.message, history)


def _lasting_window_max(
    history: ScalingHistory, now: datetime, s: NormalizeSettings, since: datetime, last: datetime | None, proposed: int
) -> int | None:
    """The delay window's largest recommendation a stabilization from now (the earliest a next
    change may come), when waiting for it is worth it; else None.

    A scale-down to the window's largest recommendation is followed a stabilization later by
    another when that recommendation leaves the window by then: a falling recommendation comes
    down as a staircase of changes a stabilization apart. Waiting for it to leave makes one change
    of two, and costs at most a stabilization of the capacity the first step would free (less
    than a rescale is worth to any policy). The wait ends a delay and a stabilization after the
    scale-down was first proposed or the executors last changed, so a recommendation that keeps
    falling still comes down, a step each delay and stabilization instead of each stabilization;
    except when the wait ends at ``proposed``, the count recommended now: a recommendation that
    has settled there gets there in one change however long the scale-down has been pending
    (the last step of a descent to the floor, a stabilization later, was the staircase left).
    """
    if s.stabilization >= s.scale_down_delay:
        return None
    lasting = history.max_recommendation_since(now - (s.scale_down_delay - s.stabilization))
    started = since if last is None else max(since, last)
    if now - started >= s.scale_down_delay + s.stabilization and lasting != proposed:
        return None
    return lasting


def _bound_crossed(inp: NormalizeInput) -> tuple[int, Reason] | None:
    """The bound the current count lies beyond, with its reason; None within the bounds."""
    if inp.current > inp.max_executors:
        return inp.max_executors, Reason.BOUNDED_MAX
    if inp.current < inp.min_executors:
        return inp.min_executors, Reason.BOUNDED_MIN
    return None


def _outside_message(inp: NormalizeInput, bound: int) -> str:
    return f"{inp.current} executor(s) outside [{inp.min_executors}, {inp.max_executors}]: {inp.current} -> {bound}"
