"""Operator overrides of a running daemon (pause, mode, bounds, manual targets, query params).

The REST API edits a :class:`ControlState`; the reconciler reads it at the start of each tick,
so a change takes effect on the next tick. It is persisted with the scaling history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Iterable, Mapping

from autoscaler.core.model import (
    Mode,
    OutcomeKind,
    Plan,
    QueryParams,
    QueryStatus,
    Reason,
    Snapshot,
)
from autoscaler.core.settings import Settings


@dataclass(frozen=True)
class ControlState:
    paused: bool = False
    mode: Mode | None = None
    dry_run: bool | None = None
    min_executors: int | None = None
    max_executors: int | None = None
    manual_executors: int | None = None  # a fixed target chosen by an operator
    policy_params: Mapping[str, Any] | None = None
    query_requests: Mapping[str, QueryParams] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["mode"] = self.mode.value if self.mode else None
        data["policy_params"] = dict(self.policy_params) if self.policy_params is not None else None
        data["query_requests"] = {name: p.to_json() for name, p in self.query_requests.items()}
        return data


def control_problems(
    control: ControlState, settings: Settings, params_problem: Callable[[Mapping[str, Any]], str | None] | None = None
) -> list[tuple[str, str]]:
    """What makes these overrides unusable with ``settings``: ``(field, message)`` pairs.

    The same rules as the configuration: bounds not negative and ``min <= max`` (an override of
    one bound is checked against the other's effective value), policy parameters accepted by the
    configured policy (merged over the configured ones, judged by ``params_problem``: the policy
    registry is the runtime's), query parameters positive. A manual target outside the bounds
    is not a problem here (the reconciler clamps it, with a reason); the control API refuses one
    up front.
    """
    problems: list[tuple[str, str]] = []
    e = settings.executors
    if control.min_executors is not None and control.min_executors < 0:
        problems.append(("min_executors", f"must be at least 0, got {control.min_executors}"))
    if control.max_executors is not None and control.max_executors < 1:
        problems.append(("max_executors", f"must be at least 1, got {control.max_executors}"))
    lo = control.min_executors if control.min_executors is not None else e.min
    hi = control.max_executors if control.max_executors is not None else e.max
    if not problems and lo > hi:
        field = "min_executors" if control.min_executors is not None else "max_executors"
        problems.append((field, f"min_executors ({lo}) must not exceed max_executors ({hi})"))
    if control.manual_executors is not None and control.manual_executors < 0:
        problems.append(("manual_executors", f"must be at least 0, got {control.manual_executors}"))
    if control.policy_params is not None and params_problem is not None:
        problem = params_problem({**settings.policy.params, **dict(control.policy_params)})
        if problem is not None:
            problems.append(("policy_params", problem))
    for name, params in control.query_requests.items():
        where = f"query_requests.{name}"
        if params.parallelism < 1:
            problems.append((f"{where}.parallelism", f"must be at least 1, got {params.parallelism}"))
        if params.max_rows_per_batch is not None and params.max_rows_per_batch < 1:
            problems.append((f"{where}.max_rows_per_batch", f"must be at least 1, got {params.max_rows_per_batch}"))
        if params.trigger_interval is not None and params.trigger_interval <= timedelta(0):
            problems.append((f"{where}.trigger_interval_seconds", "must be positive"))
        if params.shuffle_partitions is not None and params.shuffle_partitions < 1:
            problems.append((f"{where}.shuffle_partitions", f"must be at least 1, got {params.shuffle_partitions}"))
    return problems


def settled_requests(control: ControlState, snap: Snapshot, plan: Plan) -> ControlState:
    """``control`` without the operator's query requests that are done with: in force (the query
    runs with them, or its restart with them reported success), refused for good, failed when
    tried, or whose query is gone.

    A request is kept while its restart from the checkpoint runs: a daemon that dies meanwhile
    finds it in its saved state and asks for it again, instead of losing the operator's change.
    """
    if not control.query_requests:
        return control
    views = {q.name: q for q in snap.queries}
    changing = {c.name for c in plan.query_changes}
    refused = {r.name for r in plan.refusals if r.reason != Reason.QUERY_BUSY}
    failed = failed_requests(control, snap)
    restarted = {o.subject for o in snap.outcomes if o.kind == OutcomeKind.RESCALE and o.ok and o.to_params == control.query_requests.get(o.subject)}
    done = set()
    for name, params in control.query_requests.items():
        view = views.get(name)
        in_force = view is not None and requested(params, view.params) == view.params and view.status == QueryStatus.RUNNING and name not in changing
        if view is None or in_force or name in restarted or name in refused or name in failed:
            done.add(name)
    if not done:
        return control
    return replace(control, query_requests={n: p for n, p in control.query_requests.items() if n not in done})


def requested(request: QueryParams, running: QueryParams) -> QueryParams:
    """What ``request`` asks of a query running with ``running``: a request that names no shuffle
    partitions keeps those the query has (its checkpoint pins them once it has run a batch)."""
    if request.shuffle_partitions is None and running.shuffle_partitions is not None:
        return replace(request, shuffle_partitions=running.shuffle_partitions)
    return request


def failed_requests(control: ControlState, snap: Snapshot) -> set[str]:
    """Queries whose requested restart failed (reported in ``snap``): not asked for again."""
    return {
        o.subject
        for o in snap.outcomes
        if o.kind == OutcomeKind.RESCALE and not o.ok and o.to_params is not None and o.to_params == control.query_requests.get(o.subject)
    }


def cleared(control: ControlState, fields: Iterable[str]) -> ControlState:
    """``control`` with these fields (or the fields of these ``field.sub`` problems) back at their defaults."""
    default = ControlState()
    return replace(control, **{name: getattr(default, name) for name in {f.split(".")[0] for f in fields}})
