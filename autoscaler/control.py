"""Operator overrides of a running daemon (pause, mode, bounds, manual targets, query params).

The REST API edits a :class:`ControlState`; the reconciler reads it at the start of each tick,
so a change takes effect on the next tick. It is persisted with the scaling history.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Mapping

from autoscaler.model import Mode, QueryParams


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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControlState:
        return cls(
            paused=bool(data.get("paused", False)),
            mode=Mode(data["mode"]) if data.get("mode") else None,
            dry_run=data.get("dry_run"),
            min_executors=data.get("min_executors"),
            max_executors=data.get("max_executors"),
            manual_executors=data.get("manual_executors"),
            policy_params=data.get("policy_params"),
            query_requests={n: _params_from_json(p) for n, p in (data.get("query_requests") or {}).items()},
        )


def _params_json(p: QueryParams) -> dict[str, Any]:
    return {
        "parallelism": p.parallelism,
        "shuffle_partitions": p.shuffle_partitions,
        "trigger_interval_seconds": p.trigger_interval.total_seconds() if p.trigger_interval else None,
        "max_rows_per_batch": p.max_rows_per_batch,
    }


def _params_from_json(d: Mapping[str, Any]) -> QueryParams:
    trig = d.get("trigger_interval_seconds")
    return QueryParams(
        parallelism=int(d["parallelism"]),
        shuffle_partitions=d.get("shuffle_partitions"),
        trigger_interval=timedelta(seconds=trig) if trig is not None else None,
        max_rows_per_batch=d.get("max_rows_per_batch"),
    )


params_to_json = _params_json
params_from_json = _params_from_json
