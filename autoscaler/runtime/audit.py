"""The audit trail: why the daemon did what it did, and who changed what.

Two kinds of entries:

* ``decision``: a tick that changed something or held a wanted change (``TickRecord.notable``):
  its inputs (the snapshot summary), the policy's proposal, the normalized decision with its
  reason and limits, the plan, and each action's result. A query rescale's result gets its
  outcome (ok, measured pause) attached when the restart completes, ticks later.
* ``operator``: a change made through the control API: who (the token's identity), what
  (field, before, after) and when.

``event`` entries record what happened on its own (a bounded pipeline finished, a rescale
outcome whose decision is no longer in the trail).

The trail is bounded by count and by age. A hold repeated tick after tick (the same wanted
change held for the same reason) is folded into one entry with ``repeats`` and ``last_at``
instead of flooding the trail; an entry that acted is never folded.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from autoscaler.core.history import ScalingEvent
from autoscaler.core.model import ActionOutcome, Mode, Reason, TickRecord
from autoscaler.runtime.views import (
    describe_params_change,
    executor_direction,
    iso,
    seconds,
    tick_json,
)

DECISION, OPERATOR, EVENT = "decision", "operator", "event"
KINDS = (DECISION, OPERATOR, EVENT)
AUTOSCALER = "autoscaler"


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime  # first occurrence
    kind: str  # DECISION, OPERATOR or EVENT
    who: str  # "autoscaler" for decisions; the token's identity for operator changes
    what: str  # one line a human reads
    reason: str | None  # a Reason value for decisions; None for operator changes
    details: Mapping[str, Any] = field(default_factory=dict)  # JSON values
    last_at: datetime | None = None  # latest repetition of a folded hold
    repeats: int = 1
    fingerprint: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso(self.at),
            "last_at": iso(self.last_at or self.at),
            "repeats": self.repeats,
            "kind": self.kind,
            "who": self.who,
            "what": self.what,
            "reason": self.reason,
            "details": copy.deepcopy(dict(self.details)),
        }


class AuditTrail:
    """Thread-safe, bounded by ``max_count`` entries and ``max_age`` since an entry's last occurrence."""

    def __init__(self, max_count: int = 1000, max_age: timedelta = timedelta(hours=24)) -> None:
        if max_count < 1:
            raise ValueError("max_count must be at least 1")
        self.max_count = max_count
        self.max_age = max_age
        self._entries: deque[AuditEntry] = deque()
        self._next_id = 1
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def add(
        self,
        *,
        at: datetime,
        kind: str,
        who: str,
        what: str,
        reason: str | None = None,
        details: Mapping[str, Any] | None = None,
        fingerprint: str | None = None,
    ) -> AuditEntry:
        """Append an entry, or fold it into the newest one when both carry the same fingerprint."""
        if kind not in KINDS:
            raise ValueError(f"unknown audit entry kind {kind!r}")
        with self._lock:
            newest = self._entries[-1] if self._entries else None
            if fingerprint is not None and newest is not None and newest.fingerprint == fingerprint:
                entry = replace(newest, last_at=at, repeats=newest.repeats + 1)
                self._entries[-1] = entry
            else:
                entry = AuditEntry(self._next_id, at, kind, who, what, reason, dict(details or {}), at, 1, fingerprint)
                self._next_id += 1
                self._entries.append(entry)
            self._trim(at)
            return entry

    def _trim(self, now: datetime) -> None:
        while len(self._entries) > self.max_count:
            self._entries.popleft()
        cutoff = now - self.max_age
        while self._entries and (self._entries[0].last_at or self._entries[0].at) < cutoff:
            self._entries.popleft()

    def entries(self, limit: int | None = None, kind: str | None = None) -> list[AuditEntry]:
        """Newest first."""
        with self._lock:
            out = [e for e in reversed(self._entries) if kind is None or e.kind == kind]
        return out if limit is None else out[:limit]

    def get(self, entry_id: int) -> AuditEntry | None:
        with self._lock:
            return next((e for e in self._entries if e.id == entry_id), None)

    def update_newest(self, match: Callable[[AuditEntry], bool], change: Callable[[AuditEntry], AuditEntry]) -> AuditEntry | None:
        """Replace the newest entry that ``match``es with ``change(entry)``; None if there is none."""
        with self._lock:
            for i in range(len(self._entries) - 1, -1, -1):
                if match(self._entries[i]):
                    self._entries[i] = change(self._entries[i])
                    return self._entries[i]
        return None

    # --- from ticks ----------------------------------------------------------------------

    def record_tick(self, record: TickRecord) -> AuditEntry | None:
        """An entry for a notable tick, and the outcomes of earlier actions attached to theirs."""
        for outcome in record.outcomes:
            self.record_outcome(record.at, outcome)
        if not record.notable:
            return None
        what, reason = describe_tick(record)
        fingerprint = None if record.acted else f"{what}|{reason.value}|{record.paused}|{record.dry_run}"
        return self.add(
            at=record.at,
            kind=DECISION,
            who=AUTOSCALER,
            what=what,
            reason=reason.value,
            details=tick_json(record),
            fingerprint=fingerprint,
        )

    def record_outcome(self, at: datetime, outcome: ActionOutcome) -> AuditEntry | None:
        """Attach a completed rescale (ok, measured pause) to the decision that started it."""
        result = {
            "ok": outcome.ok,
            "finished_at": iso(outcome.finished_at),
            "pause_seconds": seconds(outcome.pause),
            "message": outcome.message,
        }
        attached = None
        if outcome.kind == "rescale":

            def waiting(e: AuditEntry) -> bool:
                return e.kind == DECISION and any(
                    r["action"] == "rescale" and r["subject"] == outcome.subject and r["ok"] and "outcome" not in r
                    for r in e.details.get("results", ())
                )

            def attach(e: AuditEntry) -> AuditEntry:
                details = copy.deepcopy(dict(e.details))
                for r in details["results"]:
                    if r["action"] == "rescale" and r["subject"] == outcome.subject and r["ok"] and "outcome" not in r:
                        r["outcome"] = result
                        break
                return replace(e, details=details)

            attached = self.update_newest(waiting, attach)
        if attached is not None and outcome.ok:
            return attached
        return self.add(
            at=at,
            kind=EVENT,
            who=AUTOSCALER,
            what=describe_outcome(outcome),
            reason=None if outcome.ok else Reason.QUERY_FAILED.value,
            details={"subject": outcome.subject, "kind": outcome.kind, "started_at": iso(outcome.started_at),
                     "decision_id": attached.id if attached else None, **result},
        )


