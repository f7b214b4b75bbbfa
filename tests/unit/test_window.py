from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.model import BatchSample
from autoscaler.window import SampleWindow, arrival_rate, evaluate_query
from tests.fakes import query_view, steady_batches

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def batch(i, start_s, seconds, rows, cores=4, backlog=None, cold=False):
    return BatchSample(
        batch_id=i,
        started_at=T0 + timedelta(seconds=start_s),
        duration=timedelta(seconds=seconds),
        input_rows=rows,
        input_rate=None,
        processing_rate=None,
        backlog_rows=backlog,
        cores=cores,
        parallelism=8,
        cold=cold,
    )


def test_arrival_rate_counts_backlog_growth_when_rate_limited():
    # 500 rows per batch every 2 s while the backlog grows by 1000 rows per batch: 1000 rows/s arrive
    samples = [batch(i, 2 * i, 1.0, 500, backlog=1000 * i) for i in range(5)]
    assert arrival_rate(samples) == pytest.approx((4 * 500 + 4000) / 8)


def test_lag_is_time_since_the_last_batch_was_planned_plus_its_backlog():
    samples = steady_batches(start=T0, count=10, rate=1000, per_slot=900, cores=4, backlog=5000)
    view = query_view(samples=tuple(samples))
    now = samples[-1].started_at + timedelta(seconds=1.5)
    load = evaluate_query(view, now, timedelta(seconds=60))
    assert load.input_rate == pytest.approx(1000)
    # 1.5 s since the newest rows were taken + 5000 rows left behind at 1000 rows/s
    assert load.lag == timedelta(seconds=6.5)


def test_a_batch_still_running_raises_the_rate_estimate_and_the_lag():
    # steady load on 8 partitions / 4 cores (o = 0.2 s, w = 0.05 s, mu = 900), then the next
    # batch (planned at the 2 s trigger) is still running 8 s later: 2 waves of 8 s hold at
    # least ((8 - 0.2) / 2 - 0.05) x 8 x 900 = 27720 rows, which arrived within 2 s.
    low = steady_batches(start=T0, count=10, rate=400, per_slot=900, cores=4)
    low += steady_batches(start=low[-1].started_at + timedelta(seconds=2), count=10, rate=1600, per_slot=900, cores=4)
    last = low[-1]
    running = query_view(samples=tuple(low), batch_running=True)
    idle = query_view(samples=tuple(low), batch_running=False)
    now = last.started_at + timedelta(seconds=2 + 8)
    live = evaluate_query(running, now, timedelta(seconds=30), cores=4)
    stale = evaluate_query(idle, now, timedelta(seconds=30), cores=4)
    assert stale.input_rate == pytest.approx(1600)
    assert live.input_rate == pytest.approx(27720 / 2, rel=0.01)
    assert live.lag == timedelta(seconds=10)


def test_task_progress_of_the_running_batch_sizes_it_early():
    low = steady_batches(start=T0, count=10, rate=400, per_slot=900, cores=4)
    low += steady_batches(start=low[-1].started_at + timedelta(seconds=2), count=10, rate=1600, per_slot=900, cores=4)
    last = low[-1]
    now = last.started_at + timedelta(seconds=2 + 1)
    # 1 s into the batch, 2 of 8 tasks done -> about 4 s in all: 2 waves of 1.9 s hold
    # (1.9 - 0.05) x 8 x 900 = 13320 rows, arrived in 2 s. One task done (< 25%) is not trusted yet.
    view = query_view(samples=tuple(low), batch_running=True, batch_tasks=(2, 8))
    assert evaluate_query(view, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(13320 / 2, rel=0.01)
    early = query_view(samples=tuple(low), batch_running=True, batch_tasks=(1, 8))
    assert evaluate_query(early, now, timedelta(seconds=30), cores=4).input_rate < 2000
    warming = query_view(samples=tuple(low), batch_running=True, batch_tasks=(2, 8), warming=True)
    assert evaluate_query(warming, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)


def test_evaluate_only_uses_batches_inside_the_window():
    samples = steady_batches(start=T0, count=30, rate=1000, per_slot=900, cores=4)
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


