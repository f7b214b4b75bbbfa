"""One tick's decision, from what was observed to the plan of actions: a pure function.

``decide(inp, history, policy, memo)`` evaluates every query's load, asks the policy for a
proposal, normalizes it into an executor decision (or takes the operator's manual target), and
plans the actions: the executor target and removals, query rescales and refusals. It reads no
clock (``inp.now``) and calls no cluster; the reconciler hands the plan to the realizer.

What it returns is a :class:`Decision`, including the history with this tick's rates and
recommendation recorded. :class:`DecisionMemo` holds what decisions keep from tick to tick to
save work (each query's cost-model fit, the policy's memo); the runtime owns it and a fresh one
gives the same decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping

from autoscaler.core.control import ControlState, failed_requests, requested
from autoscaler.core.costmodel import CostModelCache
from autoscaler.core.evaluate import evaluate_query, record_rates, schedule_lag
from autoscaler.core.history import EXECUTORS, ScalingEvent, ScalingHistory
from autoscaler.core.model import (
    ActionKind,
    ActionOutcome,
    ActionResult,
    EffectiveMode,
    ExecutorDecision,
    Plan,
    Proposal,
    QueryLoad,
    QueryParams,
    Reason,
    Snapshot,
)
from autoscaler.core.modes import resolve_mode
from autoscaler.core.normalize import NormalizeInput, normalize
from autoscaler.core.plan import (
    ExecutorPosition,
    QueryPlanInput,
    executor_position,
    plan_executors,
    plan_queries,
)
from autoscaler.core.policy import Policy, PolicyFailed, PolicyInput, check_proposal
from autoscaler.core.settings import ExecutorSettings, Settings


@dataclass(frozen=True, slots=True)
class TickInput:
    now: datetime
    snapshot: Snapshot
    control: ControlState  # the operator's overrides in force this tick
    settings: Settings


@dataclass(frozen=True, slots=True)
class Decision:
    mode: EffectiveMode
    min_executors: int  # the bounds in force (settings or operator override)
    max_executors: int
    loads: tuple[QueryLoad, ...]
    proposal: Proposal  # as acted on: partitions that would not fit the executor decision dropped
    executors: ExecutorDecision
    plan: Plan
    history: ScalingHistory  # with this tick's rescale pauses, rates and recommendation recorded


@dataclass
class DecisionMemo:
    """What decisions keep from tick to tick to save work (never what they decide)."""

    cost_models: dict[str, CostModelCache] = field(default_factory=dict)  # per query
    policy: Any = None  # the policy's own memo (Policy.new_memo())


def decide(inp: TickInput, history: ScalingHistory, policy: Policy, memo: DecisionMemo) -> Decision:
    """Observe -> evaluate -> propose -> normalize -> plan, for one tick (see the module docstring).

    Raises :class:`~autoscaler.core.policy.PolicyFailed` when the policy raises or proposes what
    cannot be acted on.
    """
    s, snap, control, now = inp.settings, inp.snapshot, inp.control, inp.now
    history = with_outcomes(history, snap.outcomes)
    configured = control.mode or s.mode
    position = executor_position(snap.executors, now, s.request_timeout, resolve_mode(configured, snap.executors).mode)
    mode = resolve_mode(configured, snap.executors, position.not_granted)
    lo, hi = effective_bounds(s.executors, control)
    loads = evaluate_loads(snap, now, s.window.metrics_window, memo, fit=policy.needs_cost_model)
    history = record_rates(history, snap.queries, now, s.history.rate_step)
    policy_input = PolicyInput(
        now=now,
        snapshot=snap,
        loads=loads,
        history=history,
        min_executors=lo,
        max_executors=hi,
        cores_per_executor=snap.executors.cores_per_executor,
        target_lag=s.slo.target_lag,
        interval=s.reconcile_interval,
        rate_step=s.history.rate_step,
    )
    proposal = ask_policy(policy, policy_input, memo.policy)
    if control.manual_executors is not None:
        target = max(lo, min(hi, control.manual_executors))
        executors = ExecutorDecision(position.current, proposal.executors, target, Reason.MANUAL_TARGET)
    else:
        executors, history = normalize(
            NormalizeInput(
                now=now,
                proposal=proposal,
                current=position.current,
                min_executors=lo,
                max_executors=hi,
                history=history,
                settings=s.normalize,
                in_flight=position.in_flight,
                backlogged=backlogged(snap, loads, s.normalize.backlog_lag_threshold),
            )
        )
    proposal = fitting_partitions(proposal, mode, executors)
    plan = plan_actions(inp, mode, position, executors, proposal, history, loads)
    return Decision(mode, lo, hi, tuple(loads.values()), proposal, executors, plan, history)


def effective_bounds(settings: ExecutorSettings, control: ControlState) -> tuple[int, int]:
    """The executor bounds in force: the operator's overrides, else the configured ones."""
    lo = control.min_executors if control.min_executors is not None else settings.min
    hi = control.max_executors if control.max_executors is not None else settings.max
    return lo, hi


def evaluate_loads(snap: Snapshot, now: datetime, window: timedelta, memo: DecisionMemo, *, fit: bool) -> dict[str, QueryLoad]:
    """Each query's load; with ``fit``, its batch cost model from the query's cached fit (caches
    of queries no longer observed are dropped)."""
    caches = memo.cost_models
    for gone in caches.keys() - {q.name for q in snap.queries}:
        del caches[gone]
    loads = {}
    for q in snap.queries:
        cache = caches.get(q.name) if fit else None
        if fit and cache is None:
            cache = caches[q.name] = CostModelCache()
        loads[q.name] = evaluate_query(q, now, window, snap.executors.cores, cache.fit if cache is not None else None, snap.executors.alive)
    return loads


