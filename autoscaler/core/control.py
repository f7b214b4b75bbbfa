"""Operator overrides of a running daemon (pause, mode, bounds, manual targets, query params).

The REST API edits a :class:`ControlState`; the reconciler reads it at the start of each tick,
so a change takes effect on the next tick. It is persisted with the scaling history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Mapping

from autoscaler.core.model import Mode, QueryParams

if TYPE_CHECKING:
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
        data["query_requests"] = {name: _params_json(p) for name, p in self.query_requests.items()}
        return data


def _params_json(p: QueryParams) -> dict[str, Any]:
    return {
        "parallelism": p.parallelism,
        "shuffle_partitions": p.shuffle_partitions,
        "trigger_interval_seconds": p.trigger_interval.total_seconds() if p.trigger_interval else None,
        "max_rows_per_batch": p.max_rows_per_batch,
    }


params_to_json = _params_json


def control_problems(control: ControlState, settings: Settings) -> list[tuple[str, str]]:
    """What makes these overrides unusable with ``settings``: ``(field, message)`` pairs.

    The same rules as the configuration: bounds not negative and ``min <= max`` (an override of
    one bound is checked against the other's effective value), policy parameters accepted by the
    configured policy (merged over the configured ones), query parameters positive. A manual
    target outside the bounds is not a problem here (the reconciler clamps it, with a reason);
    the control API refuses one up front.
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
    if control.policy_params is not None:
        from policies import PolicyError, create_policy

        try:
            create_policy(settings.policy.name, {**settings.policy.params, **dict(control.policy_params)})
        except PolicyError as exc:
            problems.append(("policy_params", str(exc)))
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
