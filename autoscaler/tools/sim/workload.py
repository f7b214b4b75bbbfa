"""Input rate of the simulated application: a trace replayed in real time as a step function.

A NAB trace counts events per step (5 or 30 minutes); the simulator holds each value for its
step, scaled so that the peak of the replayed window needs ``peak_executors`` executors at
full utilization. Row ``n`` (0-based) is generated at ``time_of(n)``, which gives exact lag.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import pairwise

import numpy as np

from autoscaler.tools.traces import Trace, scale_to_peak


@dataclass(frozen=True)
class Workload:
    """Rows/s as a step function of seconds since the start: ``rates[i]`` on ``[starts[i], starts[i+1])``."""

    name: str
    start: datetime  # wall-clock time of second 0 (the trace's first timestamp, UTC)
    starts: tuple[float, ...]
    rates: tuple[float, ...]
    duration: float  # seconds simulated; the rate is 0 afterwards
    cumulative: tuple[float, ...]  # rows generated before starts[i]

    @classmethod
    def from_steps(cls, name: str, start: datetime, starts: list[float], rates: list[float], duration: float) -> Workload:
        if not starts or starts[0] != 0 or len(starts) != len(rates):
            raise ValueError("a workload needs matching starts and rates beginning at 0")
        if any(b <= a for a, b in pairwise(starts)):
            raise ValueError("workload step starts must increase")
        if any(r < 0 or not math.isfinite(r) for r in rates):
            raise ValueError("workload rates must be finite and >= 0")
        if duration <= 0:
            raise ValueError("workload duration must be > 0")
        keep = [i for i, s in enumerate(starts) if s < duration]
        starts = [starts[i] for i in keep] + [duration]
        rates = [rates[i] for i in keep] + [0.0]
        cum = [0.0]
        for i in range(1, len(starts)):
            cum.append(cum[-1] + rates[i - 1] * (starts[i] - starts[i - 1]))
        return cls(name, start, tuple(starts), tuple(rates), duration, tuple(cum))

    @classmethod
    def constant(cls, rate: float, duration: float, name: str = "constant") -> Workload:
        return cls.from_steps(name, datetime(2026, 1, 1, tzinfo=timezone.utc), [0.0], [rate], duration)

    # --- scalar access (the hot path of the simulator) -----------------------------------------

    def rate_at(self, t: float) -> float:
        if t < 0:
            return 0.0
        return self.rates[bisect.bisect_right(self.starts, t) - 1]

    def rows_before(self, t: float) -> float:
        """Rows generated in ``[0, t)`` (fractional)."""
        if t <= 0:
            return 0.0
        i = bisect.bisect_right(self.starts, t) - 1
        return self.cumulative[i] + self.rates[i] * (t - self.starts[i])

    def time_of(self, rows: float) -> float:
        """Second at which more than ``rows`` rows have been generated; ``inf`` if never.

        With ``rows`` processed, this is when the oldest unprocessed row arrived.
        """
        i = bisect.bisect_right(self.cumulative, rows) - 1
        if i < 0:
            return 0.0
        if i + 1 >= len(self.cumulative):
            return math.inf  # step i is the zero tail after the duration
        # cumulative[i] <= rows < cumulative[i + 1], so step i generates rows (rate > 0)
        return self.starts[i] + (rows - self.cumulative[i]) / self.rates[i]

    # --- vector access (metrics) -------------------------------------------------------------

    def rows_before_each(self, times: np.ndarray) -> np.ndarray:
        """:meth:`rows_before` at each of ``times``."""
        starts, cumulative, rates = (np.asarray(a) for a in (self.starts, self.cumulative, self.rates))
        at = np.clip(times, 0.0, None)
        i = np.searchsorted(starts, at, side="right") - 1
        return cumulative[i] + rates[i] * (at - starts[i])

    def step_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, rates) of the steps within the simulated duration."""
        starts = np.asarray(self.starts)
        rates = np.asarray(self.rates)
        return np.diff(starts), rates[:-1]


def workload_from_trace(trace: Trace, *, peak_rate: float, days: float | None = None, quantile: float = 1.0) -> Workload:
    """Replay ``trace`` in real time for ``days`` (default: all of it), scaled so that the
    ``quantile`` of its values in that window (1: the peak) arrives at ``peak_rate``.

    Scaled at the peak, a trace whose peak is 100x its mean spends most of its time at one or two
    executors; scaled at the 99th percentile, the spikes above it exceed the ceiling, and the
    tables compare policies over sizes that vary.
    """
    if peak_rate <= 0:
        raise ValueError("peak rate must be > 0")
    if not 0 < quantile <= 1:
        raise ValueError(f"the scale quantile must be within (0, 1], got {quantile:g}")
    t0 = trace.timestamps[0]
    offsets = [(ts - t0).total_seconds() for ts in trace.timestamps]
    span = trace.span_seconds
    duration = span if days is None else min(span, days * 86400.0)
    if duration <= 0:
        raise ValueError("nothing to simulate: the trace window is empty")
    window = [v for s, v in zip(offsets, trace.values, strict=True) if s < duration]
    peak = max(window) if quantile >= 1 else float(np.quantile(window, quantile))
    if peak <= 0:
        what = "only zero values" if quantile >= 1 else f"a {quantile:g} quantile of zero"
        raise ValueError(f"trace {trace.name!r} has {what} in the first {duration / 86400:g} day(s)")
    rates = [scale_to_peak(v, peak, peak_rate) for v in trace.values]
    start = t0 if t0.tzinfo is not None else t0.replace(tzinfo=timezone.utc)
    return Workload.from_steps(trace.name, start, offsets, rates, duration)
