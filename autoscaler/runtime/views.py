"""JSON views of the tick's values, shared by the audit trail, the REST API and recordings.

Every number keeps its unit in its key (``_seconds``, ``_rows_per_second``); ``None`` stays
``null`` (unknown), never 0.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from autoscaler.core.model import (
    ActionResult,
    ExecutorDecision,
    ExecutorPods,
    Mode,
    QueryChange,
    QueryLoad,
    QueryParams,
    QueryRefusal,
    QueryView,
    Reason,
    TickRecord,
)

UP, DOWN, HOLD = "up", "down", "hold"


def iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else round(value.total_seconds(), 3)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def describe_params_change(old: QueryParams, new: QueryParams) -> str:
    """``partitions 4 -> 8, rate limit none -> 500 rows/batch``: only what changes."""

    def trig(t: timedelta | None) -> str:
        return "none" if t is None else f"{t.total_seconds():g}s"

    def limit(n: int | None) -> str:
        return "none" if n is None else f"{n} rows/batch"

    parts = []
    if old.parallelism != new.parallelism:
        parts.append(f"partitions {old.parallelism} -> {new.parallelism}")
    if old.shuffle_partitions != new.shuffle_partitions:
        parts.append(f"shuffle partitions {old.shuffle_partitions} -> {new.shuffle_partitions}")
    if old.max_rows_per_batch != new.max_rows_per_batch:
        parts.append(f"rate limit {limit(old.max_rows_per_batch)} -> {limit(new.max_rows_per_batch)}")
    if old.trigger_interval != new.trigger_interval:
        parts.append(f"trigger {trig(old.trigger_interval)} -> {trig(new.trigger_interval)}")
    return ", ".join(parts) or "no change"


def capacity(load: QueryLoad, cores: int) -> float | None:
    """Rows/s the query can process at its partitions on ``cores`` (large batches), from its cost model."""
    if load.model is None or not load.parallelism or cores <= 0:
        return None
    return load.model.throughput(load.parallelism, cores)


def load_json(load: QueryLoad, cores: int) -> dict[str, Any]:
    return {
        "samples": load.samples,
        "input_rows_per_second": _round(load.input_rate, 2),
        "processing_rows_per_second": _round(load.processing_rate, 2),
        "capacity_rows_per_second": _round(capacity(load, cores), 2),
        "busy_ratio": _round(load.busy_fraction),
        "backlog_rows": load.backlog_rows,
        "lag_seconds": seconds(load.lag),
        "batch_duration_seconds": seconds(load.batch_duration),
        "parallelism": load.parallelism,
    }


def query_view_json(view: QueryView) -> dict[str, Any]:
    return {
        "name": view.name,
        "status": view.status.value,
        "params": view.params.to_json(),
        "declared": view.declared.to_json() if view.declared is not None else None,
        "min_parallelism": view.min_parallelism,
        "max_parallelism": view.max_parallelism,
        "rescalable": view.rescalable,
        "bounded": view.bounded,
        "stateful": view.stateful,
        "state_store": view.state_store,
        "restarts": view.restarts,
        "batch_running": view.batch_running,
        "run_started_at": iso(view.run_started_at),
        "last_error": view.last_error,
    }


def executor_pods_json(pods: ExecutorPods | None) -> dict[str, Any] | None:
    """Kubernetes executor pods: ``{pending, unschedulable, message}``; None elsewhere."""
    if pods is None:
        return None
    return {"pending": pods.pending, "unschedulable": pods.unschedulable, "message": pods.message}


def decision_json(d: ExecutorDecision) -> dict[str, Any]:
    return {
        "current": d.current,
        "proposed": d.proposed,
        "target": d.target,
        "reason": d.reason.value,
        "limits": [x.value for x in d.limits],
        "message": d.message,
    }


def change_json(c: QueryChange) -> dict[str, Any]:
    return {
        "query": c.name,
        "from": c.from_params.to_json(),
        "to": c.to_params.to_json(),
        "reason": c.reason.value,
        "message": c.message or describe_params_change(c.from_params, c.to_params),
    }


def refusal_json(r: QueryRefusal) -> dict[str, Any]:
    return {"query": r.name, "wanted": r.wanted.to_json(), "reason": r.reason.value, "message": r.message}


def result_json(r: ActionResult) -> dict[str, Any]:
    return {"action": r.action, "subject": r.subject, "ok": r.ok, "message": r.message}


def executor_direction(record: TickRecord) -> tuple[str, Reason] | None:
    """Direction and reason of the tick's executor decision, or None when no change was wanted.

    ``up``/``down``: the target changed (reason ``Paused``/``DryRun``/``UseAvailable`` when
    pausing, a dry run or reactive mode kept it from being applied); ``hold``: a change was
    wanted but normalization held it.
    """
    d = record.decision
    if d.changes:
        assert d.target is not None
        direction = UP if d.target > d.current else DOWN
        if record.paused:
            return direction, Reason.PAUSED
        if record.dry_run:
            return direction, Reason.DRY_RUN
        if record.mode.mode != Mode.ACTIVE:
            return direction, Reason.USE_AVAILABLE  # reactive mode neither requests nor removes
        return direction, d.reason
    if d.proposed is not None and d.proposed != d.current:
        return HOLD, d.reason
    return None


def tick_json(r: TickRecord) -> dict[str, Any]:
    """Inputs (the snapshot summary), proposal, normalized decision, plan and action results."""
    p = r.proposal
    return {
        "at": iso(r.at),
        "mode": {
            "configured": r.mode.configured.value,
            "effective": r.mode.mode.value,
            "reason": r.mode.reason.value,
            "fallback": r.mode.fallback,
            "message": r.mode.message,
        },
        "inputs": {
            "executors": {
                "alive": r.executors_alive,
                "cores": r.executors_cores,
                "requested": r.executors_requested,
                "pending": r.executors_pending,
                "lost": list(r.executors_lost),
                "pods": executor_pods_json(r.executor_pods),
            },
            "bounds": {"min": r.min_executors, "max": r.max_executors},
            "queries": {ld.name: load_json(ld, r.executors_cores) for ld in r.loads},
        },
        "proposal": {
            "executors": p.executors,
            "reason": p.reason.value,
            "message": p.message,
            "parallelism": dict(p.parallelism),
            "details": dict(p.details),
        },
        "decision": decision_json(r.decision),
        "plan": {
            "set_target": r.plan.set_target,
            "remove": list(r.plan.remove),
            "query_changes": [change_json(c) for c in r.plan.query_changes],
            "refusals": [refusal_json(x) for x in r.plan.refusals],
        },
        "results": [result_json(x) for x in r.results],
        "paused": r.paused,
        "dry_run": r.dry_run,
        "duration_seconds": seconds(r.duration),
    }
