"""Table tests of the baseline policies' arithmetic (Spark DRA, DStreams DRA, Amadeus, Flink)."""

from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.history import EXECUTORS, ScalingEvent, ScalingHistory
from autoscaler.core.model import (
    BatchSample,
    Executor,
    ExecutorView,
    QueryLoad,
    Reason,
    Snapshot,
)
from policies import PolicyError, PolicyInput, create_policy
from policies.amadeus import ewma_usage
from policies.dstream_dra import interval_due
from policies.flink_autoscaler import scale
from policies.spark_dra import add_rounds, finished_batch_backlog, ramp_target
from tests.fakes import query_view

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
TRIGGER = timedelta(seconds=10)


def batch(end_ago: float, seconds: float, rows: int = 10_000, cores: int = 4, parallelism: int = 8, fixed: float = 0.2, i: int = 0):
    """A batch that ended ``end_ago`` seconds before NOW after running ``seconds``."""
    started = NOW - timedelta(seconds=end_ago + seconds)
    return BatchSample(
        batch_id=i,
        started_at=started,
        duration=timedelta(seconds=seconds),
        input_rows=rows,
        input_rate=rows / 10,
        processing_rate=rows / seconds,
        backlog_rows=0,
        cores=cores,
        parallelism=parallelism,
        fixed_overhead=timedelta(seconds=fixed),
    )


def every_trigger(count: int, seconds: float, rows: int = 10_000, cores: int = 4, parallelism: int = 8) -> tuple[BatchSample, ...]:
    """``count`` batches, one per 10 s trigger, the last one ending just before NOW."""
    out = []
    for k in range(count):
        ended_ago = 10 * (count - 1 - k) + 0.5
        out.append(batch(ended_ago, seconds, rows, cores, parallelism, i=k))
    return tuple(out)


def inp(
    samples=(),
    executors=4,
    requested=None,
    pending_removal=(),
    history=ScalingHistory(),
    load=None,
    interval=timedelta(seconds=10),
    max_executors=64,
    now=NOW,
    **view_kw,
):
    view = query_view(parallelism=view_kw.pop("parallelism", 8), samples=tuple(samples), trigger=TRIGGER, run_started_at=NOW - timedelta(hours=2), **view_kw)
    ex = ExecutorView(
        alive=tuple(Executor(str(i), 1) for i in range(executors)),
        cores_per_executor=1,
        can_request=True,
        can_request_reason=Reason.CAN_REQUEST_EXECUTORS,
        requested_total=requested,
        pending_removal=tuple(pending_removal),
    )
    loads = {"q": load or QueryLoad(name="q", samples=len(samples), input_rate=1000.0, lag=timedelta(seconds=12))}
    return PolicyInput(
        now=now,
        snapshot=Snapshot(now, ex, (view,)),
        loads=loads,
        history=history,
        min_executors=1,
        max_executors=max_executors,
        cores_per_executor=1,
        target_lag=timedelta(seconds=60),
        interval=interval,
    )


# --- Spark dynamic allocation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "backlog, rounds",
    [
        pytest.param(0.5, 0, id="queued-less-than-the-backlog-timeout"),
        pytest.param(1.0, 0, id="exactly-the-timeout-does-not-fire"),
        pytest.param(1.5, 1, id="first-round-after-one-second"),
        pytest.param(3.2, 3, id="a-round-every-sustained-second"),  # floor((3.2 - 1) / 1) + 1
    ],
)
def test_spark_dra_counts_one_add_round_per_sustained_second(backlog, rounds):
    assert add_rounds(backlog, 1.0, 1.0) == rounds


@pytest.mark.parametrize(
    "rounds, max_needed, target",
    [
        pytest.param(1, 64, 2, id="one-round-adds-one"),  # 1 + 1
        pytest.param(3, 64, 8, id="exponential"),  # 1 + 1 + 2 + 4
        pytest.param(10, 64, 64, id="capped-by-max-needed"),
        pytest.param(0, 64, 0, id="no-round-no-target"),
    ],
)
def test_spark_dra_ramp_doubles_each_round(rounds, max_needed, target):
    assert ramp_target(rounds, max_needed) == target


def test_spark_dra_reads_the_wait_of_the_last_wave_from_a_finished_batch():
    # 64 tasks on 16 cores: 4 waves of (4.2 - 0.2) / 4 = 1 s; the last wave waited 3 s
    assert finished_batch_backlog(batch(1, 4.2, cores=16, parallelism=64)) == pytest.approx(3.0)
    assert finished_batch_backlog(batch(1, 4.2, cores=64, parallelism=64)) == 0.0  # one wave


