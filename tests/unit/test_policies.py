import re
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import (
    BatchCostModel,
    Executor,
    ExecutorView,
    QueryLoad,
    Reason,
    Snapshot,
)
from policies import PolicyError, PolicyInput, create_policy, policy_names
from policies.target_utilization import fewest_cores, utilization
from tests.fakes import query_view

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


MODEL = BatchCostModel(per_slot=900.0, per_task=0.02, fixed=0.2)


def inp(cores=4, parallelism=8, rate=400.0, backlog=0.0, max_executors=6, rescalable=False, **qkw):
    view = query_view(parallelism=parallelism, rescalable=rescalable, max_parallelism=64 if rescalable else parallelism, **qkw)
    lag = timedelta(seconds=backlog / rate) if rate else None
    load = QueryLoad(
        name="q",
        samples=10,
        input_rate=rate,
        model=MODEL,
        backlog_rows=backlog,
        lag=lag,
        parallelism=parallelism,
    )
    executors = ExecutorView(
        alive=tuple(Executor(str(i), 1) for i in range(cores)),
        cores_per_executor=1,
        can_request=True,
        can_request_reason=Reason.CAN_REQUEST_EXECUTORS,
    )
    return PolicyInput(
        now=NOW,
        snapshot=Snapshot(NOW, executors, (view,)),
        loads={"q": load},
        history=ScalingHistory(),
        min_executors=1,
        max_executors=max_executors,
        cores_per_executor=1,
        target_lag=timedelta(seconds=60),
    )


# Arithmetic: o = 0.2 s, w = 0.02 s, mu = 900 rows/s, P = 8, trigger I = 2 s, u = 0.7 +- 0.2.
#   a batch holds R = rate x 2 rows; per task tau = w + R / (8 x 900); duration = o + waves x tau
#   utilization = duration / 2 must be <= 0.7 (duration <= 1.4 s)
@pytest.mark.parametrize(
    "case, expected_executors, expected_reason",
    [
        # R = 800, tau = 0.131: on 4 cores 0.2 + 2 tau = 0.46 s (0.23 < 0.5); on 1 core 0.2 + 8 tau = 1.25 s (0.62)
        pytest.param(dict(cores=4, rate=400), 1, Reason.SCALE_DOWN_FOR_LOAD, id="low-load-scales-down-to-one"),
        # R = 5000, tau = 0.714: 2 waves (4..7 cores) 1.63 s (0.81 > 0.7), 1 wave needs 8 > max 6;
        # 0.81 is inside the band, so the fewest cores giving the fewest waves: 4
        pytest.param(dict(cores=1, rate=2500), 4, Reason.SCALE_UP_FOR_LOAD, id="step-up-aligns-to-four-of-eight-partitions"),
        # R = 2400, tau = 0.353: on 2 cores 0.2 + 4 tau = 1.61 s (0.81), within 0.5..0.9
        pytest.param(dict(cores=2, rate=1200), 2, Reason.WITHIN_TARGET, id="within-band-holds"),
        # lag = 60000 / 400 = 150 s > 60 s SLO; rate = 400 + 60000 / 120 = 900, R = 1800, tau = 0.27:
        # 1 core 2.36 s, 2 cores 1.28 s (0.64) -> 2
        pytest.param(dict(cores=1, rate=400, backlog=60000), 2, Reason.SCALE_UP_FOR_BACKLOG, id="backlog-catch-up"),
        # nothing up to max 2 reaches 0.7; 8 partitions on 2 cores -> 2
        pytest.param(dict(cores=1, rate=2500, max_executors=2), 2, Reason.SCALE_UP_FOR_LOAD, id="capped-by-max"),
    ],
)
def test_target_utilization_sizing(case, expected_executors, expected_reason):
    proposal = create_policy("target-utilization").propose(inp(**case))
    assert proposal.executors == expected_executors
    assert proposal.reason == expected_reason
    assert proposal.parallelism == {}


