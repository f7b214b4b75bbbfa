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


def test_lag_is_time_since_the_last_batch_was_planned_plus_its_backlog():
    samples = steady_batches(start=T0, count=10, rate=1000, per_slot=900, slots=4, backlog=5000)
    view = query_view(samples=tuple(samples))
    now = samples[-1].started_at + timedelta(seconds=1.5)
    load = evaluate_query(view, now, timedelta(seconds=60))
    assert load.input_rate == pytest.approx(1000)
    # 1.5 s since the newest rows were taken + 5000 rows left behind at 1000 rows/s
    assert load.lag == timedelta(seconds=6.5)


def test_a_batch_still_running_raises_the_rate_estimate_and_the_lag():
    # steady 400 rows/s on 8 partitions / 4 cores, then the next batch (planned at the 2 s
    # trigger) is still running 8 s later: it must hold >= (8 - a) s x mu x 4 slots rows.
    low = steady_batches(start=T0, count=10, rate=400, per_slot=900, slots=4, overhead=0.2)
    low += steady_batches(start=low[-1].started_at + timedelta(seconds=2), count=10, rate=1600, per_slot=900, slots=4, overhead=0.2)
    last = low[-1]
    running = query_view(samples=tuple(low), batch_running=True)
    idle = query_view(samples=tuple(low), batch_running=False)
    now = last.started_at + timedelta(seconds=2 + 8)
    live = evaluate_query(running, now, timedelta(seconds=30), cores=4)
    stale = evaluate_query(idle, now, timedelta(seconds=30), cores=4)
    assert stale.input_rate == pytest.approx(1600)
    # bound = (8 - 0.2) s x 900 x 4 / 2 s = 14040 rows/s
    assert live.input_rate == pytest.approx(14040, rel=0.01)
    assert live.lag == timedelta(seconds=10)


def test_task_progress_of_the_running_batch_sizes_it_early():
    low = steady_batches(start=T0, count=10, rate=400, per_slot=900, slots=4, overhead=0.2)
    low += steady_batches(start=low[-1].started_at + timedelta(seconds=2), count=10, rate=1600, per_slot=900, slots=4, overhead=0.2)
    last = low[-1]
    now = last.started_at + timedelta(seconds=2 + 1)
    # 1 s into the batch, 1 of 8 tasks done -> about 8 s in all -> (8 - 0.2) x 900 x 4 / 2 s
    view = query_view(samples=tuple(low), batch_running=True, batch_tasks=(1, 8))
    assert evaluate_query(view, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(14040, rel=0.01)


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


def test_fit_shrugs_off_outlier_batches():
    # true model: 0.3 s + rows / (900 x 4); two batches slowed 5x by executors starting up
    rows = [800, 1600, 3200, 2400, 4000, 1200, 2800, 3600]
    samples = [batch(i, 2 * i, 0.3 + r / 3600, r) for i, r in enumerate(rows)]
    samples[2] = batch(2, 4, 5 * (0.3 + 3200 / 3600), 3200)
    samples[5] = batch(5, 10, 5 * (0.3 + 1200 / 3600), 1200)
    fit = fit_capacity(samples)
    assert fit.per_slot == pytest.approx(900, rel=0.05)
    assert fit.overhead.total_seconds() == pytest.approx(0.3, abs=0.05)
