"""Forecast a query's arrival rate for the next minutes from its remembered rates.

Pure functions over the rate history (:class:`~autoscaler.core.history.RatePoint` series, one mean
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

from autoscaler.core.history import RatePoint, ScalingHistory
from autoscaler.core.sequences import count_after

DAY = timedelta(days=1)
WEEK = timedelta(days=7)


@dataclass(frozen=True, slots=True)
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

    @classmethod
    def of(cls, rates: Sequence[RatePoint], subject: str, step: timedelta) -> Series:
        """``subject``'s series in a rate history."""
        return cls([(r.at, r.rate) for r in rates if r.subject == subject], step)

    def moved(self, old: Sequence[RatePoint], new: Sequence[RatePoint], subject: str) -> Series | None:
        """This series (of history ``old``) for history ``new``, or None when ``new`` is not ``old``
        trimmed at the front and extended at the end (the only ways a rate history changes).

        Reading only the points that came and went keeps a week of 5-minute rates from being
        read again at every step.
        """
        if not old or not new:
            return None
        # where the old newest point is now (looking back a few steps' worth of points)
        after = count_after(new, old[-1], within=64)
        if after is None:
            return None
        q = len(new) - 1 - after
        dropped = len(old) - 1 - q  # points trimmed from the front
        if dropped < 0 or new[0] is not old[dropped]:
            return None
        gone = sum(1 for r in old[:dropped] if r.subject == subject)
        added = [r for r in new[q + 1 :] if r.subject == subject]
        series = Series((), timedelta(seconds=self.step))
        series.times = self.times[gone:] + [r.at.timestamp() for r in added]
        series.rates = self.rates[gone:] + [r.rate for r in added]
        return series

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


Term = tuple[float, float] | None  # (seasonal error, persistence error) at one forecast time; None: unknown


def skill_term(series: Series, t: float, period: float, level_window: float, horizon: float) -> Term:
    """Both predictions' absolute errors of the peak within ``horizon`` made at ``t``, or None
    when a rate they need is not remembered."""
    actual = series.peak(t, t + horizon)
    current = series.at(t)
    past = series.peak(t - period, t - period + horizon)
    level_now = series.mean(t - level_window, t)
    level_then = series.mean(t - period - level_window, t - period)
    if actual is None or current is None or past is None or level_now is None or not level_then:
        return None
    return abs(max(current, past * level_now / level_then) - actual), abs(current - actual)


def seasonal_error(
    series: Series,
    period: float,
    end: float,
    window: float,
    level_window: float,
    horizon: float,
    terms: dict[float, Term] | None = None,
) -> tuple[float, float] | None:
    """Mean absolute error of two predictions of the highest rate within ``horizon``, over the
    forecast times in ``[end - horizon - window, end - horizon)`` (their outcome is known):
    the level-adjusted seasonal one and persistence (the rate at the forecast time).

    ``terms`` remembers each forecast time's errors between calls: the window moves one step
    at a time, so all but one are known. A term is kept only while every rate it reads is
    final: it ends before the newest remembered step (rates are only appended after it) and
    starts at or after the oldest (rates are only dropped before it).
    """
    seasonal = persistence = 0.0
    n = 0
    step = series.step
    t = end - horizon - window
    stop = end - horizon
    first = series.times[0] if series.times else math.inf
    newest = series.times[-1] if series.times else -math.inf
    while t < stop:
        final = terms is not None and t - period - level_window >= first and t + horizon <= newest
        if final and t in terms:  # type: ignore[operator]
            term = terms[t]  # type: ignore[index]
        else:
            term = skill_term(series, t, period, level_window, horizon)
            if final:
                terms[t] = term  # type: ignore[index]
        if term is not None:
            seasonal += term[0]
            persistence += term[1]
            n += 1
        t += step
    if terms is not None and len(terms) > 4 * window / step:
        for old in [k for k in terms if k < end - horizon - window]:
            del terms[old]
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
    series: Series | None = None,
    terms: dict[tuple[float, ...], dict[float, Term]] | None = None,
) -> tuple[float | None, str, float | None]:
    """(expected peak within ``horizon`` or None, method, skill) from the seasonal predictor.

    A caller that keeps the rates as a :class:`Series` passes it instead of ``points``, and
    ``terms`` to remember the skill's terms between calls (see :func:`seasonal_error`).
    """
    if series is None:
        series = Series(points, step)
    if not series.times or horizon.total_seconds() <= 0:
        return None, "persistence", None
    end = now.timestamp()
    lw = level_window.total_seconds()
    for period, name in ((WEEK, "seasonal-7d"), (DAY, "seasonal-1d")):
        p = period.total_seconds()
        if series.times[0] > end - p - lw:
            continue  # not a full period of history yet
        known = None if terms is None else terms.setdefault((series.step, p, lw, horizon.total_seconds()), {})
        errors = seasonal_error(series, p, end, skill_window.total_seconds(), lw, horizon.total_seconds(), known)
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


