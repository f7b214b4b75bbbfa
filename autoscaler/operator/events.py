"""Kubernetes Events on the app: what the daemon decided, what the operator did, what went wrong.

Messages have one stable format, ``<what> [audit <id>]`` for the daemon's decisions (``what``
is the daemon's own one-line account, e.g. ``executors 2 -> 4 (ScaleUpForLoad)``): people
and tools parse them (FLINK-34104). Event names are deterministic (the app's uid, the reason
and a key), so a repeat of the same event updates its ``count`` and ``lastTimestamp``
instead of adding an object; a repeat within ``events_repeat_interval`` is not sent at all
and its count catches up with the next one (Flink's ``scaling.report.interval``,
FLINK-33187).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autoscaler.operator.config import AppRef

NORMAL, WARNING = "Normal", "Warning"
# reasons the operator writes
SCALED_UP, SCALED_DOWN, SCALING_HELD, QUERY_RESCALED = "ScaledUp", "ScaledDown", "ScalingHeld", "QueryRescaled"
EXECUTORS_LOST, QUERY_FAILED, EXECUTORS_NOT_GRANTED = "ExecutorsLost", "QueryFailed", "ExecutorsNotGranted"
CONTROL_APPLIED, CONTROL_REJECTED, ROLLOUT_STARTED = "ControlApplied", "ControlRejected", "RolloutStarted"
DAEMON_UNREACHABLE, SPEC_INVALID, APPLY_REFUSED = "DaemonUnreachable", "SpecInvalid", "ApplyRefused"
CHANGES_REFUSED = "DaemonRefusesChanges"
COMPONENT = "spark-autoscaler-operator"
MAX_MESSAGE = 1024


@dataclass(frozen=True)
class EventSpec:
    type: str  # Normal or Warning
    reason: str
    message: str
    key: str  # what makes two events "the same" (with the reason): their name


def event_name(ref: AppRef, reason: str, key: str) -> str:
    """``<app>.<16 hex>``: deterministic, a valid object name, unique per app, reason and key."""
    digest = hashlib.sha256(f"{ref.uid}\x00{reason}\x00{key}".encode()).hexdigest()[:16]
    return f"{ref.name[:200]}.{digest}"


def decision_message(entry: Mapping[str, Any]) -> str:
    return f"{entry.get('what')} [audit {entry.get('id')}]"


def classify_entry(entry: Mapping[str, Any]) -> EventSpec | None:
    """The Event for one audit entry of the daemon (``GET /api/v1/decisions``), or None."""
    kind, details = entry.get("kind"), entry.get("details") or {}
    what = str(entry.get("what") or "")
    message = decision_message(entry)
    if kind == "event":
        if entry.get("reason") == "QueryFailed":
            return EventSpec(WARNING, QUERY_FAILED, message, what)
        return None
    if kind != "decision":
        return None  # operator changes: the operator's own ControlApplied events tell them
    decision = details.get("decision") or {}
    lost = (details.get("inputs") or {}).get("executors", {}).get("lost") or []
    current, target = decision.get("current"), decision.get("target")
    if target is not None and current is not None and target != current:
        return EventSpec(NORMAL, SCALED_UP if target > current else SCALED_DOWN, message, what)
    if (details.get("plan") or {}).get("query_changes"):
        return EventSpec(NORMAL, QUERY_RESCALED, message, what)
    if lost:
        return EventSpec(WARNING, EXECUTORS_LOST, message, what)
    return EventSpec(NORMAL, SCALING_HELD, message, what)


def decision_events(entries: Sequence[Mapping[str, Any]], cursor: Mapping[str, Any] | None, pod_uid: str | None) -> tuple[list[EventSpec], dict[str, Any]]:
    """Events for the audit entries newer than ``cursor`` (oldest first) and the new cursor.

    Audit ids restart with the daemon: a new pod (another uid) starts the count again. The
    cursor lives in the status, so an operator that restarts does not repeat what it told.
    """
    newest = max((int(e.get("id") or 0) for e in entries), default=0)
    start = int(cursor.get("decisionId") or 0) if cursor is not None and cursor.get("podUID") == pod_uid else 0
    events = [ev for e in sorted(entries, key=lambda e: int(e.get("id") or 0)) if int(e.get("id") or 0) > start if (ev := classify_entry(e))]
    return events, {"podUID": pod_uid, "decisionId": max(newest, start)}


def event_body(ref: AppRef, ev: EventSpec, name: str, now_iso: str, instance: str) -> dict[str, Any]:
    """A new core/v1 Event on the app (``count`` 1)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ref.namespace},
        "involvedObject": {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp", "name": ref.name,
                           "namespace": ref.namespace, "uid": ref.uid},
        "type": ev.type,
        "reason": ev.reason,
        "message": ev.message[:MAX_MESSAGE],
        "count": 1,
        "firstTimestamp": now_iso,
        "lastTimestamp": now_iso,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
    }