@pytest.mark.parametrize(
    "samples, executors, expected, reason",
    [
        # 64 tasks on 4 cores: 16 waves of (16.2 - 0.2) / 16 = 1 s, 15 s queued: 15 rounds -> maxNeeded 64
        pytest.param([batch(3, 16.2, cores=4, parallelism=64)], 4, 64, Reason.SCALE_UP_FOR_BACKLOG, id="batch-backlog-ramps-to-max-needed"),
        # 8 tasks on 4 cores: 2 waves of 1 s; the second waited 1 s = the timeout: no round
        pytest.param([batch(3, 2.2)], 4, 4, Reason.WITHIN_TARGET, id="short-queue-no-add"),
        # 8 tasks on 2 cores: 4 waves of 2 s, 6 s queued: 6 rounds = 64, capped at 8 tasks
        pytest.param([batch(3, 8.2, cores=2)], 2, 8, Reason.SCALE_UP_FOR_BACKLOG, id="capped-at-the-batch-task-count"),
        # the last batch ended 61 s ago and nothing runs: every executor idle
        pytest.param([batch(61, 2.0)], 4, 1, Reason.EXECUTORS_IDLE, id="idle-timeout-removes-to-min"),
        pytest.param([batch(30, 2.0)], 4, 4, Reason.WITHIN_TARGET, id="busy-within-the-timeout-keeps-all"),
    ],
)
def test_spark_dra_proposals(samples, executors, expected, reason):
    proposal = create_policy("spark-dra").propose(inp(samples, executors=executors))
    assert (proposal.executors, proposal.reason) == (expected, reason)


def test_spark_dra_ramps_on_the_pending_tasks_of_a_running_batch():
    # the last batch started 22 s ago and took 2 s; the next one started at its trigger 12 s ago
    # and has 56 of 64 tasks left on 4 cores: 12 s of backlog -> 12 rounds -> 2^12, capped at 56
    samples = [batch(20.0, 2.0, cores=4, parallelism=64)]
    proposal = create_policy("spark-dra").propose(inp(samples, batch_running=True, batch_tasks=(8, 64), parallelism=64))
    assert proposal.executors == 56


# --- DStreams dynamic allocation ----------------------------------------------------------------


@pytest.mark.parametrize(
    "now, previous, due",
    [
        pytest.param(120.0, 110.0, True, id="crossed-a-minute-boundary"),
        pytest.param(125.0, 121.0, False, id="inside-the-minute"),
        pytest.param(60.0, 59.9, True, id="exactly-on-the-boundary"),
    ],
)
def test_dstream_timer_fires_on_interval_boundaries(now, previous, due):
    assert interval_due(now, previous, 60.0) is due


@pytest.mark.parametrize(
    "seconds, expected, reason",
    [
        pytest.param(9.5, 5, Reason.SCALE_UP_FOR_LOAD, id="ratio-0.95-adds-round-1"),  # +max(round(0.95), 1)
        pytest.param(26.0, 7, Reason.SCALE_UP_FOR_LOAD, id="ratio-2.6-adds-3"),  # round(2.6) = 3
        pytest.param(2.5, 3, Reason.SCALE_DOWN_FOR_LOAD, id="ratio-0.25-removes-one"),
        pytest.param(5.0, 4, Reason.WITHIN_TARGET, id="ratio-0.5-holds"),
    ],
)
def test_dstream_dra_adds_round_ratio_or_removes_one(seconds, expected, reason):
    samples = every_trigger(6, seconds)
    proposal = create_policy("dstream-dra").propose(inp(samples, now=NOW))  # NOW is on a minute boundary
    assert (proposal.executors, proposal.reason) == (expected, reason)


def test_dstream_dra_waits_for_its_timer():
    later = NOW + timedelta(seconds=20)
    proposal = create_policy("dstream-dra").propose(inp(every_trigger(6, 26.0), now=later, requested=4))
    assert (proposal.executors, proposal.reason) == (4, Reason.WAITING_FOR_INTERVAL)


def test_dstream_dra_rejects_a_down_ratio_above_the_up_ratio():
    with pytest.raises(PolicyError, match="scaling_down_ratio"):
        create_policy("dstream-dra", {"scaling_down_ratio": 0.95})


# --- Amadeus ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usages, mean",
    [
        pytest.param([1.2, 1.2], 1.2, id="constant"),
        # num = 0.6 x 0.5 + 1.5 = 1.8; den = 0.6 x 1 + 1 = 1.6
        pytest.param([0.5, 1.5], 1.125, id="recent-weighs-more"),
        # num = 0.6 x (0.6 x 1 + 1) + 0.5 = 1.46; den = 0.6 x 1.6 + 1 = 1.96
        pytest.param([1.0, 1.0, 0.5], 1.46 / 1.96, id="three-events"),
    ],
)
def test_amadeus_weighted_mean_of_trigger_usage(usages, mean):
    samples = [batch(100 - i, 10 * u) for i, u in enumerate(usages)]
    assert ewma_usage(samples, 10.0, 0.6) == pytest.approx(mean)


@pytest.mark.parametrize(
    "seconds, expected, reason",
    [
        pytest.param(12.5, 5, Reason.SCALE_UP_FOR_LOAD, id="usage-1.25-ceil-4x1.25"),
        pytest.param(5.0, 2, Reason.SCALE_DOWN_FOR_LOAD, id="usage-0.5-halves"),
        pytest.param(8.0, 4, Reason.WITHIN_TARGET, id="usage-0.8-within-band"),
    ],
)
def test_amadeus_resizes_to_ceil_workers_times_mean_outside_the_band(seconds, expected, reason):
    proposal = create_policy("amadeus").propose(inp(every_trigger(8, seconds)))
    assert (proposal.executors, proposal.reason) == (expected, reason)


