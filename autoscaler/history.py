"""Scaling history: what changed when, bounded by age and count, saved once per tick."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from autoscaler.model import Reason

EXECUTORS = "executors"


@dataclass(frozen=True, slots=True)
class ScalingEvent:
    at: datetime
    subject: str  # EXECUTORS or a query name
    from_value: int
    to_value: int
    reason: Reason
    pause: timedelta | None = None  # measured restart pause of a query rescale

    @property
    def direction(self) -> str:
        return "up" if self.to_value > self.from_value else "down"


@dataclass(frozen=True)
class ScalingHistory:
    events: tuple[ScalingEvent, ...] = ()
    # executor counts recommended each tick, for the delayed scale-down (max over the window);
    # in time order (each tick appends ``now``), so windows are found by bisection
    recommendations: tuple[tuple[datetime, int], ...] = ()
    scale_down_since: datetime | None = None

    def with_event(self, event: ScalingEvent) -> ScalingHistory:
        return replace(self, events=self.events + (event,))

    def with_recommendation(self, at: datetime, executors: int) -> ScalingHistory:
        return replace(self, recommendations=self.recommendations + ((at, executors),))

    def with_scale_down_since(self, at: datetime | None) -> ScalingHistory:
        return replace(self, scale_down_since=at)

    def last_change_at(self, subject: str | None = None) -> datetime | None:
        times = [e.at for e in self.events if subject is None or e.subject == subject]
        return max(times) if times else None

    def max_recommendation_since(self, since: datetime) -> int | None:
        recs = self.recommendations
        values = [n for at, n in recs[bisect.bisect_left(recs, (since,)) :]]
        return max(values) if values else None

    def restart_pauses(self) -> list[timedelta]:
        return [e.pause for e in self.events if e.pause is not None]

    def trimmed(self, now: datetime, max_age: timedelta, max_count: int) -> ScalingHistory:
        """Drop entries older than ``max_age`` and keep at most ``max_count`` of each kind."""
        cutoff = now - max_age
        events = tuple(e for e in self.events if e.at >= cutoff)[-max_count:]
        recs = self.recommendations
        recs = recs[bisect.bisect_left(recs, (cutoff,)) :][-max_count:]
        if events == self.events and recs is self.recommendations:
            return self
        return replace(self, events=events, recommendations=recs)

    # --- persistence --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "events": [
                {
                    "at": e.at.isoformat(),
                    "subject": e.subject,
                    "from": e.from_value,
                    "to": e.to_value,
                    "reason": e.reason.value,
                    "pause_seconds": None if e.pause is None else e.pause.total_seconds(),
                }
                for e in self.events
            ],
            "recommendations": [[at.isoformat(), n] for at, n in self.recommendations],
            "scale_down_since": self.scale_down_since.isoformat() if self.scale_down_since else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScalingHistory:
        events = tuple(
            ScalingEvent(
                at=datetime.fromisoformat(e["at"]),
                subject=e["subject"],
                from_value=int(e["from"]),
                to_value=int(e["to"]),
                reason=Reason(e["reason"]),
                pause=None if e.get("pause_seconds") is None else timedelta(seconds=e["pause_seconds"]),
            )
            for e in data.get("events", [])
        )
        recs = tuple(sorted((datetime.fromisoformat(at), int(n)) for at, n in data.get("recommendations", [])))
        since = data.get("scale_down_since")
        return cls(events, recs, datetime.fromisoformat(since) if since else None)