def test_more_partitions_when_one_task_per_partition_is_not_enough():
    # 2 partitions take >= 3 s per batch. Paying the restart, 2500 x 10 s / 120 s = 208 rows/s more:
    # R = 5417 rows; with one partition per core 0.2 + 0.02 + 5417 / (c x 900) <= 1.4 first at c = 6.
    proposal = create_policy("target-utilization").propose(inp(cores=1, parallelism=2, rate=2500, rescalable=True))
    assert proposal.executors == 6
    assert proposal.parallelism == {"q": 6}


def test_no_metrics_means_no_executor_opinion():
    i = inp()
    i = replace(i, loads={"q": QueryLoad(name="q", samples=0)})
    proposal = create_policy("default").propose(i)
    assert proposal.executors is None and proposal.reason == Reason.NO_METRICS


def test_reactive_never_requests_executors():
    proposal = create_policy("reactive").propose(inp(cores=3, rate=9999))
    assert proposal.executors is None and proposal.reason == Reason.USE_AVAILABLE


@pytest.mark.parametrize(
    "params, expected",
    [
        pytest.param({}, 6, id="static-defaults-to-max"),
        pytest.param({"executors": 2}, 2, id="static-fixed"),
    ],
)
def test_static_policy(params, expected):
    assert create_policy("static", params).propose(inp()).executors == expected


@pytest.mark.parametrize(
    "name, params, message",
    [
        pytest.param("nope", {}, "unknown policy 'nope'", id="unknown-policy"),
        pytest.param("target-utilization", {"target_utilization": 1.5}, "params.target_utilization", id="out-of-range"),
        pytest.param("target-utilization", {"typo": 1}, "params.typo: unknown parameter", id="unknown-param"),
        pytest.param("target-utilization", {"catch_up_duration": "soon"},
                     "params.catch_up_duration: expected a duration such as 30s, 5m, 1h or 1h30m, got 'soon'", id="bad-duration"),
        pytest.param("target-utilization", {"target_utilization": float("nan")}, "params.target_utilization: Input should be a finite number", id="nan"),
        pytest.param("target-utilization", {"target_utilization": True}, "params.target_utilization: expected a number, got the boolean true",
                     id="boolean-for-a-number"),
        # the value was not shown: which of `--param target_utilization=70%` was wrong?
        pytest.param("target-utilization", {"target_utilization": "70%"},
                     re.escape("params.target_utilization: Input should be a valid number, unable to parse string as a number, got '70%'"), id="percent-for-a-share"),
    ],
)
def test_bad_policy_configuration_names_the_problem(name, params, message):
    with pytest.raises(PolicyError, match=message):
        create_policy(name, params)


def test_registry_lists_default_alias():
    assert {"default", "reactive", "static", "target-utilization"} <= set(policy_names())


@settings(max_examples=500, deadline=None)
@given(
    per_slot=st.floats(50, 2000),
    per_task=st.floats(0, 2),
    fixed=st.floats(0, 9),
    contention=st.sampled_from([0.0, 0.01, 0.3]),
    rate=st.floats(0, 50_000),
    target=st.floats(0.05, 1.0),
    partitions=st.integers(1, 64),
    max_cores=st.integers(1, 100),
)
def test_target_utilization_finds_the_fewest_cores_every_size_would(per_slot, per_task, fixed, contention, rate, target, partitions, max_cores):
    model = BatchCostModel(per_slot=per_slot, per_task=per_task, fixed=fixed, contention=contention)
    trigger = timedelta(seconds=10)
    by_scan = next((c for c in range(1, max_cores + 1) if utilization(model, partitions, c, rate, trigger) <= target), None)
    assert fewest_cores(model, partitions, rate, trigger, target, max_cores) == by_scan


