"""Forecast a query's arrival rate for the next minutes from its remembered rates.

Pure functions over the rate history (:class:`~autoscaler.history.RatePoint` series, one mean
per step). Two predictors, both cheap and explainable:

* **seasonal**: the highest rate one period ago (a week, else a day) within the horizon from
  the same time of day, scaled by how the current level compares with that period's level over
  the last ``level_window`` (a multiplicative level adjustment). Used only while it has
  predicted the recent past better than the current rate would have (its skill: the error of
  both predictions of the peak within the horizon, over ``skill_window``), so a series without
  a daily pattern (random spikes) never echoes yesterday's spike;
* **persistence**: the current rate.

The forecast is never below the current rate: it only ever asks for capacity earlier, and a
drop is left to the delayed scale-down.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Sequence

from autoscaler.history import ScalingHistory

DAY = timedelta(days=1)
WEEK = timedelta(days=7)


@dataclass(frozen=True)
class Forecast:
    current: float  # rows/s now
    peak: float  # highest rate expected within the horizon (>= current)
    method: str  # "persistence" or "seasonal-1d" / "seasonal-7d"
    skill: float | None = None  # seasonal error / persistence error over the skill window (< 1: better)


class Series:
    """A rate series (time ascending) with lookups by time."""

    def __init__(self, points: Sequence[tuple[datetime, float]], step: timedelta) -> None:
        self.times = [p[0].timestamp() for p in points]
        self.rates = [p[1] for p in points]
        self.step = step.total_seconds()

    def at(self, when: float) -> float | None:
        """The rate of the step that contains ``when`` (seconds), None if not remembered."""
        i = bisect.bisect_right(self.times, when) - 1
        if i < 0 or when - self.times[i] >= self.step:
            return None
        return self.rates[i]

    def mean(self, start: float, end: float) -> float | None:
        """Mean rate of the steps starting in ``[start, end)``; None if fewer than half are known."""
        i = bisect.bisect_left(self.times, start)
        j = bisect.bisect_left(self.times, end)
        values = self.rates[i:j]
        expected = max(1, round((end - start) / self.step))
        if len(values) * 2 < expected:
            return None
        return sum(values) / len(values)

    def peak(self, start: float, end: float) -> float | None:
        i = bisect.bisect_left(self.times, start)
        j = bisect.bisect_left(self.times, end)
        return max(self.rates[i:j]) if j > i else None


def seasonal_error(
    series: Series, period: float, end: float, window: float, level_window: float, horizon: float
) -> tuple[float, float] | None:
    """Mean absolute error of two predictions of the highest rate within ``horizon``, over the
    forecast times in ``[end - horizon - window, end - horizon)`` (their outcome is known):
    the level-adjusted seasonal one and persistence (the rate at the forecast time)."""
    seasonal = persistence = 0.0
    n = 0
    step = series.step
    t = end - horizon - window
    stop = end - horizon
    while t < stop:
        actual = series.peak(t, t + horizon)
        current = series.at(t)
        past = series.peak(t - period, t - period + horizon)
        level_now = series.mean(t - level_window, t)
        level_then = series.mean(t - period - level_window, t - period)
        if None not in (actual, current, past, level_now, level_then) and level_then:
            assert actual is not None and current is not None and past is not None and level_now is not None
            seasonal += abs(max(current, past * level_now / level_then) - actual)
            persistence += abs(current - actual)
            n += 1
        t += step
    if n < window / step / 2:
        return None
    return seasonal / n, persistence / n


def seasonal_peak(
    points: Sequence[tuple[datetime, float]],
    now: datetime,
    *,
    step: timedelta,
    horizon: timedelta,
    level_window: timedelta = timedelta(minutes=30),
    skill_window: timedelta = timedelta(hours=6),
    max_skill: float = 0.8,
    max_level_ratio: float = 3.0,
) -> tuple[float | None, str, float | None]:
    """(expected peak within ``horizon`` or None, method, skill) from the seasonal predictor."""
    if not points or horizon.total_seconds() <= 0:
        return None, "persistence", None
    series = Series(points, step)
    end = now.timestamp()
    lw = level_window.total_seconds()
    for period, name in ((WEEK, "seasonal-7d"), (DAY, "seasonal-1d")):
        p = period.total_seconds()
        if series.times[0] > end - p - lw:
            continue  # not a full period of history yet
        errors = seasonal_error(series, p, end, skill_window.total_seconds(), lw, horizon.total_seconds())
        if errors is None:
            continue
        seasonal_err, persistence_err = errors
        skill = seasonal_err / persistence_err if persistence_err > 0 else math.inf
        if skill > max_skill:
            return None, "persistence", skill
        level_now = series.mean(end - lw, end)
        level_then = series.mean(end - p - lw, end - p)
        past_peak = series.peak(end - p, end - p + horizon.total_seconds())
        if not level_now or not level_then or past_peak is None:
            continue
        ratio = min(max_level_ratio, max(1.0 / max_level_ratio, level_now / level_then))
        return past_peak * ratio, name, skill
    return None, "persistence", None


Memo = dict[tuple[str, int, float], tuple[object, tuple[float | None, str, float | None]]]


def forecast_rate(
    history: ScalingHistory,
    subject: str,
    now: datetime,
    current: float,
    *,
    step: timedelta,
    horizon: timedelta,
    memo: Memo | None = None,
    **options: float | timedelta,
) -> Forecast:
    """The highest rate ``subject`` is expected to receive within ``horizon`` of ``now``.

    The seasonal part changes only when a step of history is added, so a caller that passes a
    ``memo`` (its own, e.g. one per policy instance) gets it computed once per step (at the
    step's start) and remembered while the history's rates are the same object.
    """
    seconds = step.total_seconds()
    bucket = math.floor(now.timestamp() / seconds)
    key = (subject, bucket, horizon.total_seconds())
    hit = memo.get(key) if memo is not None else None
    if hit is not None and hit[0] is history.rates:
        peak, method, skill = hit[1]
    else:
        at = datetime.fromtimestamp(bucket * seconds, tz=now.tzinfo)
        peak, method, skill = seasonal_peak(history.rate_series(subject), at, step=step, horizon=horizon, **options)  # type: ignore[arg-type]
        if memo is not None:
            if len(memo) > 64:
                memo.clear()
            memo[key] = (history.rates, (peak, method, skill))
    if peak is None:
        return Forecast(current, current, method, skill)
    return Forecast(current, max(current, peak), method, skill)