def ask_policy(policy: Policy, inp: PolicyInput, memo: Any) -> Proposal:
    """The policy's proposal, checked before anything acts on it."""
    try:
        proposal = policy.propose(inp, memo)
        check_proposal(policy.name, proposal, inp.snapshot.queries)
    except Exception as exc:
        raise PolicyFailed(exc) from exc
    return proposal


def backlogged(snap: Snapshot, loads: Mapping[str, QueryLoad], threshold: timedelta) -> bool:
    """Some query lags beyond ``threshold`` and beyond what its schedule explains (a query with a
    long trigger lags up to two triggers while it keeps up)."""
    for view in snap.queries:
        load = loads.get(view.name)
        if load is not None and load.lag is not None and load.lag > max(threshold, schedule_lag(view.params.trigger_interval)):
            return True
    return False


def fitting_partitions(proposal: Proposal, mode: EffectiveMode, executors: ExecutorDecision) -> Proposal:
    """The proposal without its partitions when they were proposed for an executor count that
    normalization held or changed, or that reactive mode will not request: they would not fit
    (the planner keeps partitions aligned to the cores instead)."""
    if proposal.parallelism and (
        not mode.requesting or (proposal.executors is not None and executors.target != proposal.executors)
    ):
        return replace(proposal, parallelism={})
    return proposal


def plan_actions(
    inp: TickInput,
    mode: EffectiveMode,
    position: ExecutorPosition,
    executors: ExecutorDecision,
    proposal: Proposal,
    history: ScalingHistory,
    loads: Mapping[str, QueryLoad] | None = None,
) -> Plan:
    snap = inp.snapshot
    set_target, remove = plan_executors(executors, snap.executors, mode.mode)
    cores = planning_cores(snap, mode, executors)
    k = max(1, snap.executors.cores_per_executor)
    _, hi = effective_bounds(inp.settings.executors, inp.control)
    step = max(k, math.ceil(cores * inp.settings.normalize.max_scale_up_factor))
    changes, refusals = plan_queries(
        QueryPlanInput(
            now=inp.now,
            queries=snap.queries,
            cores=cores,
            limit_cores=min(hi * k, cores + step),
            executors_settling=position.in_flight,
            wanted=wanted_params(snap, proposal, inp.control),
            history=history,
            settings=inp.settings.normalize,
            models={name: load.model for name, load in (loads or {}).items() if load.model is not None},
        )
    )
    return Plan(set_target, remove, changes, refusals)


def planning_cores(snap: Snapshot, mode: EffectiveMode, executors: ExecutorDecision) -> int:
    """Cores the queries' partitions are aligned to: where active mode is heading, else what exists.

    Aligning to the executors still arriving would restart a query twice (once for the cores
    that exist, once more when the rest register).
    """
    if mode.requesting and executors.target is not None:
        return executors.target * max(1, snap.executors.cores_per_executor)
    return snap.executors.cores


def wanted_params(snap: Snapshot, proposal: Proposal, control: ControlState) -> dict[str, tuple[QueryParams, Reason]]:
    """Query settings asked for explicitly: the policy's partitions, then the operator's requests
    (which win; not one whose restart has just failed: it is dropped, with its outcome audited)."""
    wanted: dict[str, tuple[QueryParams, Reason]] = {}
    for name, parallelism in proposal.parallelism.items():
        view = snap.query(name)
        if view is not None:
            wanted[name] = (replace(view.params, parallelism=parallelism), Reason.POLICY_PARALLELISM)
    failed = failed_requests(control, snap)
    for name, params in control.query_requests.items():
        view = snap.query(name)
        if view is not None and name not in failed:
            wanted[name] = (requested(params, view.params), Reason.OPERATOR_REQUEST)
    return wanted


def with_outcomes(history: ScalingHistory, outcomes: tuple[ActionOutcome, ...]) -> ScalingHistory:
    """The history with the measured pauses of completed rescales attached to their events."""
    measured = [o for o in outcomes if o.pause is not None]
    if not measured:
        return history
    events = list(history.events)
    for outcome in measured:
        for i in range(len(events) - 1, -1, -1):
            if events[i].subject == outcome.subject and events[i].pause is None:
                events[i] = replace(events[i], pause=outcome.pause)
                break
    return replace(history, events=tuple(events))



def with_actions(
    history: ScalingHistory, now: datetime, executors: ExecutorDecision, plan: Plan, results: tuple[ActionResult, ...]
) -> ScalingHistory:
    """The history with the changes the realizer applied this tick: the executor target it changed,
    the query rescales it started."""
    if not executors.changes and not plan.query_changes:
        return history  # the usual tick: the target re-asserted, no query restarted
    applied = {(r.action, r.subject) for r in results if r.ok}
    if executors.changes and (ActionKind.SET_TARGET, EXECUTORS) in applied and executors.target is not None:
        history = history.with_event(ScalingEvent(now, EXECUTORS, executors.current, executors.target, executors.reason))
    for change in plan.query_changes:
        if (ActionKind.RESCALE, change.name) in applied:
            history = history.with_event(
                ScalingEvent(now, change.name, change.from_params.parallelism, change.to_params.parallelism, change.reason)
            )
    return history
