"""Benchmark KPIs from the simulator's truth: exact lag, executor-seconds and the oracle.

Lag is the age of the oldest row not yet processed: after batch ``k`` commits at ``e_k`` the
oldest waiting row arrived at ``g_k``, so until the next commit ``L(t) = max(0, t - g_k)``, a
sawtooth. Time above a threshold, its maximum and time-weighted percentiles are computed
exactly per segment, not sampled.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from autoscaler.sim.workload import Workload


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


def lag_at(completions: Sequence[tuple[float, float]], times: np.ndarray) -> np.ndarray:
    """Lag at the given times (for plots)."""
    arr = np.asarray(completions, dtype=float)
    idx = np.searchsorted(arr[:, 0], times, side="right") - 1
    idx = np.clip(idx, 0, len(arr) - 1)
    return np.maximum(0.0, times - arr[idx, 1])


def oracle_executors(rates: np.ndarray, capacity: float, min_executors: int) -> np.ndarray:
    """Executors needed at each rate with perfect foresight and no start-up or restart cost."""
    need = np.ceil(rates / capacity - 1e-9)
    return np.maximum(float(min_executors), need)


def oracle_executor_seconds(workload: Workload, capacity: float, min_executors: int) -> float:
    lengths, rates = workload.step_arrays()
    return float((oracle_executors(rates, capacity, min_executors) * lengths).sum())


def executors_for_rate(rate: float, capacity: float, min_executors: int = 1) -> int:
    return max(min_executors, math.ceil(rate / capacity - 1e-9))
