"""The realizer: the only code that calls the actuators (after Flink's ``ScalingRealizer``).

``Realizer.apply(plan, now)`` carries out one tick's :class:`~autoscaler.core.model.Plan` and
says what became of each action. Remove first (Spark lowers its target by the number removed),
then pin the absolute target (``requestTotalExecutors``: re-asserted every tick, so a lost
request heals), then start the query rescales (asynchronous: their completion comes back as
an ``ActionOutcome`` in a later snapshot). One failed action never stops the others.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Callable

from autoscaler.core.history import EXECUTORS
from autoscaler.core.model import ActionKind, ActionResult, Plan
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.ports import ExecutorActuator, QueryActuator

log = get_logger("autoscaler.realizer")


class Realizer:
    def __init__(self, executors: ExecutorActuator, queries: QueryActuator | None) -> None:
        self.executors = executors
        self.queries = queries

    def apply(self, plan: Plan, now: datetime) -> tuple[ActionResult, ...]:
        results: list[ActionResult] = []
        if plan.remove:
            results.append(_try(ActionKind.REMOVE, ",".join(plan.remove), partial(self.executors.remove, plan.remove, now)))
        if plan.set_target is not None:
            results.append(_try(ActionKind.SET_TARGET, EXECUTORS, partial(self.executors.set_target, plan.set_target, now)))
        for change in plan.query_changes:
            if self.queries is None:
                results.append(ActionResult(ActionKind.RESCALE, change.name, False, "no query actuator"))
            else:
                results.append(_try(ActionKind.RESCALE, change.name, partial(self.queries.rescale, change, now)))
        return tuple(results)


def _try(action: ActionKind, subject: str, call: Callable[[], bool]) -> ActionResult:
    try:
        ok = bool(call())
        return ActionResult(action, subject, ok, "" if ok else "not accepted")
    except Exception as exc:  # one failed action must not stop the others
        log.warning("action_failed", action=str(action), subject=subject, error=str(exc))
        return ActionResult(action, subject, False, f"{type(exc).__name__}: {exc}")
