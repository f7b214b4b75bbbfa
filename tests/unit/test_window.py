from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.evaluate import active_rate, arrival_rate, arrival_start, batch_arrival_rate, evaluate_query, step_rate
from autoscaler.core.model import BatchSample, Executor, RunningRead
from autoscaler.spark.progress import SampleWindow
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


def test_a_catch_up_batch_counts_the_rows_that_arrived_for_it_not_the_backlog_it_drained():
    # a 30 s catch-up batch under the rate limit took 969000 rows (Spark: 32300 rows/s over the
    # 30 s since the trigger before) while the backlog fell from 1916000 to 1469000 rows: 522000
    # rows arrived, 17400 rows/s
    before = replace(batch(0, 0, 30.0, 969_000, backlog=1_916_000), input_rate=969_000 / 30)
    catch_up = replace(batch(1, 30, 29.0, 969_000, backlog=1_469_000), input_rate=969_000 / 30)
    assert batch_arrival_rate(before, catch_up) == pytest.approx(17_400)
    # the step's remembered rate too (the step holds the second batch; the first is before it)
    assert step_rate([before, catch_up], T0 + timedelta(seconds=30), T0 + timedelta(seconds=60)) == pytest.approx(17_400)
    # a source that does not tell its backlog: the batch's own rate is all there is
    unknown = replace(catch_up, backlog_rows=None)
    assert batch_arrival_rate(before, unknown) == pytest.approx(32_300)
    assert batch_arrival_rate(None, catch_up) == pytest.approx(32_300)


def test_a_querys_first_batch_tells_no_rate_where_spark_measured_none():
    # Spark reports inputRowsPerSecond 0.0 for a query's first batch whatever it read (no trigger
    # before it: measured on Spark 4.3, a file source's first batch of 500 rows said 0.0); the
    # demo's console said "taxi gets 0 rows/s" with 27 s of lag. Unknown, not zero.
    first = replace(batch(0, 0, 25.7, 3000, cores=1), input_rate=0.0)
    load = evaluate_query(query_view(samples=(first,), batch_running=True), T0 + timedelta(seconds=27), timedelta(seconds=30), cores=1)
    assert (load.input_rate, load.known, load.lag) == (None, False, timedelta(seconds=27))
    # a first batch that read nothing did measure something: nothing arrived
    empty = replace(first, input_rows=0)
    assert active_rate([empty]) == 0.0
    # from the second batch on, the rows over the time they arrived in
    second = replace(batch(1, 25.7, 2.0, 600, cores=1), input_rate=600 / 25.7)
    assert active_rate([first, second]) == pytest.approx(600 / 25.7)


def test_lag_is_time_since_the_last_batch_was_planned_plus_its_backlog():
    samples = steady_batches(start=T0, count=10, rate=1000, per_slot=900, cores=4, backlog=5000)
    view = query_view(samples=tuple(samples))
    now = samples[-1].started_at + timedelta(seconds=1.5)
    load = evaluate_query(view, now, timedelta(seconds=60))
    assert load.input_rate == pytest.approx(1000)
    # 1.5 s since the newest rows were taken + 5000 rows left behind at 1000 rows/s
    assert load.lag == timedelta(seconds=6.5)


def test_a_batch_running_unusually_long_raises_the_rate_estimate_and_the_lag():
    # steady 1600 rows/s on 8 partitions / 4 cores: 3200-row batches of about 1.2 s with a
    # 0.2 s fixed cost. The next batch (planned at the 2 s trigger) still runs 8 s later:
    # (8 - 0.2) / (1.2 - 0.2) = 7.8x the rows of the last one, which arrived within 2 s.
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    usual = last.duration.total_seconds()
    running = query_view(samples=tuple(batches), batch_running=True)
    idle = query_view(samples=tuple(batches), batch_running=False)
    now = last.started_at + timedelta(seconds=2 + 8)
    live = evaluate_query(running, now, timedelta(seconds=30), cores=4)
    stale = evaluate_query(idle, now, timedelta(seconds=30), cores=4)
    assert stale.input_rate == pytest.approx(1600)
    assert live.input_rate == pytest.approx(3200 * (8 - 0.2) / (usual - 0.2) / 2, rel=0.01)
    assert live.lag == timedelta(seconds=10)


