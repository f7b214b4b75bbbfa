from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.model import BatchSample
from autoscaler.window import SampleWindow, arrival_rate, evaluate_query, fit_capacity
from tests.fakes import query_view, steady_batches

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def batch(i, start_s, seconds, rows, slots=4, backlog=None, cold=False):
    return BatchSample(
        batch_id=i,
        started_at=T0 + timedelta(seconds=start_s),
        duration=timedelta(seconds=seconds),
        input_rows=rows,
        input_rate=None,
        processing_rate=None,
        backlog_rows=backlog,
        slots=slots,
        cold=cold,
    )


def test_fit_separates_batch_overhead_from_per_row_cost():
    # duration = 0.3 s + rows / (900 rows/s/slot * 4 slots)
    samples = [batch(i, 2 * i, 0.3 + rows / 3600, rows) for i, rows in enumerate([800, 1600, 3200, 2400, 4000])]
    fit = fit_capacity(samples)
    assert fit is not None
    assert fit.per_slot == pytest.approx(900, rel=1e-6)
    assert fit.overhead.total_seconds() == pytest.approx(0.3, rel=1e-6)


def test_fit_falls_back_to_ratio_when_batches_are_alike_and_counts_overhead_as_work():
    samples = [batch(i, 2 * i, 1.0, 1000) for i in range(4)]
    fit = fit_capacity(samples)
    assert fit is not None
    assert fit.per_slot == pytest.approx(250)  # 1000 rows / (1 s x 4 slots)
    assert fit.overhead == timedelta(0)


def test_fit_ignores_cold_batches():
    samples = [batch(0, 0, 9.0, 1000, cold=True)] + [batch(i, 2 * i, 1.0, 1000) for i in range(1, 4)]
    assert fit_capacity(samples).per_slot == pytest.approx(250)


def test_arrival_rate_counts_backlog_growth_when_rate_limited():
    # 500 rows per batch every 2 s while the backlog grows by 1000 rows per batch: 1000 rows/s arrive
    samples = [batch(i, 2 * i, 1.0, 500, backlog=1000 * i) for i in range(5)]
    assert arrival_rate(samples) == pytest.approx((4 * 500 + 4000) / 8)


def test_evaluate_reports_lag_as_backlog_over_arrival_rate():
    samples = steady_batches(start=T0, count=10, rate=1000, per_slot=900, slots=4, backlog=5000)
    view = query_view(samples=tuple(samples))
    now = samples[-1].ended_at
    load = evaluate_query(view, now, timedelta(seconds=60))
    assert load.input_rate == pytest.approx(1000)
    assert load.lag == timedelta(seconds=5)


def test_evaluate_fits_capacity_on_all_buffered_batches_not_just_the_window():
    low = steady_batches(start=T0, count=20, rate=400, per_slot=900, slots=4)
    high = steady_batches(start=low[-1].ended_at + timedelta(seconds=2), count=20, rate=2500, per_slot=900, slots=4)
    view = query_view(samples=tuple(low + high))
    load = evaluate_query(view, high[-1].ended_at, timedelta(seconds=20))
    assert load.samples < 20
    assert load.capacity_per_slot == pytest.approx(900, rel=0.01)
    assert load.batch_overhead.total_seconds() == pytest.approx(0.2, rel=0.01)


def test_evaluate_only_uses_batches_inside_the_window():
    samples = steady_batches(start=T0, count=30, rate=1000, per_slot=900, slots=4)
    view = query_view(samples=tuple(samples))
    now = samples[-1].ended_at
    assert evaluate_query(view, now, timedelta(seconds=9)).samples == 5  # batches end every 2 s
    # nothing inside the window: the last two batches are the best evidence left
    assert evaluate_query(view, now + timedelta(hours=1), timedelta(seconds=10)).samples == 2


def test_sample_window_is_bounded():
    w = SampleWindow(max_samples=3)
    for i in range(5):
        w.add(batch(i, i, 1, 1))
    assert [s.batch_id for s in w.snapshot()] == [2, 3, 4]
