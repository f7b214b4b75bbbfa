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

import numpy as np


def merge_equal_steps(lengths: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Join consecutive steps with the same need (a schedule never changes inside such a run)."""
    if len(need) == 0:
        return lengths, need
    starts = np.flatnonzero(np.concatenate(([True], need[1:] != need[:-1])))
    return np.add.reduceat(lengths, starts), need[starts]


def cheapest_schedule(lengths: np.ndarray, need: np.ndarray, price: float) -> tuple[float, int]:
    """(executor-seconds + ``price`` x changes, changes) of the schedule that minimises the former
    and always has at least ``need`` executors (``need`` per step of ``lengths`` seconds)."""
    levels = np.arange(int(need.max()) + 1, dtype=float)
    f = np.where(levels >= need[0], levels * lengths[0], np.inf)
    changes = np.zeros(len(levels))
    for length, n in zip(lengths[1:], need[1:], strict=True):
        best = int(np.argmin(f))
        switch = f[best] + price
        moved = switch < f
        f = np.where(moved, switch, f) + levels * length
        changes = np.where(moved, changes[best] + 1, changes)
        f[levels < n] = np.inf
    best = int(np.argmin(f))
    return float(f[best]), int(changes[best])


def limited_schedule_cost(lengths: np.ndarray, need: np.ndarray, max_changes: int) -> tuple[float, float]:
    """Executor-seconds of the cheapest clairvoyant schedule with at most ``max_changes`` changes
    of the executor count that always has ``need`` executors: (lower bound, achieved).

    For every ``lambda`` no schedule with at most ``max_changes`` changes costs less than
    ``min(cost + lambda x changes) - lambda x max_changes`` (the lower bound, maximised over the
    ``lambda`` of a bisection); the schedule found at the smallest ``lambda`` that keeps within
    the budget is one a clairvoyant policy could run (achieved).
    """
    lengths, need = merge_equal_steps(np.asarray(lengths, float), np.asarray(need, float))
    if len(need) == 0:
        return 0.0, 0.0
    total, changes = cheapest_schedule(lengths, need, 0.0)
    if changes <= max_changes:
        return total, total
    lo, hi = 0.0, float(need.max() * lengths.sum())
    lower, achieved = total, math.inf
    for _ in range(40):
        lam = (lo + hi) / 2
        value, changes = cheapest_schedule(lengths, need, lam)
        lower = max(lower, value - lam * max_changes)
        if changes <= max_changes:
            hi, achieved = lam, min(achieved, value - lam * changes)
        else:
            lo = lam
        if achieved < math.inf and achieved - lower <= 1e-3 * achieved:
            break
    if achieved == math.inf:
        value, changes = cheapest_schedule(lengths, need, hi)
        achieved = value - hi * changes
    return lower, achieved


def budget_price(lengths: np.ndarray, need: np.ndarray, max_changes: float, precision: float = 0.05) -> float:
    """Executor-seconds a change of the executor count is worth when the schedule for ``need`` may
    change at most ``max_changes`` times: the smallest ``lambda`` (within ``precision``, relative)
    at which the cheapest schedule keeps within the budget; 0 when following every change of the
    need already does."""
    lengths, need = merge_equal_steps(np.asarray(lengths, float), np.asarray(need, float))
    if len(need) < 2 or cheapest_schedule(lengths, need, 0.0)[1] <= max_changes:
        return 0.0
    lo, hi = 0.0, float(need.max() * lengths.sum())
    while hi - lo > precision * hi:
        lam = (lo + hi) / 2
        if cheapest_schedule(lengths, need, lam)[1] <= max_changes:
            hi = lam
        else:
            lo = lam
    return hi