def test_task_progress_of_the_running_batch_sizes_it_early():
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    usual = last.duration.total_seconds()
    now = last.started_at + timedelta(seconds=2 + 1)
    # 1 s into the batch, 2 of 8 tasks done -> about 4 s in all; one task done (< 25%) is not trusted yet
    view = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(2, 8))
    expected = 3200 * (4 - 0.2) / (usual - 0.2) / 2
    assert evaluate_query(view, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(expected, rel=0.01)
    early = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(1, 8))
    assert evaluate_query(early, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)
    cold = query_view(samples=(*batches[:-1], replace(last, cold=True)), batch_running=True, batch_tasks=(2, 8))
    assert evaluate_query(cold, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)  # slow because cold
    other_scale = evaluate_query(view, now, timedelta(seconds=30), cores=3)
    assert other_scale.input_rate == pytest.approx(1600)  # no comparable batch at 3 cores


def test_executors_that_joined_a_running_batch_do_not_hide_what_it_implies():
    # the batch started on the 4 cores of the last one; a scale-up asked for on its estimate
    # brought a fifth executor 2 s ago: it only shortens the batch, so the estimate (a lower
    # bound) holds instead of vanishing until the batch ends
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    started = last.started_at + timedelta(seconds=2)
    now = started + timedelta(seconds=8)
    view = query_view(samples=tuple(batches), batch_running=True)
    first = [Executor(id=str(i), cores=1, added_at=T0) for i in range(4)]
    before = evaluate_query(view, now, timedelta(seconds=30), cores=4, executors=first)
    joined = [*first, Executor(id="4", cores=1, added_at=now - timedelta(seconds=2))]
    after = evaluate_query(view, now, timedelta(seconds=30), cores=5, executors=joined)
    assert before.input_rate > 3 * 1600
    assert after.input_rate == pytest.approx(before.input_rate)
    # an executor gone since the batch started: the batch is not comparable (it slowed)
    gone = evaluate_query(view, now, timedelta(seconds=30), cores=3, executors=first[:3])
    assert gone.input_rate == pytest.approx(1600)


def test_rows_read_by_finished_tasks_size_a_running_batch_without_the_cap():
    # steady 1600 rows/s: 3200-row batches planned every 2 s. A step to 356x: the running batch
    # holds 1,139,200 rows; one of its 8 tasks has finished, having read 142,400 of them
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    now = last.started_at + timedelta(seconds=2 + 30)
    read = RunningRead(rows=142_400, tasks_done=1, tasks=8)
    view = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(1, 8), batch_read=read)
    counted = evaluate_query(view, now, timedelta(seconds=30), cores=4)
    assert counted.input_rate == pytest.approx(1_139_200 / 2)  # the rows of the 2 s it was planned after
    # from how long it runs the same batch implies at most 20x the one before, and not at all
    # when executors joined it (another scale)
    inferred = evaluate_query(replace(view, batch_read=None), now, timedelta(seconds=30), cores=4)  # not reported
    assert inferred.input_rate == pytest.approx(20 * 3200 / 2)
    assert evaluate_query(view, now, timedelta(seconds=30), cores=6).input_rate == pytest.approx(1_139_200 / 2)


def test_a_stalled_batch_whose_tasks_read_the_usual_rows_is_not_read_as_load():
    # the batch runs 30 s where 1.2 s is usual (a straggler, a lost executor), but the 7 tasks
    # that finished read 400 rows each, as usual: no step
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    now = last.started_at + timedelta(seconds=2 + 30)
    view = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(7, 8), batch_read=RunningRead(2800, 7, 8))
    assert evaluate_query(view, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)
    unreported = replace(view, batch_read=None)
    assert evaluate_query(unreported, now, timedelta(seconds=30), cores=4).input_rate > 10 * 1600  # inferred from time
    # before a task has finished, the rows say nothing yet: inferred from time, capped
    none_done = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(0, 8), batch_read=RunningRead(0, 0, 8))
    inferred = evaluate_query(none_done, now, timedelta(seconds=30), cores=4)
    assert inferred.input_rate == pytest.approx(20 * 3200 / 2)
    assert inferred.live_rate_lower_bound  # told by time alone: at least that
    # counted from the finished tasks, or extrapolated from a quarter of them: an estimate
    counted = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(2, 8), batch_read=RunningRead(200_000, 2, 8))
    assert not evaluate_query(counted, now, timedelta(seconds=30), cores=4).live_rate_lower_bound
    extrapolated = evaluate_query(replace(counted, batch_read=None), now, timedelta(seconds=30), cores=4)
    assert extrapolated.live_rate is not None and not extrapolated.live_rate_lower_bound


