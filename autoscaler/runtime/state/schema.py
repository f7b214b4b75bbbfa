"""The shape of the state the reconciler saves, and the values restored from it.

A store keeps any JSON object (the store contract); what the reconciler restores from it must
be exactly what it saved (``ScalingHistory.to_json``, ``ControlState.to_json``). A state file
edited by hand or written by another version could otherwise crash the start-up with a bare
``KeyError``, or worse load: ``"paused": "no"`` read as paused, a bound ``"3"`` failing every
tick. Types are strict (no string-to-number or string-to-bool coercion), times are ISO 8601
texts with their zone, as saved (the daemon compares them with aware clock times), and unknown
keys are refused. The models below are the one description of the saved state: :func:`restore_state`
checks a state against them and builds the history, the overrides and the hosted queries'
settings (to start them again as they ran) from what they validated. Whether the overrides still fit the configuration is a separate question
(:func:`autoscaler.core.control.control_problems`: those are dropped loudly, not refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Annotated, Any, Mapping

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from autoscaler.core.control import ControlState
from autoscaler.core.history import RatePoint, ScalingEvent, ScalingHistory
from autoscaler.core.model import JAVA_INT_MAX, JAVA_LONG_MAX, Mode, QueryParams, Reason
from autoscaler.core.plan import QueryResume
from autoscaler.core.settings import MAX_DURATION
from autoscaler.runtime.state.base import StateStoreError


def _iso_time(text: object) -> datetime:
    if not isinstance(text, str):
        raise ValueError("a time is an ISO 8601 text with its zone, as saved")
    return datetime.fromisoformat(text)


Time = Annotated[AwareDatetime, BeforeValidator(_iso_time)]
Seconds = Annotated[StrictFloat, Field(ge=0, le=MAX_DURATION.total_seconds(), allow_inf_nan=False)]
Rate = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]
# what Spark takes: partition counts are Java ints, a source's rate limit a Java long (0, a negative
# count or 1e23 rows were reported restorable, then refused or crashed when the query restarted)
Partitions = Annotated[StrictInt, Field(ge=1, le=JAVA_INT_MAX)]
Rows = Annotated[StrictInt, Field(ge=1, le=JAVA_LONG_MAX)]


def _duration(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


class _Saved(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SavedEvent(_Saved):
    at: Time
    subject: StrictStr
    from_value: StrictInt = Field(alias="from")
    to_value: StrictInt = Field(alias="to")
    reason: Reason
    pause_seconds: Seconds | None = None

    def value(self) -> ScalingEvent:
        return ScalingEvent(self.at, self.subject, self.from_value, self.to_value, self.reason, _duration(self.pause_seconds))


class SavedHistory(_Saved):
    events: list[SavedEvent] = []
    recommendations: list[tuple[Time, StrictInt]] = []
    scale_down_since: Time | None = None
    rates: list[tuple[Time, StrictStr, Rate]] = []

    def value(self) -> ScalingHistory:
        # in time order, as the history keeps them (a hand edit may have moved lines)
        return ScalingHistory(
            events=tuple(sorted((e.value() for e in self.events), key=lambda e: e.at)),
            recommendations=tuple(sorted(self.recommendations)),
            scale_down_since=self.scale_down_since,
            rates=tuple(sorted((RatePoint(at, subject, rate) for at, subject, rate in self.rates), key=lambda r: r.at)),
        )


class SavedQueryParams(_Saved):
    parallelism: Partitions
    shuffle_partitions: Partitions | None = None
    trigger_interval_seconds: Seconds | None = None
    max_rows_per_batch: Rows | None = None

    def value(self) -> QueryParams:
        return QueryParams(
            parallelism=self.parallelism,
            shuffle_partitions=self.shuffle_partitions,
            trigger_interval=_duration(self.trigger_interval_seconds),
            max_rows_per_batch=self.max_rows_per_batch,
        )


class SavedControl(_Saved):
    paused: StrictBool = False
    mode: Mode | None = None
    dry_run: StrictBool | None = None
    min_executors: StrictInt | None = None
    max_executors: StrictInt | None = None
    manual_executors: StrictInt | None = None
    policy_params: dict[str, Any] | None = None
    query_requests: dict[str, SavedQueryParams] = {}

    def value(self) -> ControlState:
        return ControlState(
            paused=self.paused,
            mode=self.mode,
            dry_run=self.dry_run,
            min_executors=self.min_executors,
            max_executors=self.max_executors,
            manual_executors=self.manual_executors,
            policy_params=self.policy_params,
            query_requests={name: params.value() for name, params in self.query_requests.items()},
        )


class SavedQuery(_Saved):
    running: SavedQueryParams
    declared: SavedQueryParams

    def value(self) -> QueryResume:
        return QueryResume(self.running.value(), self.declared.value())


class SavedState(_Saved):
    history: SavedHistory = SavedHistory()
    control: SavedControl = SavedControl()
    queries: dict[str, SavedQuery] = {}


@dataclass(frozen=True)
class Restored:
    history: ScalingHistory = field(default_factory=ScalingHistory)
    control: ControlState = field(default_factory=ControlState)
    queries: Mapping[str, QueryResume] = field(default_factory=dict)  # hosted queries, as they last ran


def queries_json(queries: Mapping[str, QueryResume]) -> dict[str, Any]:
    """The ``queries`` part of a saved state."""
    return {name: {"running": q.running.to_json(), "declared": q.declared.to_json()} for name, q in queries.items()}


def restore_state(state: dict[str, Any], where: str) -> Restored:
    """The history, the overrides and the hosted queries' settings saved in ``state``;
    :class:`StateStoreError` naming every entry the daemon could not restore, and nothing
    restored, when any is wrong."""
    try:
        saved = SavedState.model_validate(state)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(state)'}: {e['msg']}" for e in exc.errors())
        raise StateStoreError(f"{where}: the saved state does not fit this daemon ({problems}); fix or remove it to start afresh") from None
    return Restored(saved.history.value(), saved.control.value(), {name: q.value() for name, q in saved.queries.items()})
