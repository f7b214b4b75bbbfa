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
from dataclasses import replace
from typing import Sequence

import numpy as np

from autoscaler.core.model import BatchCostModel, BatchSample
from autoscaler.core.sequences import count_after

FIT_SAMPLES = 120  # latest warm batches used for a fit
RATIO_SAMPLES = 15  # latest warm batches for the throughput-only model
CONTENTION_GAIN = 0.7  # the contention term must cut the residual scale by 30 % to be used
# ... of a plain fit that leaves residuals worth explaining: over 1 % of the median per-task time
# (measurement noise alone leaves about 5 %). A plain fit that is exact leaves nothing: a residual
# scale of 1e-17 "cut by 30 %" is rounding, and the median of the residuals is then decided by
# the regime most batches ran in, which a degenerate contention fit matches as well
CONTENTION_RESIDUAL = 0.01


def _least_squares(design: np.ndarray, ys: np.ndarray) -> list[float] | None:
    """The coefficients minimizing ``|design @ coef - ys|``, None when the points cannot tell the
    unknowns apart (a rank-deficient design: every batch at one concurrency, say)."""
    coef, _, rank, _ = np.linalg.lstsq(design, ys, rcond=None)
    return [float(c) for c in coef] if rank == design.shape[1] else None


def _robust_fit(design: np.ndarray, ys: np.ndarray) -> tuple[list[float], float] | None:
    """Fit ``ys ~ design @ coef`` (tau = w [+ k c] + r / mu), dropping outliers until stable.

    Least squares on the kept points; then every point whose residual exceeds 2.5 scaled MADs
    (of all points) is dropped, up to six rounds. Returns the coefficients and the residual
    scale (scaled MAD over all points) of the final fit.
    """
    n, m = design.shape
    kept = np.ones(n, dtype=bool)
    coef: list[float] | None = None
    mad = 0.0
    for _ in range(6):
        coef = _least_squares(design[kept], ys[kept])
        if coef is None:
            return None
        residuals = np.abs(ys - design @ np.asarray(coef))
        mad = float(np.median(residuals)) * 1.4826
        if mad <= 1e-12:
            break
        trimmed = residuals <= 2.5 * mad
        if int(np.count_nonzero(trimmed)) < m + 2 or np.array_equal(trimmed, kept):
            break
        kept = trimmed
    assert coef is not None
    return coef, mad


def _spread(values: np.ndarray) -> float:
    """How much the values vary: the 90th over the 10th percentile (nearest rank).

    A few unusual batches (a replay after a restart, a burst) must not decide on their own how
    the per-task cost and the per-row cost are told apart, so the extremes are left out.
    """
    n = len(values)
    lo, hi = n // 10, n - 1 - n // 10
    part = np.partition(values, (lo, hi))
    return float(part[hi] / part[lo]) if part[lo] > 0 else math.inf


REFIT_EVERY = 30  # new batches in an unchanged regime before the model is fitted again
REFIT_ERROR = 0.15  # ... or sooner, when a new batch's duration is mispredicted by over 15 %
_NO_POINT = (math.nan, math.nan, math.nan, math.nan, math.nan, 0.0)


def _point(s: BatchSample) -> tuple[float, float, float, float, float, float]:
    """(rows per task, concurrency, seconds, waves, fixed cost or NaN, 1 if warm else 0.5) of a batch."""
    seconds = s.duration.total_seconds()
    if s.input_rows <= 0 or not s.cores or not s.parallelism or seconds <= 0:
        return _NO_POINT
    fixed = s.fixed_overhead.total_seconds() if s.fixed_overhead is not None else math.nan
    return (
        s.input_rows / s.parallelism,
        float(min(s.parallelism, s.cores)),
        seconds,
        float(math.ceil(s.parallelism / s.cores)),
        fixed,
        0.5 if s.cold else 1.0,
    )


def _rows(samples: Sequence[BatchSample]) -> np.ndarray:
    return np.array([_point(s) for s in samples], dtype=float).reshape(-1, 6)


def fit_cost_model(samples: Sequence[BatchSample]) -> BatchCostModel | None:
    """Fit ``mu``, ``w``, ``k`` and ``o`` from warm batches (cold ones while there are no others).

    ``o`` is the median of the fixed costs Spark reports. Per task, the time left after ``o``
    divided by the waves is ``w + k c + rows_per_task / mu``: a least-squares fit with outliers
    dropped (a batch slowed by an executor starting, a GC pause). ``k`` is fitted only when the
    concurrency ``c`` varied and kept only when it cuts the residual scale by 30 %; ``mu``
    only when batch sizes varied (90th percentile >= 1.5x the 10th); otherwise ``w`` (and
    ``k``) are 0 and ``mu`` the median ratio over the latest batches, which counts overhead as
    work (exact at the current batch size, cautious for larger ones).
    """
    return _fit(_rows(samples[-FIT_SAMPLES:]))


