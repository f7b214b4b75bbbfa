"""The shape of the state the reconciler saves: checked before any of it is used.

A store keeps any JSON object (the store contract); what the reconciler restores from it must
be exactly what it saved (``ScalingHistory.to_json``, ``ControlState.to_json``). A state file
edited by hand or written by another version could otherwise crash the start-up with a bare
``KeyError``, or worse load: ``"paused": "no"`` read as paused, a bound ``"3"`` failing every
tick. Types are strict (no string-to-number or string-to-bool coercion), times carry their
zone (the daemon compares them with aware clock times) and unknown keys are refused. Whether
the overrides still fit the configuration is a separate question
(:func:`autoscaler.control.control_problems`: those are dropped loudly, not refused).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from autoscaler.model import Mode, Reason
from autoscaler.settings import MAX_DURATION
from autoscaler.state.base import StateStoreError

Seconds = Annotated[float, Field(ge=0, le=MAX_DURATION.total_seconds(), allow_inf_nan=False)]


class _Saved(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SavedEvent(_Saved):
    at: AwareDatetime
    subject: StrictStr
    from_value: StrictInt = Field(alias="from")
    to_value: StrictInt = Field(alias="to")
    reason: Reason
    pause_seconds: Seconds | None = None


class SavedHistory(_Saved):
    events: list[SavedEvent] = []
    recommendations: list[tuple[AwareDatetime, StrictInt]] = []
    scale_down_since: AwareDatetime | None = None
    rates: list[tuple[AwareDatetime, StrictStr, Annotated[float, Field(ge=0, allow_inf_nan=False)]]] = []


class SavedQueryParams(_Saved):
    parallelism: StrictInt
    shuffle_partitions: StrictInt | None = None
    trigger_interval_seconds: Seconds | None = None
    max_rows_per_batch: StrictInt | None = None


class SavedControl(_Saved):
    paused: StrictBool = False
    mode: Mode | None = None
    dry_run: StrictBool | None = None
    min_executors: StrictInt | None = None
    max_executors: StrictInt | None = None
    manual_executors: StrictInt | None = None
    policy_params: dict[str, Any] | None = None
    query_requests: dict[str, SavedQueryParams] = {}


class SavedState(_Saved):
    history: SavedHistory = SavedHistory()
    control: SavedControl = SavedControl()


def check_saved_state(state: dict[str, Any], where: str) -> None:
    """Raise :class:`StateStoreError` naming every entry of ``state`` the reconciler could not restore."""
    try:
        SavedState.model_validate(state)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(state)'}: {e['msg']}" for e in exc.errors())
        raise StateStoreError(f"{where}: the saved state does not fit this daemon ({problems}); fix or remove it to start afresh") from None
