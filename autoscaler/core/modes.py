"""Mode selection: ``auto`` picks active when the cluster manager can grant executor requests."""

from __future__ import annotations

from autoscaler.core.model import EffectiveMode, ExecutorView, Mode, Reason


def resolve_mode(configured: Mode, view: ExecutorView, not_granted: bool = False) -> EffectiveMode:
    return _resolve(configured, view.can_request, view.can_request_reason, not_granted)


def _resolve(configured: Mode, can_request: bool, can_request_reason: Reason, not_granted: bool) -> EffectiveMode:
    if configured == Mode.REACTIVE:
        return EffectiveMode(configured, Mode.REACTIVE, Reason.MODE_CONFIGURED, message="reactive mode configured")
    if not can_request:
        why = "cluster manager cannot grant executor requests"
        if can_request_reason == Reason.DYNAMIC_ALLOCATION_ON:
            why = "Spark dynamic allocation owns the executor count"
        return EffectiveMode(
            configured,
            Mode.REACTIVE,
            can_request_reason,
            fallback=configured == Mode.ACTIVE,
            message=f"{why}; adapting to the executors that exist",
        )
    reason = Reason.MODE_CONFIGURED if configured == Mode.ACTIVE else Reason.CAN_REQUEST_EXECUTORS
    if not_granted:
        return EffectiveMode(
            configured,
            Mode.ACTIVE,
            Reason.REQUEST_NOT_GRANTED,
            fallback=True,
            message="requested executors were not granted in time; running on those registered",
        )
    return EffectiveMode(configured, Mode.ACTIVE, reason, message="requesting executors from the cluster manager")
