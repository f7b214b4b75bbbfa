"""The rescale budget as a price: the cheapest schedule that changes the executor count at most so
often, by a Lagrangian dynamic programme (pure, numpy).

Given the executors needed step by step, minimising ``cost + lambda x changes`` is a dynamic
programme over (step, count): hold the count, or change from the cheapest count so far and pay
``lambda``. The ``lambda`` at which the cheapest schedule fits a budget of changes is the budget's
Lagrange multiplier: the executor-seconds a change is worth at that budget. The simulator's
benchmark uses the schedule's cost as a lower bound (``autoscaler.tools.sim.metrics``); the
default policy prices a rescale with the multiplier of its remembered load (``policies/predictive.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GRID = 20  # prices one pass of the budget price's search tries at once


def merge_equal_steps(lengths: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Join consecutive steps with the same need (a schedule never changes inside such a run)."""
    if len(need) == 0:
        return lengths, need
    starts = np.flatnonzero(np.concatenate(([True], need[1:] != need[:-1])))
    return np.add.reduceat(lengths, starts), need[starts]


def _programme(
    lengths: np.ndarray, need: np.ndarray, prices: np.ndarray, moves: list[tuple[np.ndarray, int]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The dynamic programme, for each of ``prices`` at once (a row per price): per count, the
    cheapest ``executor-seconds + price x changes`` of a schedule ending at that count, and its
    changes. With ``moves`` (one price), each step's counts reached by a change and the count
    they changed from (to read the schedule back). The rows share each step's array operations,
    so a search over many prices pays the per-step cost about once."""
    prices = np.asarray(prices, float).reshape(-1, 1)
    rows = np.arange(len(prices))
    levels = np.arange(int(need.max()) + 1, dtype=float)
    f = np.tile(np.where(levels >= need[0], levels * lengths[0], np.inf), (len(prices), 1))
    changes = np.zeros_like(f)
    for length, n in zip(lengths[1:], need[1:], strict=True):
        best = np.argmin(f, axis=1)
        switch = f[rows, best][:, None] + prices
        moved = switch < f
        if moves is not None:
            moves.append((moved[0], int(best[0])))
        f = np.where(moved, switch, f) + levels * length
        changes = np.where(moved, changes[rows, best][:, None] + 1, changes)
        f[:, levels < n] = np.inf
    return f, changes


def _cheapest(lengths: np.ndarray, need: np.ndarray, prices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``prices``: the cheapest schedule's ``executor-seconds + price x changes`` and its changes."""
    f, changes = _programme(lengths, need, prices)
    best = np.argmin(f, axis=1)
    rows = np.arange(len(f))
    return f[rows, best], changes[rows, best]


def cheapest_schedule(lengths: np.ndarray, need: np.ndarray, price: float) -> tuple[float, int]:
    """(executor-seconds + ``price`` x changes, changes) of the schedule that minimises the former
    and always has at least ``need`` executors (``need`` per step of ``lengths`` seconds)."""
    value, changes = _cheapest(lengths, need, np.array([price]))
    return float(value[0]), int(changes[0])


def cheapest_path(lengths: np.ndarray, need: np.ndarray, price: float) -> np.ndarray:
    """The executor count per step of the schedule :func:`cheapest_schedule` prices."""
    moves: list[tuple[np.ndarray, int]] = []
    f, _ = _programme(lengths, need, np.array([price]), moves)
    level = int(np.argmin(f[0]))
    path = [level]
    for moved, came_from in reversed(moves):
        if moved[level]:
            level = came_from
        path.append(level)
    return np.asarray(path[::-1], dtype=float)


@dataclass(frozen=True)
class LimitedSchedule:
    """The cheapest clairvoyant schedule within a budget of changes: the lower bound on its
    executor-seconds, what the schedule found costs, and that schedule (``counts`` executors for
    ``lengths`` seconds, step by step; steps of equal need joined)."""

    lower: float
    achieved: float
    lengths: np.ndarray
    counts: np.ndarray

    def allocation(self) -> list[tuple[float, int]]:
        """``(t, executors from t on)`` from 0, at each change of the count."""
        starts = np.concatenate(([0.0], np.cumsum(self.lengths)[:-1]))
        out: list[tuple[float, int]] = []
        for t, n in zip(starts, self.counts, strict=True):
            if not out or out[-1][1] != n:
                out.append((float(t), int(n)))
        return out


def limited_schedule(lengths: np.ndarray, need: np.ndarray, max_changes: int) -> LimitedSchedule:
    """The cheapest clairvoyant schedule with at most ``max_changes`` changes of the executor
    count that always has ``need`` executors, with a lower bound on its executor-seconds.

    For every ``lambda`` no schedule with at most ``max_changes`` changes costs less than
    ``min(cost + lambda x changes) - lambda x max_changes`` (the lower bound, maximised over the
    ``lambda`` of a bisection); the schedule found at the smallest ``lambda`` that keeps within
    the budget is one a clairvoyant policy could run (achieved).
    """
    lengths, need = merge_equal_steps(np.asarray(lengths, float), np.asarray(need, float))
    if len(need) == 0:
        return LimitedSchedule(0.0, 0.0, lengths, need)
    total, changes = cheapest_schedule(lengths, need, 0.0)
    if changes <= max_changes:
        return LimitedSchedule(total, total, lengths, cheapest_path(lengths, need, 0.0))
    lo, hi = 0.0, float(need.max() * lengths.sum())
    lower, achieved, chosen = total, math.inf, hi
    for _ in range(40):
        lam = (lo + hi) / 2
        value, changes = cheapest_schedule(lengths, need, lam)
        lower = max(lower, value - lam * max_changes)
        if changes <= max_changes:
            hi = lam
            if value - lam * changes < achieved:
                achieved, chosen = value - lam * changes, lam
        else:
            lo = lam
        if achieved < math.inf and achieved - lower <= 1e-3 * achieved:
            break
    if achieved == math.inf:
        value, changes = cheapest_schedule(lengths, need, hi)
        achieved, chosen = value - hi * changes, hi
    return LimitedSchedule(lower, achieved, lengths, cheapest_path(lengths, need, chosen))


def budget_price(lengths: np.ndarray, need: np.ndarray, max_changes: float, precision: float = 0.05) -> float:
    """Executor-seconds a change of the executor count is worth when the schedule for ``need`` may
    change at most ``max_changes`` times: the smallest ``lambda`` (within ``precision``, relative)
    at which the cheapest schedule keeps within the budget; 0 when following every change of the
    need already does; the floor, ``precision`` of an executor for the shortest step, when a change
    worth that already does (a smaller price holds nothing).

    The search is over a geometric grid: the price lies between that floor and holding the
    largest need throughout, often six orders of magnitude apart. Each pass runs the programme
    for ``GRID`` prices spaced evenly in log at once (:func:`_programme`) and keeps the gap in
    which the changes first fit the budget; two passes of 20 narrow a factor of a million to
    3.5 %, for about the CPU of three runs at one price (a bisection takes 10-20 runs)."""
    lengths, need = merge_equal_steps(np.asarray(lengths, float), np.asarray(need, float))
    if len(need) - 1 <= max_changes:
        return 0.0  # free changes follow the need: one change where it changes, between merged steps
    lo, hi = precision * float(lengths.min()), float(need.max() * lengths.sum())
    if lo >= hi:
        return lo
    # the floor is the first price tried: it may keep within the budget already. From then on
    # the schedule at ``lo`` changes too often and the one at ``hi`` keeps within the budget (at
    # ``hi`` it holds the largest need throughout); the changes fall as the price rises.
    prices = np.geomspace(lo, hi, GRID + 1)[:-1]
    while True:
        fits = _cheapest(lengths, need, prices)[1] <= max_changes
        first = int(np.argmax(fits)) if fits.any() else len(prices)
        if first == 0 and prices[0] == lo:
            return lo
        lo = float(prices[first - 1]) if first > 0 else lo
        hi = float(prices[first]) if first < len(prices) else hi
        if hi - lo <= precision * hi:
            return hi
        prices = np.geomspace(lo, hi, GRID + 2)[1:-1]
