"""The ``spark-dra`` baseline against Spark's own ``ExecutorAllocationManagerSuite``
(``core/src/test/scala/org/apache/spark/ExecutorAllocationManagerSuite.scala``).

Each case is a numeric assertion of that suite, fed with its literal inputs, naming the test it
comes from. The port reads a snapshot every tick where Spark reacts to listener events and polls
every 100 ms; the cases below check the arithmetic both share: how many executors the pending
tasks need, how the target ramps while tasks wait, and when idle executors go. What the suite
checks about bookkeeping (listener events, duplicate registrations, speculative tasks, locality,
resource profiles, decommissioning) has no counterpart in a policy that proposes a count.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import BatchSample, Executor, ExecutorView, QueryLoad, Reason, Snapshot
from autoscaler.core.policy import PolicyInput
from policies import create_policy
from policies.spark_dra import add_rounds, max_needed, ramp_target
from tests.fakes import query_view

NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "cores, ratio, expected",
    [
        # "executionAllocationRatio is correctly handled": 20 tasks, min 3, max 15
        pytest.param(1, 0.5, 10, id="ratio-0.5"),
        pytest.param(1, 1 / 3, 7, id="ratio-a-third"),
        pytest.param(2, 1 / 3, 4, id="ratio-a-third-two-cores"),
        pytest.param(1, 0.385, 8, id="ratio-0.385"),
        pytest.param(1, 1.0, 15, id="capped-by-max"),  # 20, capped at 15
        pytest.param(4, 1 / 3, 3, id="raised-to-min"),  # 2, raised to 3
    ],
)
def test_execution_allocation_ratio_is_correctly_handled(cores, ratio, expected):
    assert min(15, max(3, max_needed(20, ratio, cores))) == expected


def test_add_executors():
    # "add executors": min 1, max 10, initial 1, a stage of 1000 tasks: +1, +2, +4, then the limit
    assert [ramp_target(r, min(10, max_needed(1000, 1.0, 1)), running=1) for r in (1, 2, 3, 4, 5)] == [2, 4, 8, 10, 10]


def test_add_executors_capped_by_num_pending_tasks():
    # "add executors capped by num pending tasks": min 0, a stage of 5 tasks: 1, 3, then 5
    assert [ramp_target(r, max_needed(5, 1.0, 1), running=0) for r in (1, 2, 3)] == [1, 3, 5]


def test_avoid_ramp_up_when_target_below_running_executors():
    # "avoid ramp up when target < running executors": 15 executors run, the target fell to 0
    # when the stage ended; the next stage's first round adds one to the 15 running
    assert ramp_target(1, max_needed(1000, 1.0, 1), running=15) == 16


def polled_rounds(polls: list[float], timeout: float, sustained: float) -> list[int]:
    """Add rounds by each poll of a backlog that began at 0: the first once ``timeout`` passed,
    each next ``sustained`` after the previous add (``ExecutorAllocationManager.schedule``)."""
    out, rounds, next_add = [], 0, timeout
    for t in polls:
        if t >= next_add:
            rounds += 1
            next_add = t + sustained
        out.append(rounds)
    return out


def test_mock_polling_loop_add_behavior():
    # "mock polling loop add behavior": min 0, max 20, backlog timeout 1 s, sustained 1 s; polls at
    # 0.5, 1.5, 2.0, 3.0, 4.0 s: targets 0, 1, 1, 1 + 2, 1 + 2 + 4
    rounds = polled_rounds([0.5, 1.5, 2.0, 3.0, 4.0], 1.0, 1.0)
    assert [ramp_target(r, 20, running=0) for r in rounds] == [0, 1, 1, 3, 7]
    # queue drained, then backlogged again with 7 running: +1, +2, +4, then the limit of 20
    rounds = polled_rounds([1.0, 2.0, 3.0, 4.0], 1.0, 1.0)
    assert [ramp_target(r, 20, running=7) for r in rounds] == [8, 10, 14, 20]
    # with Spark's real 100 ms polling the rounds are the port's continuous ones
    polls = [0.1 * k for k in range(1, 60)]
    assert polled_rounds(polls, 1.0, 1.0)[-1] == add_rounds(5.95, 1.0, 1.0)


def inp(executors: int, samples=(), running=False, min_executors=1):
    view = query_view(samples=tuple(samples), trigger=timedelta(seconds=10), run_started_at=NOW - timedelta(hours=1), batch_running=running)
    ex = ExecutorView(tuple(Executor(str(i), 1) for i in range(executors)), 1, True, Reason.CAN_REQUEST_EXECUTORS)
    load = QueryLoad(name="q", samples=len(samples), input_rate=0.0)
    return PolicyInput(NOW, Snapshot(NOW, ex, (view,)), {"q": load}, ScalingHistory(), min_executors, 20, 1, timedelta(seconds=60), timedelta(seconds=10))


def batch_that_ended(seconds_ago: float) -> BatchSample:
    return BatchSample(0, NOW - timedelta(seconds=seconds_ago + 1), timedelta(seconds=1), 100, 10.0, 100.0, 0, cores=3, parallelism=3)


@pytest.mark.parametrize(
    "ended_ago, expected, reason",
    [
        # "mock polling loop remove behavior": min 1, three executors without a task: nothing
        # after half the idle timeout, down to the minimum once it passed
        pytest.param(30, 3, Reason.WITHIN_TARGET, id="half-the-idle-timeout-keeps-them"),
        pytest.param(61, 1, Reason.EXECUTORS_IDLE, id="idle-timeout-removes-down-to-the-minimum"),
    ],
)
def test_mock_polling_loop_remove_behavior(ended_ago, expected, reason):
    proposal = create_policy("spark-dra").propose(inp(3, [batch_that_ended(ended_ago)]))
    assert (proposal.executors, proposal.reason) == (expected, reason)


def test_mock_polling_loop_with_no_events():
    # "mock polling loop with no events": min 0, no task, no executor: nothing added or removed
    proposal = create_policy("spark-dra").propose(inp(0, min_executors=0))
    assert proposal.executors == 0