def test_rows_read_by_finished_tasks_size_the_first_batch_after_quiet_triggers():
    idle_at = END + timedelta(seconds=600)
    now = idle_at + timedelta(seconds=25)
    read = RunningRead(rows=25_000, tasks_done=2, tasks=8)  # 100,000 rows arrived within the trigger before it
    view = query_view(samples=tuple(BURST), idle_at=idle_at, batch_running=True, batch_tasks=(2, 8), batch_read=read)
    load = evaluate_query(view, now, timedelta(seconds=60), cores=4)
    assert load.input_rate == pytest.approx(100_000 / 2)  # over the 2 s trigger
    unreported = replace(view, batch_read=None)
    assert evaluate_query(unreported, now, timedelta(seconds=60), cores=4).input_rate != load.input_rate  # the cost model's estimate


def test_a_bursts_first_batch_under_reads_it_and_the_next_batchs_counted_rows_tell_its_rate():
    # quiet after the steady batches; a burst of 4000 rows/s begins 1.6 s into a 2 s trigger, so
    # its first batch holds 0.4 s of it (1600 rows: 800 rows/s over its trigger, Spark's
    # inputRowsPerSecond). The next batch, planned 2 s later, holds 8000 rows: the burst's rate
    idle_at = END + timedelta(seconds=600)
    first = replace(batch(10, (idle_at - T0).total_seconds() + 2, 1.0, 1600), input_rate=800.0, backlog_rows=0)
    now = first.started_at + timedelta(seconds=3)
    view = query_view(samples=(*BURST, first), idle_at=idle_at, batch_running=True, batch_tasks=(0, 8), batch_planned_rows=8000)
    load = evaluate_query(view, now, timedelta(seconds=60), cores=4)
    assert load.recent_rate == pytest.approx(4000)
    # not after quiet (no idle trigger reported between them): the newest ended batch's rows are a
    # whole trigger's, and a running batch is weighed by the policy's step factor
    steady = evaluate_query(replace(view, idle_at=None), now, timedelta(seconds=60), cores=4)
    assert steady.live_rate == pytest.approx(4000) and steady.recent_rate < 1000
    # the rows not counted: how long the batch runs tells no rate to trust over the batches'
    inferred = evaluate_query(replace(view, batch_planned_rows=None), now, timedelta(seconds=60), cores=4)
    assert inferred.recent_rate < 1000


def test_the_rows_of_a_batch_are_known_once_a_task_has_finished():
    assert RunningRead(0, 0, 8).batch_rows() is None
    assert RunningRead(300, 3, 8).batch_rows() == 800
    assert RunningRead(800, 8, 8).batch_rows() == 800


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




def test_sample_window_keeps_time_order_when_an_event_arrives_late():
    # the evaluation relies on the buffer being in time order (QueryView.samples)
    w = SampleWindow(max_samples=4)
    for i, start in ((0, 0), (1, 2), (3, 6), (2, 4)):  # batch 2's event comes after batch 3's
        w.add(batch(i, start, 1, 1))
    assert [s.batch_id for s in w.snapshot()] == [0, 1, 2, 3]
    w.add(batch(5, 10, 1, 1))  # full: the oldest goes
    w.add(batch(4, 8, 1, 1))  # late again, into a full buffer
    assert [s.batch_id for s in w.snapshot()] == [2, 3, 4, 5]
    w.add(batch(9, -5, 1, 1))  # older than all a full buffer keeps: dropped
    assert [s.batch_id for s in w.snapshot()] == [2, 3, 4, 5]


def test_batches_stamped_ahead_of_the_clock_are_not_evaluated_yet():
    samples = steady_batches(start=T0, count=10, rate=1000, per_slot=900, cores=4)
    view = query_view(samples=tuple(samples))
    now = samples[-3].ended_at  # the last two ended after now (clock skew)
    load = evaluate_query(view, now, timedelta(minutes=5))
    assert load.samples == 8 and load.batch_duration == samples[-3].duration


# --- idle and on/off streams ---------------------------------------------------------------------


BURST = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)  # 2 s trigger, last starts at 18 s
END = BURST[-1].ended_at