def test_amadeus_skips_while_the_cluster_resizes():
    proposal = create_policy("amadeus").propose(inp(every_trigger(8, 12.5), requested=6))
    assert (proposal.executors, proposal.reason) == (6, Reason.ACTION_IN_FLIGHT)


# --- Flink Kubernetes Operator autoscaler ---------------------------------------------------------


@pytest.mark.parametrize(
    "new, current, partitions, aligned",
    [
        pytest.param(5, 4, 64, 8, id="up-to-the-next-divisor"),
        pytest.param(20, 16, 64, 32, id="twenty-becomes-thirty-two"),
        pytest.param(70, 32, 64, 64, id="never-above-the-partitions"),
        # Flink's phase 2: no divisor in [4, 5], so the fewest subtasks with the same records each
        # (was pinned at 5, the current value, which is not Flink's result; see test_flink_fidelity)
        pytest.param(4, 5, 6, 3, id="scale-down-without-a-divisor-falls-back-down"),
        pytest.param(3, 5, 12, 3, id="down-to-a-divisor"),
    ],
)
def test_flink_evenly_spread_alignment(new, current, partitions, aligned):
    assert scale(current, new / current, partitions=partitions, max_parallelism=partitions, lower=1, upper=1000) == aligned


def flink_window(seconds: float, rows: int, cores: int, partitions: int = 64):
    # 90 batches over the 15 min window, one per 10 s trigger
    return every_trigger(90, seconds, rows=rows, cores=cores, parallelism=partitions)


@pytest.mark.parametrize(
    "seconds, rows, executors, expected, reason",
    [
        # busy = 9.9 / 10; TPR = 10000 / 9.9 = 1010 rows/s; target rate 1000 rows/s; no lag.
        # up threshold 1000 / 1.0 = 1000 < TPR: inside the band -> no change
        pytest.param(9.9, 10_000, 16, 16, Reason.WITHIN_TARGET, id="busy-0.99-is-inside-0.4-1.0"),
        # busy 1.2: TPR = 10000 / 12 = 833 < 1000 -> outside; capacity = 1000 x 300 / 1800 + 1000 / 0.7
        # = 1595; factor 1.914; ceil(1.914 x 16) = 31 -> aligned to 32 (a divisor of 64)
        pytest.param(12.0, 10_000, 16, 32, Reason.SCALE_UP_FOR_LOAD, id="overloaded-scales-to-target-0.7-aligned"),
        # busy 0.2: TPR 5000 > down threshold 167 + 1000 / 0.4 = 2667 -> outside; factor 1595 / 5000
        # = 0.319, clamped to 0.4: ceil(0.4 x 16) = 7 -> aligned 8
        pytest.param(2.0, 10_000, 16, 8, Reason.SCALE_DOWN_FOR_LOAD, id="underused-scales-down-at-most-60-percent"),
    ],
)
def test_flink_autoscaler_sizing(seconds, rows, executors, expected, reason):
    load = QueryLoad(name="q", samples=90, input_rate=1000.0, lag=timedelta(seconds=10))
    proposal = create_policy("flink-autoscaler").propose(
        inp(flink_window(seconds, rows, executors), executors=executors, load=load, parallelism=64)
    )
    assert (proposal.executors, proposal.reason) == (expected, reason)


def test_flink_autoscaler_waits_for_stabilization_and_a_full_window_after_a_rescale():
    history = ScalingHistory(events=(ScalingEvent(NOW - timedelta(minutes=12), EXECUTORS, 8, 16, Reason.SCALE_UP_FOR_LOAD),))
    load = QueryLoad(name="q", samples=90, input_rate=1000.0, lag=timedelta(seconds=10))
    proposal = create_policy("flink-autoscaler").propose(
        inp(flink_window(12.0, 10_000, 16), executors=16, load=load, history=history, parallelism=64)
    )
    # 12 min since the rescale < 5 min stabilization + 15 min window
    assert (proposal.executors, proposal.reason) == (16, Reason.STABILIZING)


def test_flink_autoscaler_does_not_scale_down_in_backlog_mode():
    # busy 0.2 would scale down, but 10 min of lag (> 5 min threshold) widens the band to [0, 1]
    load = QueryLoad(name="q", samples=90, input_rate=1000.0, lag=timedelta(minutes=10))
    proposal = create_policy("flink-autoscaler").propose(inp(flink_window(2.0, 10_000, 16), executors=16, load=load, parallelism=64))
    assert (proposal.executors, proposal.reason) == (16, Reason.WITHIN_TARGET)


def test_flink_autoscaler_publishes_its_one_hour_lazy_scale_down():
    from policies import policy_class

    assert policy_class("flink-autoscaler").settings_profile["normalize.scale_down_delay"] == "1h"