def describe_outcome(o: ActionOutcome) -> str:
    if o.kind == "rescale":
        change = describe_params_change(o.from_params, o.to_params) if o.from_params and o.to_params else "new settings"
        if o.ok:
            pause = f", paused {o.pause.total_seconds():.1f}s" if o.pause is not None else ""
            return f"query {o.subject}: rescale done ({change}{pause})"
        return f"query {o.subject}: rescale failed ({change}): {o.message}"[:300]
    if o.kind == "finish":
        return f"query {o.subject}: finished ({o.message or 'bounded input done'})"
    if o.kind == "restart":
        return f"query {o.subject}: {o.message}"[:300] if o.message else f"query {o.subject}: restart {'done' if o.ok else 'given up'}"
    return f"query {o.subject}: {o.kind} {'ok' if o.ok else 'failed'} {o.message}".strip()


def describe_tick(r: TickRecord) -> tuple[str, Reason]:
    """One line and the main reason: ``executors 1 -> 4 (ScaleUpForLoad)``, ``executors held at 4 ...``."""
    parts: list[str] = []
    reasons: list[Reason] = []
    d = r.decision
    if r.executors_lost:
        parts.append(f"lost executor(s) {', '.join(r.executors_lost)}")
    direction = executor_direction(r)
    if direction is not None:
        if d.changes:
            reactive = " [reactive mode: not applied]" if r.mode.mode != Mode.ACTIVE else ""
            parts.append(f"executors {d.current} -> {d.target} ({d.reason.value}){reactive}")
        else:
            parts.append(f"executors held at {d.current}, wanted {d.proposed} ({d.reason.value})")
        reasons.append(direction[1] if d.changes else d.reason)
    for c in r.plan.query_changes:
        parts.append(f"query {c.name}: {describe_params_change(c.from_params, c.to_params)} ({c.reason.value})")
        reasons.append(c.reason)
    for ref in r.plan.refusals:
        parts.append(f"query {ref.name}: change to {describe_params_change(_current(r, ref.name), ref.wanted)} held ({ref.reason.value})")
        reasons.append(ref.reason)
    if not parts:
        parts.append(f"executors {d.current}: {d.reason.value}")
    failed = [res for res in r.results if not res.ok]
    text = "; ".join(parts)
    if r.paused and not r.results:
        text += " [paused: not applied]"
    elif r.dry_run:
        text += " [dry run: not applied]"
    if failed:
        text += " [failed: " + ", ".join(f"{f.action} {f.subject}: {f.message}" for f in failed) + "]"
    reason = reasons[0] if reasons else (Reason.EXECUTORS_LOST if r.executors_lost else d.reason)
    return text[:500], reason


def _current(r: TickRecord, name: str) -> Any:
    from autoscaler.core.model import QueryParams

    view = next((q for q in r.queries if q.name == name), None)
    return view.params if view is not None else QueryParams(parallelism=0)


def explain_event(audit: AuditTrail, event: ScalingEvent) -> dict[str, Any] | None:
    """The decision entry that made a history event (a rescale), with its measured pause; None if absent."""
    from autoscaler.core.history import EXECUTORS

    for entry in audit.entries(kind=DECISION):
        if entry.at != event.at:
            continue
        details = entry.details
        if event.subject == EXECUTORS:
            d = details.get("decision", {})
            if (d.get("current"), d.get("target")) != (event.from_value, event.to_value):
                continue
            reason = d.get("reason")
        else:
            change = next((c for c in details.get("plan", {}).get("query_changes", ()) if c["query"] == event.subject), None)
            if change is None:
                continue
            reason = change["reason"]
        result = next((r for r in details.get("results", ()) if r["subject"] == event.subject and r["ok"]), None)
        outcome = (result or {}).get("outcome") or {}
        return {"id": entry.id, "what": entry.what, "reason": reason, "pause_seconds": outcome.get("pause_seconds")}
    return None
