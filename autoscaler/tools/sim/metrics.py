"""Benchmark KPIs from the simulator's truth: exact lag, executor-seconds and the oracle.

Lag is the age of the oldest row not yet processed: after batch ``k`` commits at ``e_k`` the
oldest waiting row arrived at ``g_k``, so until the next commit ``L(t) = max(0, t - g_k)``, a
sawtooth. Time above a threshold, its maximum and time-weighted percentiles are computed
exactly per segment, not sampled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from autoscaler.core.budget import LimitedSchedule, limited_schedule
from autoscaler.tools.sim.workload import Workload


def _segments(completions: Sequence[tuple[float, float]], end: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arr = np.asarray(completions, dtype=float)
    starts = arr[:, 0]
    anchors = arr[:, 1]
    ends = np.append(starts[1:], end)
    keep = ends > starts
    return starts[keep], ends[keep], anchors[keep]


def time_above(completions: Sequence[tuple[float, float]], end: float, threshold: float) -> float:
    """Seconds in ``[0, end)`` with lag above ``threshold``."""
    s, e, g = _segments(completions, end)
    return float(np.maximum(0.0, e - np.maximum(s, g + threshold)).sum())


def max_lag(completions: Sequence[tuple[float, float]], end: float) -> float:
    s, e, g = _segments(completions, end)
    return float(max(0.0, np.max(e - g))) if len(s) else 0.0


def lag_percentile(completions: Sequence[tuple[float, float]], end: float, q: float) -> float:
    """Time-weighted ``q``-quantile (0..1) of the lag over ``[0, end)``."""
    s, e, g = _segments(completions, end)
    total = float((e - s).sum())
    if total <= 0:
        return 0.0
    budget = (1.0 - q) * total  # time allowed above the answer
    lo, hi = 0.0, float(max(0.0, np.max(e - g)))
    for _ in range(60):
        mid = (lo + hi) / 2
        above = float(np.maximum(0.0, e - np.maximum(s, g + mid)).sum())
        if above > budget:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-3:
            break
    return hi


CEILING_GRID = 1.0  # seconds between the points at which the ceiling's lag is evaluated


def ceiling_slo_violation_fraction(workload: Workload, service_rate: float, slo_lag: float, grid: float = CEILING_GRID) -> float:
    """Share of the time in which even the whole ceiling, at once, lags beyond ``slo_lag``: a
    queue served at ``service_rate`` rows/s (every core of the ceiling busy from the first row,
    no start-up, no batch or task overhead) still holds a row that arrived more than ``slo_lag``
    seconds ago. No policy within the ceiling violates the SLO for less time: its batches wait
    for a trigger and pay their overheads on top (a floor, not what the oracle's schedule gets).

    A queue that works whenever rows wait has processed D(t) = min over s <= t of
    A(s) + C (t - s) rows by t (A: rows arrived, C: ``service_rate``; Lindley's recursion in
    closed form), and a row that arrived before t - S still waits iff D(t) < A(t - S).
    Evaluated every ``grid`` seconds.
    """
    if workload.duration <= 0:
        return 0.0
    t = np.arange(0.0, workload.duration, grid)
    arrived = workload.rows_before_each(t)
    done = np.minimum.accumulate(arrived - service_rate * t) + service_rate * t
    # a row counts as waiting only when it is more than a fraction of one (the rows are whole)
    return float((done < workload.rows_before_each(t - slo_lag) - 1.0).mean())


def oracle_executors(rates: np.ndarray, capacity: float, min_executors: int, max_executors: int | None = None) -> np.ndarray:
    """Executors needed at each rate with perfect foresight and no start-up or restart cost, within
    the bounds: no schedule has more than ``max_executors`` (a spike beyond the ceiling then
    violates the SLO for every policy and costs the oracle no more than them)."""
    need = np.maximum(float(min_executors), np.ceil(rates / capacity - 1e-9))
    return need if max_executors is None else np.minimum(float(max(max_executors, min_executors)), need)


def oracle_executor_seconds(workload: Workload, capacity: float, min_executors: int, max_executors: int | None = None) -> float:
    lengths, rates = workload.step_arrays()
    return float((oracle_executors(rates, capacity, min_executors, max_executors) * lengths).sum())


BUDGET_RESCALES_PER_DAY = 24.0  # the benchmark's target: fewer than 24 rescales a day


def budget_oracle_schedule(
    workload: Workload, capacity: float, min_executors: int, per_day: float, max_executors: int | None = None
) -> LimitedSchedule:
    """The cheapest schedule that always has the executors the oracle needs and changes their
    count at most ``per_day`` times a day (on average): its ``lower`` bound is the budget bound
    of the benchmark; its ``allocation()`` what a clairvoyant policy within the budget runs."""
    lengths, rates = workload.step_arrays()
    return limited_schedule(lengths, oracle_executors(rates, capacity, min_executors, max_executors), changes_allowed(lengths, per_day))


def changes_allowed(lengths: np.ndarray, per_day: float) -> int:
    """The changes ``per_day`` a day allows over steps of ``lengths`` seconds (whole ones)."""
    return math.floor(per_day * float(lengths.sum()) / 86400.0)


def ski_rental_schedule(lengths: np.ndarray, need: np.ndarray, price: float) -> tuple[float, int]:
    """(executor-seconds, changes) of an idealised online policy at ``price`` executor-seconds a
    change: it sees each step's need as the step begins (nothing ahead), has the executors at
    once, and releases by ski rental in continuous time: at the moment the capacity above some
    count ``s`` has idled ``price`` (``(held - s) x seconds since the need last exceeded s``), it
    drops to the smallest such ``s``.

    It is the rule the default policy's release follows, without start-up time, measurement
    noise, a forecast or a utilization target: what knowing only the past costs by itself."""
    held = int(need[0]) if len(need) else 0
    last_above = np.zeros(int(need.max()) + 1 if len(need) else 1)  # when the need last exceeded each count
    cost, changes, t = 0.0, 0, 0.0
    for length, n in zip(lengths.tolist(), need.astype(int).tolist(), strict=True):
        if n > held:
            held, changes = n, changes + 1
        now, end = t, t + length
        while held > n:
            counts = np.arange(n, held)
            # when releasing down to each count will have paid the price
            paid = np.maximum(last_above[n:held] + price / (held - counts), now)
            first = float(paid.min())
            if first >= end:
                break
            cost += held * (first - now)
            now, held, changes = first, int(counts[np.argmax(paid <= first)]), changes + 1
        cost += held * (end - now)
        last_above[:n] = end
        t = end
    return cost, changes


@dataclass(frozen=True)
class OnlineReference:
    """The idealised online policy of :func:`ski_rental_schedule` at the smallest price that keeps
    it within a budget of changes (``price`` 0: following the need keeps within it)."""

    executor_seconds: float
    changes: int
    price: float


def online_reference(lengths: np.ndarray, need: np.ndarray, max_changes: int, precision: float = 0.01) -> OnlineReference:
    """:func:`ski_rental_schedule` at the smallest price (within ``precision``, relative; found by
    a geometric bisection, as a higher price holds longer and changes less) at which it changes
    at most ``max_changes`` times; or, when no price does (the rises alone exceed the budget), at
    the price that never releases.

    Set beside the budget bound (the same budget with perfect foresight), it splits a policy's
    distance from the bound into what this online ski rental does not avoid and what the policy
    adds: on a trace whose reference costs more than 1.2x the bound, a ski rental at one price
    misses the cost target even with instant executors and the price chosen in hindsight."""
    lengths, need = np.asarray(lengths, float), np.asarray(need, float)
    cost, changes = ski_rental_schedule(lengths, need, 0.0)
    if changes <= max_changes:
        return OnlineReference(cost, changes, 0.0)
    # from an executor-second (smaller prices are not told apart) to a change worth holding the
    # peak throughout (it never releases)
    lo, hi = 1.0, float(need.max() * lengths.sum())
    found = ski_rental_schedule(lengths, need, hi)
    if found[1] > max_changes:
        return OnlineReference(found[0], found[1], hi)
    while hi > lo * (1 + precision):
        mid = math.sqrt(lo * hi)
        at_mid = ski_rental_schedule(lengths, need, mid)
        if at_mid[1] <= max_changes:
            hi, found = mid, at_mid
        else:
            lo = mid
    return OnlineReference(found[0], found[1], hi)


def online_reference_for(
    workload: Workload, capacity: float, min_executors: int, per_day: float, max_executors: int | None = None
) -> OnlineReference:
    """:func:`online_reference` for the oracle's need of a workload, within ``per_day`` changes a day."""
    lengths, rates = workload.step_arrays()
    return online_reference(lengths, oracle_executors(rates, capacity, min_executors, max_executors), changes_allowed(lengths, per_day))


def executors_for_rate(rate: float, capacity: float, min_executors: int = 1) -> int:
    return max(min_executors, math.ceil(rate / capacity - 1e-9))


def limited_oracle_executor_seconds(lengths: np.ndarray, need: np.ndarray, max_changes: int) -> tuple[float, float]:
    """Executor-seconds of the cheapest clairvoyant schedule with at most ``max_changes``
    changes of the executor count that always has ``need`` executors: (lower bound, achieved).

    The oracle changes the count whenever the need changes; a policy held to a rescale budget
    cannot, and on a spiky trace even perfect foresight then pays for holding each spike's
    size. The dynamic programme is :mod:`autoscaler.core.budget` (the default policy prices its
    rescales with the same one). On the benchmark traces the lower bound and the achieved
    schedule are within 2 % (first weeks: ELB 0 %, Twitter 0.8 %, NYC taxi 1.5 %); on a handful
    of steps the gap of this Lagrangian bound can be tens of percent.
    """
    schedule = limited_schedule(lengths, need, max_changes)
    return schedule.lower, schedule.achieved


OVERSHOOT_WINDOW = 600.0  # seconds: the oracle's largest need is taken over the surrounding 10 minutes


def overshoot_fraction(
    allocation: Sequence[tuple[float, int]],
    end: float,
    workload: Workload,
    capacity: float,
    min_executors: int,
    max_executors: int | None = None,
    window: float = OVERSHOOT_WINDOW,
) -> float:
    """Share of the executor-seconds above twice the oracle's largest need within the surrounding
    ``window`` (centred: ``t - window / 2`` to ``t + window / 2``).

    ``allocation`` is the executor count as a step function, ``(t, executors from t on)`` in time
    order from 0 on; the oracle's need is :func:`oracle_executors` step by step. A policy that
    answers a short burst with its ceiling, or keeps the executors of a burst through hours of
    idle input, spends those executor-seconds above the band; holding the size of a burst for a
    few minutes (the ski rental, a scale-down delay) stays within it.
    """
    if end <= 0 or not allocation:
        return 0.0
    lengths, rates = workload.step_arrays()
    starts = np.asarray(workload.starts[:-1], dtype=float)
    need = oracle_executors(rates, capacity, min_executors, max_executors)
    times = np.asarray([t for t, _ in allocation], dtype=float)
    counts = np.asarray([n for _, n in allocation], dtype=float)
    half = window / 2.0
    # every point where the allocation or the windowed need can change, within [0, end]
    grid = np.unique(np.clip(np.concatenate(([0.0, end], times, starts - half, starts + half)), 0.0, end))
    lo, hi = grid[:-1], grid[1:]
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    mid = (lo + hi) / 2.0
    held = counts[np.maximum(0, np.searchsorted(times, mid, side="right") - 1)]
    # the steps overlapping [mid - half, mid + half]: from the one holding its start to the last
    # starting before its end
    first = np.maximum(0, np.searchsorted(starts, mid - half, side="right") - 1)
    last = np.maximum(first, np.searchsorted(starts, mid + half, side="left") - 1)
    largest = _range_max(need, first, np.minimum(last, len(need) - 1))
    span = hi - lo
    total = float((held * span).sum())
    if total <= 0:
        return 0.0
    excess = np.maximum(0.0, held - 2.0 * largest)
    return float((excess * span).sum()) / total


def _range_max(values: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """``max(values[first[i] : last[i] + 1])`` for every ``i`` (a sparse table: doubling ranges)."""
    table = [np.asarray(values, dtype=float)]
    width = 1
    while 2 * width <= len(values):
        prev = table[-1]
        table.append(np.maximum(prev[:-width], prev[width:]))
        width *= 2
    size = last - first + 1
    level = np.floor(np.log2(np.maximum(1, size))).astype(int)
    out = np.empty(len(first))
    for k in np.unique(level):
        sel = level == k
        row = table[k]
        out[sel] = np.maximum(row[first[sel]], row[last[sel] - (1 << k) + 1])
    return out
