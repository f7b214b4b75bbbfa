"""How long a micro-batch takes: a cost model fitted from observed batches.

A batch of ``R`` rows read through ``P`` partitions on ``C`` cores runs ``P`` tasks in
``waves = ceil(P / C)`` waves. Each task pays a scheduling/serialization cost ``w`` and
processes ``R / P`` rows at ``mu`` rows/s; the batch also pays a fixed cost ``o`` for
planning, the offset log and the commit (Spark reports it: ``triggerExecution - addBatch``)::

    duration(P, C, R) = o + ceil(P / C) x (w + R / (P x mu))

Measured on the local cluster this explains both effects the policies must know: 8 tasks on
1 core take about 8 x 0.14 s even for few rows (the per-task cost ``w`` repeats per wave),
and 8 partitions on 5 or 6 cores run no faster than on 4 (the same two waves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from autoscaler.model import BatchSample

FIT_SAMPLES = 120  # latest warm batches used for a fit


@dataclass(frozen=True)
class BatchCostModel:
    per_slot: float  # mu: rows/s one task slot processes
    per_task: float = 0.0  # w: seconds of overhead per task (repeats per wave)
    fixed: float = 0.0  # o: seconds per batch for planning, offset log and commit
    points: int = 0  # warm batches the fit used

    def waves(self, partitions: int, cores: int) -> int:
        return math.ceil(partitions / max(1, cores))

    def duration(self, partitions: int, cores: int, rows: float) -> float:
        """Seconds a batch of ``rows`` takes on ``partitions`` tasks and ``cores`` slots."""
        if partitions <= 0 or cores <= 0 or self.per_slot <= 0:
            return math.inf
        return self.fixed + self.waves(partitions, cores) * (self.per_task + rows / (partitions * self.per_slot))

    def rows_in(self, partitions: int, cores: int, seconds: float) -> float:
        """Rows a batch that takes ``seconds`` must hold (inverse of :meth:`duration`)."""
        per_wave = (seconds - self.fixed) / self.waves(partitions, cores) - self.per_task
        return max(0.0, per_wave * partitions * self.per_slot)

    def throughput(self, partitions: int, cores: int) -> float:
        """Rows/s at large batches, where the fixed and per-task costs vanish."""
        return partitions * self.per_slot / self.waves(partitions, cores)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def fit_cost_model(samples: Sequence["BatchSample"]) -> BatchCostModel | None:
    """Fit ``mu``, ``w`` and ``o`` from warm batches; None without usable batches.

    ``o`` is the median of the fixed costs Spark reports. Per task, the time left after ``o``
    divided by the waves is ``w + rows_per_task / mu``: a Theil-Sen line (median of pairwise
    slopes) through (rows per task, seconds per task) gives ``w`` and ``mu`` and shrugs off
    outliers (a batch slowed by an executor starting, a GC pause). Without enough spread in
    batch sizes (largest >= 1.5x smallest) ``w`` is taken as 0 and ``mu`` as the median ratio,
    which counts overhead as work and so errs towards more capacity.
    """
    warm = [
        s
        for s in samples[-FIT_SAMPLES:]
        if not s.cold and s.input_rows > 0 and s.cores and s.parallelism and s.duration.total_seconds() > 0
    ]
    if not warm:
        return None
    fixed_values = [s.fixed_overhead.total_seconds() for s in warm if s.fixed_overhead is not None]
    fixed = _median(fixed_values) if fixed_values else 0.0
    points = []
    for s in warm:
        assert s.cores is not None and s.parallelism is not None
        waves = math.ceil(s.parallelism / s.cores)
        own_fixed = s.fixed_overhead.total_seconds() if s.fixed_overhead is not None else fixed
        per_task = (s.duration.total_seconds() - own_fixed) / waves
        if per_task > 0:
            points.append((s.input_rows / s.parallelism, per_task))
    if not points:
        return None
    xs = [x for x, _ in points]
    if len(points) >= 4 and min(xs) > 0 and max(xs) >= 1.5 * min(xs):
        slopes = [
            (yj - yi) / (xj - xi)
            for i, (xi, yi) in enumerate(points)
            for xj, yj in points[i + 1 :]
            if abs(xj - xi) > 0.05 * max(xi, xj)
        ]
        if slopes:
            slope = _median(slopes)
            if slope > 0:
                per_task = max(0.0, _median([y - slope * x for x, y in points]))
                return BatchCostModel(per_slot=1.0 / slope, per_task=per_task, fixed=fixed, points=len(points))
    return BatchCostModel(per_slot=_median([x / y for x, y in points]), per_task=0.0, fixed=fixed, points=len(points))
