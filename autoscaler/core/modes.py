"""Mode selection: ``auto`` picks active when the cluster manager can grant executor requests."""

from __future__ import annotations

from autoscaler.core.model import EffectiveMode, ExecutorView, Mode, Reason


def resolve_mode(configured: Mode, view: ExecutorView, not_granted: bool = False) -> EffectiveMode:
    can_request, can_request_reason = view.can_request, view.can_request_reason
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
        message = "requested executors were not granted in time; running on those registered"
        if view.pods is not None and view.pods.pending:
            message += f" ({view.pods.describe()})"  # Kubernetes: what the scheduler says
        return EffectiveMode(configured, Mode.ACTIVE, Reason.REQUEST_NOT_GRANTED, fallback=True, message=message)
    return EffectiveMode(configured, Mode.ACTIVE, reason, message="requesting executors from the cluster manager")