def test_a_query_receiving_nothing_is_not_busy_whatever_its_batches_would_cost():
    # 9 s of fixed cost a batch is more than half a 10 s trigger on any size; but a trigger that
    # finds no rows runs no batch: at rate 0 the query is idle and 1 core will do
    model = BatchCostModel(per_slot=900.0, per_task=0.07, fixed=9.0)
    trigger = timedelta(seconds=10)
    assert fewest_cores(model, 8, 1.0, trigger, 0.5, 4) is None
    assert utilization(model, 8, 1, 0.0, trigger) == 0.0
    assert fewest_cores(model, 8, 0.0, trigger, 0.5, 4) == 1


def test_target_utilization_does_not_try_more_cores_than_partitions(monkeypatch):
    import policies.target_utilization as module

    tried: list[int] = []
    real = module.utilization
    monkeypatch.setattr(module, "utilization", lambda model, p, cores, *a: tried.append(cores) or real(model, p, cores, *a))
    model = BatchCostModel(per_slot=900.0, per_task=0.07, fixed=0.2)
    assert fewest_cores(model, 8, 1e9, timedelta(seconds=10), 0.8, 10**12) is None  # 8 tasks can't
    assert tried == list(range(1, 9))  # and a trillion cores are not tried: beyond 8 nothing changes


@pytest.mark.parametrize(
    "trigger, expected",
    [
        pytest.param(None, 60, id="as-fast-as-possible"),
        pytest.param(timedelta(seconds=10), 60, id="short-trigger-keeps-the-slo"),
        pytest.param(timedelta(seconds=30), 60, id="two-triggers-equal-the-slo"),
        pytest.param(timedelta(minutes=2), 240, id="long-trigger-two-intervals"),
    ],
)
def test_a_querys_target_lag_is_at_least_what_its_schedule_allows(trigger, expected):
    i = inp(trigger=trigger)
    assert i.target_lag_for(i.snapshot.queries[0]) == timedelta(seconds=expected)


@pytest.mark.parametrize(
    "lag, reason",
    [
        # 150 s of lag is the schedule of a 2-minute trigger (up to 240 s), not a backlog: at
        # 400 rows/s a batch of 48000 rows runs 0.2 + 2 x (0.02 + 48000 / 7200) = 13.6 s on 4 cores
        # (0.11 busy), so the policy scales down as it would with a reachable SLO
        pytest.param(150, Reason.SCALE_DOWN_FOR_LOAD, id="schedule-lag-is-no-backlog"),
        # beyond two triggers the rows wait for lack of capacity: a backlog to drain
        pytest.param(300, Reason.SCALE_UP_FOR_BACKLOG, id="lag-beyond-the-schedule"),
    ],
)
def test_target_utilization_judges_a_long_trigger_against_its_schedule(lag, reason):
    i = inp(cores=4, rate=400, trigger=timedelta(minutes=2))
    i = replace(i, loads={"q": replace(i.loads["q"], lag=timedelta(seconds=lag))})
    assert create_policy("target-utilization").propose(i).reason == reason


@pytest.mark.parametrize(
    "requested, expected",
    [
        # 2 executors registered where 1 was asked for (late registrations after the start set
        # the target): the policy holds what the daemon asserts, so the extras are removed, not
        # adopted because they happen to be there
        pytest.param(1, 1, id="unasked-extras-are-not-adopted"),
        # a scale-up 2 -> 4 in flight: holding the 2 registered would propose undoing it
        pytest.param(4, 4, id="a-scale-up-in-flight-is-held"),
        pytest.param(2, 2, id="as-asked"),
    ],
)
def test_target_utilization_within_band_holds_the_asserted_target_not_the_registered_count(requested, expected):
    i = inp(cores=2, rate=1200)  # 0.81 busy on 2 cores: within 0.7 +- 0.2 (above)
    i = replace(i, snapshot=replace(i.snapshot, executors=replace(i.snapshot.executors, requested_total=requested)))
    proposal = create_policy("target-utilization").propose(i)
    assert proposal.reason == Reason.WITHIN_TARGET
    assert proposal.executors == expected