class Memo:
    """What :func:`forecast_rate` remembers between calls for one caller (e.g. a policy instance):
    each subject's series (moved along as the history changes), the skill terms, and the
    forecast of the current step. It assumes one evolving history, as a reconciler keeps."""

    def __init__(self) -> None:
        self.forecasts: dict[tuple[str, int, float], tuple[object, tuple[float | None, str, float | None]]] = {}
        self.series: dict[str, tuple[tuple[RatePoint, ...], Series]] = {}
        self.terms: dict[str, dict[tuple[float, ...], dict[float, Term]]] = {}

    def series_of(self, history: ScalingHistory, subject: str, step: timedelta) -> Series:
        rates = history.rates
        kept = self.series.get(subject)
        if kept is not None and kept[0] is rates:
            return kept[1]
        series = None
        if kept is not None and kept[1].step == step.total_seconds():
            series = kept[1].moved(kept[0], rates, subject)
        if series is None:
            series = Series.of(rates, subject, step)
        self.series[subject] = (rates, series)
        return series


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
    """The highest rate ``subject`` is expected to receive within ``horizon`` of ``now``: the
    :func:`seasonal_forecast`, never below the ``current`` rate."""
    peak, method, skill = seasonal_forecast(history, subject, now, step=step, horizon=horizon, memo=memo, **options)
    if peak is None:
        return Forecast(current, current, method, skill)
    return Forecast(current, max(current, peak), method, skill)


def seasonal_forecast(
    history: ScalingHistory,
    subject: str,
    now: datetime,
    *,
    step: timedelta,
    horizon: timedelta,
    memo: Memo | None = None,
    **options: float | timedelta,
) -> tuple[float | None, str, float | None]:
    """(expected peak within ``horizon`` or None, method, skill) of :func:`seasonal_peak` at the
    start of ``now``'s step.

    The seasonal part changes only when a step of history is added, so a caller that passes a
    ``memo`` (its own, e.g. one per policy instance) gets it computed once per step (at the
    step's start) and remembered while the history's rates are the same object; a new step
    reuses the series and skill terms of the previous one.
    """
    seconds = step.total_seconds()
    bucket = math.floor(now.timestamp() / seconds)
    if memo is None:
        at = datetime.fromtimestamp(bucket * seconds, tz=now.tzinfo)
        return seasonal_peak(history.rate_series(subject), at, step=step, horizon=horizon, **options)  # type: ignore[arg-type]
    key = (subject, bucket, horizon.total_seconds())
    hit = memo.forecasts.get(key)
    if hit is not None and hit[0] is history.rates:
        return hit[1]
    at = datetime.fromtimestamp(bucket * seconds, tz=now.tzinfo)
    series = memo.series_of(history, subject, step)
    terms = memo.terms.setdefault(subject, {})
    found = seasonal_peak((), at, step=step, horizon=horizon, series=series, terms=terms, **options)  # type: ignore[arg-type]
    if len(memo.forecasts) > 64:
        memo.forecasts.clear()
    memo.forecasts[key] = (history.rates, found)
    return found
