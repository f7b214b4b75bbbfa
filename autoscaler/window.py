"""Metric windows: turn a query's recent batches into one :class:`QueryLoad`.

All functions are pure; the shell keeps a bounded deque of :class:`BatchSample` per query
(:class:`SampleWindow`) and the core evaluates the part that falls inside the window.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Sequence

from autoscaler.model import BatchSample, QueryLoad, QueryView


MIN_SAMPLES = 2
RECENT_BATCHES = 3


class SampleWindow:
    """Thread-safe bounded buffer of batch samples (listener thread writes, reconciler reads)."""

    def __init__(self, max_samples: int = 240) -> None:
        self._samples: deque[BatchSample] = deque(maxlen=max_samples)
        self._lock = threading.Lock()

    def add(self, sample: BatchSample) -> None:
        with self._lock:
            self._samples.append(sample)

    def snapshot(self) -> tuple[BatchSample, ...]:
        with self._lock:
            return tuple(self._samples)


@dataclass(frozen=True)
class CapacityFit:
    per_slot: float  # rows/s one slot sustains on large batches
    overhead: timedelta  # fixed cost of a batch, independent of its rows


def fit_capacity(samples: Sequence[BatchSample]) -> CapacityFit | None:
    """Estimate per-slot throughput from batches: ``duration = overhead + rows_per_slot / rate``.

    A least-squares line through (rows per slot, seconds) separates the fixed per-batch cost
    from the per-row cost when batch sizes vary enough (largest >= 1.5x smallest); otherwise
    the plain ratio sum(rows) / sum(seconds x slots) is used, which counts the overhead as work
    and so errs towards more capacity being needed.
    """
    points = [
        (s.input_rows / s.slots, s.duration.total_seconds())
        for s in samples
        if s.slots and not s.cold and s.input_rows > 0 and s.duration.total_seconds() > 0
    ]
    if not points:
        return None
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    if len(points) >= 3 and min(xs) > 0 and max(xs) >= 1.5 * min(xs):
        n = len(points)
        mx, my = sum(xs) / n, sum(ys) / n
        sxx = sum((x - mx) ** 2 for x in xs)
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
        slope = sxy / sxx if sxx > 0 else 0.0
        intercept = my - slope * mx
        if slope > 0 and intercept >= 0:
            return CapacityFit(per_slot=1.0 / slope, overhead=timedelta(seconds=intercept))
    warm = [s for s in samples if s.slots and not s.cold and s.input_rows > 0]
    total_slot_seconds = sum(s.duration.total_seconds() * (s.slots or 0) for s in warm)
    total_rows = sum(s.input_rows for s in warm)
    if total_slot_seconds <= 0:
        return None
    return CapacityFit(per_slot=total_rows / total_slot_seconds, overhead=timedelta(0))


def arrival_rate(samples: Sequence[BatchSample]) -> float | None:
    """Rows/s arriving: rows processed between the first and last batch start plus backlog growth."""
    if not samples:
        return None
    if len(samples) == 1:
        return samples[0].input_rate
    first, last = samples[0], samples[-1]
    span = (last.started_at - first.started_at).total_seconds()
    if span <= 0:
        return last.input_rate
    rows = sum(s.input_rows for s in samples[1:])
    if first.backlog_rows is not None and last.backlog_rows is not None:
        rows += last.backlog_rows - first.backlog_rows
    return max(0.0, rows / span)


def evaluate_query(view: QueryView, now: datetime, window: timedelta) -> QueryLoad:
    """Evaluate the batches that ended within ``window`` before ``now``.

    Rates and lag come from the window; capacity from all buffered batches. Cold batches
    (the first of each run) count for the arrival rate but not for capacity.
    """
    ordered = sorted((s for s in view.samples if s.ended_at <= now), key=lambda s: s.started_at)
    samples = [s for s in ordered if s.ended_at >= now - window]
    if len(samples) < MIN_SAMPLES:
        # batches slower than the window: the latest ones are stale but the best evidence there is
        samples = ordered[-MIN_SAMPLES:]
    if not samples:
        return QueryLoad(name=view.name, samples=0, parallelism=view.params.parallelism)
    # Fast attack, slow decay: the larger of the window mean and the rate over the latest
    # batches, so a step up is seen within a few batches; a step down waits for the window
    # (and then for the scale-down delay).
    window_rate = arrival_rate(samples)
    recent_rate = arrival_rate(samples[-RECENT_BATCHES:])
    rate = max((r for r in (window_rate, recent_rate) if r is not None), default=None)
    # Capacity is a property of the job, not of the current load: fit it on every buffered
    # batch, whose sizes vary more than those of one window (needed to separate the overhead).
    fit = fit_capacity(view.samples)
    last = samples[-1]
    span = (last.ended_at - samples[0].started_at).total_seconds()
    busy = sum(s.duration.total_seconds() for s in samples)
    backlog = float(last.backlog_rows) if last.backlog_rows is not None else None
    lag = None
    if backlog is not None:
        lag = timedelta(0) if backlog <= 0 else (timedelta(seconds=backlog / rate) if rate else None)
    processing = [s.processing_rate for s in samples if s.processing_rate is not None]
    return QueryLoad(
        name=view.name,
        samples=len(samples),
        input_rate=rate,
        processing_rate=sum(processing) / len(processing) if processing else None,
        capacity_per_slot=fit.per_slot if fit else None,
        batch_overhead=fit.overhead if fit else None,
        busy_fraction=min(1.0, busy / span) if span > 0 else None,
        backlog_rows=backlog,
        lag=lag,
        batch_duration=last.duration,
        parallelism=view.params.parallelism,
    )