def _count_after(recent: tuple[BatchSample, ...], seen: "BatchSample | None") -> int:
    """Batches at the end of ``recent`` after ``seen`` (all of them when it is not there)."""
    after = None if seen is None else count_after(recent, seen)
    return len(recent) if after is None else after


class CostModelCache:
    """One query's cost model, kept between ticks and fitted again only when it may have changed.

    A query's buffered batches change by about one per tick while a fit looks at up to
    FIT_SAMPLES of them. The fit is reused until REFIT_EVERY new batches arrived, unless a new
    batch's duration is mispredicted by more than REFIT_ERROR (a burst of larger batches, a
    slower node), the regime of the newest batch (cores, partitions, cold) changed, or the
    last fit had only cold batches: right after a rescale the model follows every batch. Not
    thread-safe on its own: the reconciler calls it under its lock.
    """

    def __init__(self) -> None:
        self._samples: tuple[BatchSample, ...] = ()
        self._model: BatchCostModel | None = None
        self._regime: tuple[object, ...] | None = None
        self._checked: "BatchSample | None" = None  # the newest batch the model was checked against
        self._fresh = 0  # batches up to that one since the last fit

    def fit(self, samples: Sequence[BatchSample]) -> BatchCostModel | None:
        recent = tuple(samples[-FIT_SAMPLES:])
        if not recent:
            return None
        newest = recent[-1]
        regime = (newest.cores, newest.parallelism, newest.cold)
        new = _count_after(recent, self._checked)  # batches since the last call: usually one
        fresh = self._fresh + new  # ... and since the last fit
        if fresh >= len(recent):
            # the last fit's newest batch may have left the buffer: where is it now, if anywhere
            fresh = _count_after(recent, self._samples[-1] if self._samples else None)
        if (
            self._model is not None
            and not self._model.cold
            and regime == self._regime
            and fresh < REFIT_EVERY
            and self._explains(recent[len(recent) - new :])
        ):
            self._checked, self._fresh = newest, fresh
            return self._model
        self._samples, self._regime, self._checked, self._fresh = recent, regime, newest, 0
        self._model = _fit(_rows(recent))
        return self._model

    def _explains(self, batches: Sequence[BatchSample]) -> bool:
        """Whether the current model predicts each warm batch's duration within REFIT_ERROR."""
        model = self._model
        assert model is not None
        for b in batches:
            seconds = b.duration.total_seconds()
            if b.cold or seconds <= 0 or not b.parallelism or not b.cores:
                continue
            if abs(model.duration(b.parallelism, b.cores, b.input_rows) - seconds) > REFIT_ERROR * seconds:
                return False
        return True


def _fit(rows: np.ndarray) -> BatchCostModel | None:
    # Cold batches are slow for reasons other than their rows; use them only while there is
    # nothing else (a query whose first batches are huge must still be sized): they err
    # towards more capacity, and the first warm batches replace them.
    warm = rows[rows[:, 5] == 1.0]
    model = _fit_points(warm if len(warm) else rows[rows[:, 5] > 0])
    return replace(model, cold=True) if model is not None and not len(warm) else model


def _fit_points(arr: np.ndarray) -> BatchCostModel | None:
    if not len(arr):
        return None
    own = arr[:, 4]
    reported = ~np.isnan(own)
    fixed = float(np.median(own[reported])) if reported.any() else 0.0
    per_task = (arr[:, 2] - np.where(reported, own, fixed)) / arr[:, 3]
    ok = per_task > 0
    if not ok.any():
        return None
    rs, cs, taus = arr[ok, 0], arr[ok, 1], per_task[ok]
    n = len(taus)
    if n >= 5 and rs.min() > 0 and _spread(rs) >= 1.5:
        ones = np.ones(n)
        plain = _robust_fit(np.column_stack((ones, rs)), taus)
        if plain is not None and plain[0][1] <= 0:
            plain = None
        if cs.min() != cs.max() and (plain is None or plain[1] > CONTENTION_RESIDUAL * float(np.median(taus))):
            shared = _robust_fit(np.column_stack((ones, cs, rs)), taus)
            # contention only when it explains the batches clearly better: with partitions
            # that follow the cores, concurrency and rows per task move together and a
            # marginal contention term would extrapolate wildly
            if (
                shared is not None
                and shared[0][2] > 0
                and shared[0][1] >= 0
                and (plain is None or shared[1] <= CONTENTION_GAIN * plain[1])
            ):
                w, k, inv_mu = shared[0]
                return BatchCostModel(1.0 / inv_mu, max(0.0, w), fixed, k, n)
        if plain is not None:
            w, inv_mu = plain[0]
            return BatchCostModel(1.0 / inv_mu, max(0.0, w), fixed, 0.0, n)
    # without spread, per-task and per-row costs cannot be told apart: the throughput of the
    # latest batches (the current regime, where the prediction matters most), overhead included
    latest = slice(max(0, n - RATIO_SAMPLES), n)
    return BatchCostModel(per_slot=float(np.median(rs[latest] / taus[latest])), fixed=fixed, points=n)