@pytest.mark.parametrize(
    "idle_after, running, now_after, rate, lag",
    [
        # Spark reported an idle trigger 10 s after the last batch: nothing arrives, nothing waits,
        # however long ago the last batch was (the lag was the time since it: 2 s more a tick)
        pytest.param(10, False, 11, 0.0, 0.0, id="idle-trigger-after-the-last-batch"),
        pytest.param(10, False, 3600, 0.0, 0.0, id="idle-for-an-hour-still-no-lag"),
        # no idle report yet: the last batch's rate, and the time since it started
        pytest.param(None, False, 5, 1600.0, 5 + (END - BURST[-1].started_at).total_seconds(), id="no-idle-report-yet"),
        # the idle report predates the last batch: it says nothing about now
        pytest.param(-30, False, 5, 1600.0, 5 + (END - BURST[-1].started_at).total_seconds(), id="stale-idle-report"),
        # the first batch after the quiet stretch runs: its rows came after the idle trigger, at a
        # rate unknown until it ends; the oldest of them waits since the idle trigger at most
        pytest.param(600, True, 604, None, 4.0, id="first-batch-after-idle-running"),
    ],
)
def test_an_idle_query_has_no_input_rate_and_no_lag(idle_after, running, now_after, rate, lag):
    idle_at = None if idle_after is None else END + timedelta(seconds=idle_after)
    view = query_view(samples=tuple(BURST), idle_at=idle_at, batch_running=running)
    load = evaluate_query(view, END + timedelta(seconds=now_after), timedelta(seconds=60), cores=4)
    assert (load.input_rate is None) == (rate is None)
    if rate is not None:
        assert load.input_rate == pytest.approx(rate) and load.known
    assert load.lag.total_seconds() == pytest.approx(lag)
    assert load.idle == (idle_after is not None and idle_after > 0 and not running)


def test_a_query_that_never_had_data_is_idle_with_nothing_waiting():
    load = evaluate_query(query_view(idle_at=T0), T0 + timedelta(minutes=5), timedelta(seconds=60))
    assert (load.input_rate, load.lag, load.idle, load.known) == (0.0, timedelta(0), True, False)


def test_a_burst_after_quiet_triggers_is_a_burst_not_its_average_over_the_quiet_time():
    # one batch at 18 s, then quiet triggers, then a batch at 618 s holding 10 s of 5000 rows/s:
    # Spark reports its inputRowsPerSecond over the time since the previous (quiet) trigger
    quiet = batch(10, 18, 1.0, 3200, backlog=0)
    burst = BatchSample(11, T0 + timedelta(seconds=618), timedelta(seconds=3), 10_000, 5000.0, None, 0, cores=4, parallelism=8)
    after = BatchSample(12, T0 + timedelta(seconds=621), timedelta(seconds=3), 15_000, 5000.0, None, 0, cores=4, parallelism=8)
    assert active_rate([quiet, burst, after]) == pytest.approx(5000.0)
    assert arrival_rate([quiet, burst, after]) == pytest.approx(25_000 / 603)  # the mean over the quiet time
    # without a rate (the first batch of a run) the previous batch's start bounds the arrival
    first = BatchSample(11, T0 + timedelta(seconds=28), timedelta(seconds=1), 5000, None, None, 0)
    assert arrival_start(quiet, first) == quiet.started_at


def test_the_first_batch_of_a_new_run_is_sized_by_its_counted_rows():
    # steady 1600 rows/s, then a restart: the new run started 12 s after the latest batch was
    # planned, and its first batch took the rows of those 12 s. A step to 10x during the pause:
    # 192,000 rows, of which its 2 finished tasks of 8 read 48,000
    batches = steady_batches(start=T0, count=10, rate=1600, per_slot=900, cores=4)
    last = batches[-1]
    run_started = last.started_at + timedelta(seconds=12)
    now = run_started + timedelta(seconds=20)
    read = RunningRead(rows=48_000, tasks_done=2, tasks=8)
    view = query_view(samples=tuple(batches), batch_running=True, batch_tasks=(2, 8), batch_read=read, run_started_at=run_started)
    assert evaluate_query(view, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(192_000 / 12)
    # no rows counted: a new run's first batch, slow because cold, tells nothing by its time
    blind = replace(view, batch_read=None)
    assert evaluate_query(blind, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)
    # the pause's rows at the rate before (19,200): no step, the rate stays that of the batches
    usual = replace(view, batch_read=RunningRead(rows=4_800, tasks_done=2, tasks=8))
    assert evaluate_query(usual, now, timedelta(seconds=30), cores=4).input_rate == pytest.approx(1600)
