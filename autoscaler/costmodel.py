"""How long a micro-batch takes: a cost model fitted from observed batches.

A batch of ``R`` rows read through ``P`` partitions on ``C`` cores runs ``P`` tasks in
``waves = ceil(P / C)`` waves of ``c = min(P, C)`` concurrent tasks. Each task pays a
scheduling/serialization cost and processes ``R / P`` rows at ``mu`` rows/s; the batch also
pays a fixed cost ``o`` for planning, the offset log and the commit (Spark reports it as
``triggerExecution - addBatch``)::

    duration(P, C, R) = o + ceil(P / C) x (w + k x c + R / (P x mu))

``w`` is the per-task cost; ``k`` is how much it grows per concurrent task when executors
share CPUs (measured on a 2-core machine: 0.07 s per task alone, 0.37 s with 4 executors;
on a real cluster ``k`` fits to about 0). Measured on the local cluster this explains what
the policies must know: 8 tasks on 1 core take 8 x the per-task cost even for few rows, and
8 partitions on 5 or 6 cores run no faster than on 4 (the same two waves).
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
    contention: float = 0.0  # k: extra seconds per task for each concurrent task
    points: int = 0  # warm batches the fit used

    def task_overhead(self, partitions: int, cores: int) -> float:
        return self.per_task + self.contention * min(partitions, max(1, cores))

    def waves(self, partitions: int, cores: int) -> int:
        return math.ceil(partitions / max(1, cores))

    def duration(self, partitions: int, cores: int, rows: float) -> float:
        """Seconds a batch of ``rows`` takes on ``partitions`` tasks and ``cores`` slots."""
        if partitions <= 0 or cores <= 0 or self.per_slot <= 0:
            return math.inf
        per_task = self.task_overhead(partitions, cores) + rows / (partitions * self.per_slot)
        return self.fixed + self.waves(partitions, cores) * per_task

    def rows_in(self, partitions: int, cores: int, seconds: float) -> float:
        """Rows a batch that takes ``seconds`` must hold (inverse of :meth:`duration`)."""
        per_wave = (seconds - self.fixed) / self.waves(partitions, cores) - self.task_overhead(partitions, cores)
        return max(0.0, per_wave * partitions * self.per_slot)

    def throughput(self, partitions: int, cores: int) -> float:
        """Rows/s at large batches, where the fixed and per-task costs vanish."""
        return partitions * self.per_slot / self.waves(partitions, cores)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _solve(rows: list[list[float]], ys: list[float]) -> list[float] | None:
    """Least squares by the normal equations (Gaussian elimination, 2 or 3 unknowns)."""
    n = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda k: abs(a[k][col]))
        if abs(a[pivot][col]) < 1e-12:
            return None
        a[col], a[pivot], b[col], b[pivot] = a[pivot], a[col], b[pivot], b[col]
        for k in range(n):
            if k != col:
                f = a[k][col] / a[col][col]
                a[k] = [x - f * y for x, y in zip(a[k], a[col])]
                b[k] -= f * b[col]
    return [b[i] / a[i][i] for i in range(n)]


def _robust_fit(points: list[tuple[float, float, float]], with_contention: bool) -> list[float] | None:
    """Fit tau = w + k c + r / mu, dropping outliers (residual > 2.5 scaled MADs) until stable."""

    def design(p: tuple[float, float, float]) -> list[float]:
        r, c, _ = p
        return [1.0, c, r] if with_contention else [1.0, r]

    kept = points
    coef: list[float] | None = None
    for _ in range(6):
        coef = _solve([design(p) for p in kept], [p[2] for p in kept])
        if coef is None:
            return None
        residuals = [p[2] - sum(x * y for x, y in zip(design(p), coef)) for p in points]
        mad = _median([abs(e) for e in residuals]) * 1.4826
        if mad <= 1e-12:
            break
        trimmed = [p for p, e in zip(points, residuals) if abs(e) <= 2.5 * mad]
        if len(trimmed) < len(coef) + 2 or trimmed == kept:
            break
        kept = trimmed
    return coef


def fit_cost_model(samples: Sequence["BatchSample"]) -> BatchCostModel | None:
    """Fit ``mu``, ``w``, ``k`` and ``o`` from warm batches (cold ones while there are no others).

    ``o`` is the median of the fixed costs Spark reports. Per task, the time left after ``o``
    divided by the waves is ``w + k c + rows_per_task / mu``: a least-squares fit with outliers
    dropped (a batch slowed by an executor starting, a GC pause). ``k`` is fitted only when the
    concurrency ``c`` varied, and ``mu`` only when batch sizes did (largest >= 1.5x
    smallest); otherwise ``w`` (and ``k``) are 0 and ``mu`` the median ratio, which counts
    overhead as work and so errs towards more capacity.
    """
    usable = [s for s in samples[-FIT_SAMPLES:] if s.input_rows > 0 and s.cores and s.parallelism and s.duration.total_seconds() > 0]
    # Cold batches are slow for reasons other than their rows; use them only while there is
    # nothing else (a query whose first batches are huge must still be sized): they err
    # towards more capacity, and the first warm batches replace them.
    warm = [s for s in usable if not s.cold] or usable
    if not warm:
        return None
    fixed_values = [s.fixed_overhead.total_seconds() for s in warm if s.fixed_overhead is not None]
    fixed = _median(fixed_values) if fixed_values else 0.0
    points: list[tuple[float, float, float]] = []
    for s in warm:
        assert s.cores is not None and s.parallelism is not None
        own_fixed = s.fixed_overhead.total_seconds() if s.fixed_overhead is not None else fixed
        per_task = (s.duration.total_seconds() - own_fixed) / math.ceil(s.parallelism / s.cores)
        if per_task > 0:
            points.append((s.input_rows / s.parallelism, float(min(s.parallelism, s.cores)), per_task))
    if not points:
        return None
    rs = [p[0] for p in points]
    cs = {p[1] for p in points}
    if len(points) >= 5 and min(rs) > 0 and max(rs) >= 1.5 * min(rs):
        for with_contention in ([True, False] if len(cs) > 1 else [False]):
            coef = _robust_fit(points, with_contention)
            if coef is None:
                continue
            w, k, inv_mu = (coef[0], coef[1], coef[2]) if with_contention else (coef[0], 0.0, coef[1])
            if inv_mu > 0 and k >= 0:
                return BatchCostModel(1.0 / inv_mu, max(0.0, w), fixed, k, len(points))
    return BatchCostModel(per_slot=_median([r / t for r, _, t in points]), fixed=fixed, points=len(points))
