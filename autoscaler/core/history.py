"""Scaling history: what changed when, bounded by age and count, saved once per tick."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from autoscaler.core.model import Reason

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


@dataclass(frozen=True, slots=True)
class RatePoint:
    """Mean arrival rate of a query over one step of the rate history."""

    at: datetime  # start of the step
    subject: str  # query name
    rate: float  # rows/s that arrived during [at, at + step)


def _at(point: RatePoint) -> datetime:
    return point.at


def _event_at(event: ScalingEvent) -> datetime:
    return event.at


@dataclass(frozen=True, slots=True)
class ScalingHistory:
    events: tuple[ScalingEvent, ...] = ()  # in time order (appended as they happen)
    # executor counts recommended each tick, for the delayed scale-down (max over the window);
    # in time order (each tick appends ``now``), so windows are found by bisection
    recommendations: tuple[tuple[datetime, int], ...] = ()
    scale_down_since: datetime | None = None
    # arrival rate per query and step (history.rate_step), in time order, for forecasts
    rates: tuple[RatePoint, ...] = ()

    def with_event(self, event: ScalingEvent) -> ScalingHistory:
        return replace(self, events=self.events + (event,))

    def with_recommendation(self, at: datetime, executors: int) -> ScalingHistory:
        return replace(self, recommendations=self.recommendations + ((at, executors),))

    def with_scale_down_since(self, at: datetime | None) -> ScalingHistory:
        if at == self.scale_down_since:
            return self
        return replace(self, scale_down_since=at)

    def with_rate(self, point: RatePoint) -> ScalingHistory:
        return replace(self, rates=self.rates + (point,))

    def events_since(self, subject: str, since: datetime, *, previous: bool = False) -> list[ScalingEvent]:
        """``subject``'s events at or after ``since``, oldest first; with ``previous`` the last
        one before ``since`` leads (what a change undid)."""
        events = self.events
        i = bisect.bisect_left(events, since, key=_event_at)
        found = [e for e in events[i:] if e.subject == subject]
        if previous:
            before = next((e for e in reversed(events[:i]) if e.subject == subject), None)
            if before is not None:
                found.insert(0, before)
        return found

    def last_change_at(self, subject: str | None = None) -> datetime | None:
        times = [e.at for e in self.events if subject is None or e.subject == subject]
        return max(times) if times else None

    def max_recommendation_since(self, since: datetime) -> int | None:
        recs = self.recommendations
        values = [n for _, n in recs[bisect.bisect_left(recs, (since,)) :]]
        return max(values) if values else None

    def restart_pauses(self) -> list[timedelta]:
        return [e.pause for e in self.events if e.pause is not None]

    def rate_series(
        self, subject: str, since: datetime | None = None, until: datetime | None = None
    ) -> list[tuple[datetime, float]]:
        """(step start, rows/s) of one query, oldest first; steps starting in [since, until]."""
        rates = self.rates
        start = 0 if since is None else bisect.bisect_left(rates, since, key=_at)
        end = len(rates) if until is None else bisect.bisect_right(rates, until, key=_at)
        return [(r.at, r.rate) for r in rates[start:end] if r.subject == subject]

    def last_rate_at(self, subject: str) -> datetime | None:
        for r in reversed(self.rates):
            if r.subject == subject:
                return r.at
        return None

    def trimmed(
        self, now: datetime, max_age: timedelta, max_count: int, rate_max_age: timedelta | None = None, rate_max_count: int | None = None
    ) -> ScalingHistory:
        """Drop entries older than ``max_age`` and keep at most ``max_count`` of each kind.

        The rate history has its own limits (``rate_max_age``, ``rate_max_count``; by default the
        same as the others).
        """
        cutoff = now - max_age
        events = self.events
        if events and events[0].at < cutoff:
            events = events[bisect.bisect_left(events, cutoff, key=_event_at) :]
        if len(events) > max_count:
            events = events[-max_count:]
        recs = self.recommendations
        start = max(bisect.bisect_left(recs, (cutoff,)), len(recs) - max_count)
        if start > 0:
            recs = recs[start:]
        rates = self.rates
        rate_cutoff = now - (rate_max_age if rate_max_age is not None else max_age)
        if rates and rates[0].at < rate_cutoff:
            rates = rates[bisect.bisect_left(rates, rate_cutoff, key=_at) :]
        limit = rate_max_count if rate_max_count is not None else max_count
        if len(rates) > limit:
            rates = rates[-limit:]
        if events is self.events and recs is self.recommendations and rates is self.rates:
            return self
        return replace(self, events=events, recommendations=recs, rates=rates)

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
            "rates": [[r.at.isoformat(), r.subject, r.rate] for r in self.rates],
        }
