from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from autoscaler.core.history import ScalingEvent, ScalingHistory
from autoscaler.core.model import (
    Executor,
    ExecutorDecision,
    ExecutorView,
    Mode,
    QueryParams,
    QueryStatus,
    Reason,
)
from autoscaler.core.plan import (
    QueryPlanInput,
    choose_removals,
    executor_position,
    plan_executors,
    plan_queries,
    removal_order,
    request_waiting_since,
)
from autoscaler.core.settings import NormalizeSettings
from tests.fakes import query_view

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def ex(i, tasks=0, age_s=100):
    return Executor(str(i), 1, tasks, NOW - timedelta(seconds=age_s))


def view(*alive, requested=None, waiting_since=None, removing=()):
    return ExecutorView(
        alive=alive,
        cores_per_executor=1,
        can_request=True,
        can_request_reason=Reason.CAN_REQUEST_EXECUTORS,
        requested_total=requested,
        waiting_since=waiting_since,
        pending_removal=removing,
    )


def test_removal_order_is_idle_first_then_newest_then_highest_id():
    order = removal_order([ex(0, tasks=2, age_s=10), ex(1, age_s=300), ex(2, age_s=50), ex(3, age_s=50)])
    assert [e.id for e in order] == ["3", "2", "1", "0"]


def test_choose_removals_skips_executors_already_leaving():
    v = view(ex(0), ex(1, age_s=5), ex(2, age_s=1), removing=("2",))
    assert choose_removals(v, 1) == ("1",)


@pytest.mark.parametrize(
    "v, mode, expected",
    [
        pytest.param(view(ex(0), ex(1)), Mode.ACTIVE, (2, False, False), id="no-request-yet"),
        pytest.param(view(ex(0), requested=3, waiting_since=NOW - timedelta(seconds=5)), Mode.ACTIVE, (3, True, False), id="heading-to-request"),
        pytest.param(view(ex(0), requested=3, waiting_since=NOW - timedelta(seconds=61)), Mode.ACTIVE, (3, False, True), id="request-timed-out"),
        pytest.param(view(ex(0), requested=3, waiting_since=NOW), Mode.REACTIVE, (1, False, False), id="reactive-ignores-requests"),
        pytest.param(view(ex(0), ex(1), requested=1, removing=("1",)), Mode.ACTIVE, (1, True, False), id="removal-in-flight"),
    ],
)
def test_executor_position(v, mode, expected):
    pos = executor_position(v, NOW, timedelta(seconds=60), mode)
    assert (pos.current, pos.in_flight, pos.not_granted) == expected


def test_reactive_mode_plans_no_executor_actions():
    d = ExecutorDecision(1, 4, 4, Reason.SCALE_UP_FOR_LOAD)
    assert plan_executors(d, view(ex(0)), Mode.REACTIVE) == (None, ())
    assert plan_executors(d, view(ex(0)), Mode.ACTIVE) == (4, ())


def plan(queries, cores=4, settling=False, wanted=None, history=ScalingHistory()):
    return plan_queries(
        QueryPlanInput(NOW, queries, cores, settling, wanted or {}, history, NormalizeSettings())
    )


@pytest.mark.parametrize(
    "parallelism, cores, expected, reason",
    [
        pytest.param(2, 4, 4, Reason.PARTITIONS_BELOW_CORES, id="fewer-partitions-than-cores"),
        pytest.param(8, 6, 6, Reason.UNEVEN_WAVES, id="eight-on-six-wastes-a-third"),  # 8/2/6 = 0.67
        pytest.param(8, 4, None, None, id="aligned-kept"),
        pytest.param(8, 1, None, None, id="many-waves-on-one-core-kept"),
        pytest.param(9, 4, None, None, id="nine-on-four-is-0.75-kept"),  # 9/3/4 = 0.75
    ],
)
def test_reactive_alignment_of_partitions_to_cores(parallelism, cores, expected, reason):
    changes, refusals = plan([query_view(parallelism=parallelism)], cores=cores)
    assert not refusals
    if expected is None:
        assert changes == ()
    else:
        assert [(c.to_params.parallelism, c.reason) for c in changes] == [(expected, reason)]


def test_stateful_shuffle_change_refused_on_default_state_store():
    q = query_view(stateful=True, state_store="hdfs")
    q = replace(q, params=replace(q.params, shuffle_partitions=4))
    wanted = {"q": (replace(q.params, shuffle_partitions=8), Reason.OPERATOR_REQUEST)}
    changes, refusals = plan([q], wanted=wanted)
    assert changes == ()
    assert refusals[0].reason == Reason.STATE_PINS_SHUFFLE_PARTITIONS
    assert "spark.sql.shuffle.partitions=4" in refusals[0].message


def test_stateful_shuffle_change_allowed_with_rocksdb():
    q = query_view(stateful=True, state_store="rocksdb")
    q = replace(q, params=replace(q.params, shuffle_partitions=4))
    wanted = {"q": (replace(q.params, shuffle_partitions=8), Reason.OPERATOR_REQUEST)}
    changes, _ = plan([q], wanted=wanted)
    assert changes[0].to_params.shuffle_partitions == 8


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        pytest.param({"settling": True}, Reason.EXECUTORS_SETTLING, id="waits-for-executors"),
        pytest.param(
            {"history": ScalingHistory((ScalingEvent(NOW - timedelta(seconds=5), "q", 8, 4, Reason.UNEVEN_WAVES),))},
            Reason.QUERY_COOLDOWN,
            id="cooldown",
        ),
    ],
)
def test_alignment_rescale_is_held(kwargs, reason):
    changes, refusals = plan([query_view(parallelism=2)], **kwargs)
    assert changes == () and refusals[0].reason == reason


def test_attached_query_is_not_rescaled():
    changes, refusals = plan([query_view(parallelism=2, rescalable=False)])
    assert changes == () and refusals[0].reason == Reason.QUERY_NOT_RESCALABLE


def test_a_trigger_for_a_bounded_query_is_refused_whatever_its_status():
    bounded = query_view(parallelism=2, bounded=True, trigger=None, status=QueryStatus.FINISHED)
    wanted = {"q": (QueryParams(parallelism=2, trigger_interval=timedelta(seconds=5)), Reason.OPERATOR_REQUEST)}
    changes, refusals = plan([bounded], wanted=wanted)
    assert changes == () and refusals[0].reason == Reason.BOUNDED_QUERY_TRIGGER


def test_query_not_running_is_left_alone():
    changes, refusals = plan([query_view(parallelism=2, status=QueryStatus.RESCALING)])
    assert changes == () and refusals == ()


def test_explicit_request_bypasses_cooldown():
    history = ScalingHistory((ScalingEvent(NOW, "q", 8, 4, Reason.UNEVEN_WAVES),))
    wanted = {"q": (QueryParams(parallelism=16, trigger_interval=timedelta(seconds=2)), Reason.OPERATOR_REQUEST)}
    changes, _ = plan([query_view()], wanted=wanted, history=history)
    assert changes[0].to_params.parallelism == 16


T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
LATER = T0 + timedelta(seconds=40)


@pytest.mark.parametrize(
    "since, registered, requested, arrived, expected",
    [
        pytest.param(None, 2, None, False, None, id="nothing-requested"),
        pytest.param(T0, 4, 4, True, None, id="all-registered"),
        pytest.param(None, 1, 4, False, T0, id="starts-waiting-at-the-request"),
        pytest.param(T0, 1, 4, False, T0, id="no-progress-keeps-the-start"),
        pytest.param(T0, 3, 4, True, LATER, id="an-arrival-restarts-the-wait"),
    ],
)
def test_a_request_waits_from_its_last_progress(since, registered, requested, arrived, expected):
    got = request_waiting_since(since, registered=registered, requested=requested, arrived=arrived, asked_at=T0, now=LATER)
    assert got == expected


# --- the managed rate limit -----------------------------------------------------------------------

from autoscaler.core.model import BatchCostModel

MODEL = BatchCostModel(per_slot=900.0, per_task=0.05, fixed=0.2, points=30)


@pytest.mark.parametrize(
    "managed, model, wanted_reason, limit_cores, expected",
    [
        # 16 partitions on 8 cores for 3 triggers of 10 s: 2 waves of (15 - 0.2 ... ) per the model:
        # rows_in(16, 8, 30) = ((30 - 0.2) / 2 - 0.05) x 16 x 900
        pytest.param(True, MODEL, Reason.POLICY_PARALLELISM, 0, int(((30 - 0.2) / 2 - 0.05) * 16 * 900), id="policy-rescale-bounds-the-batch"),
        # sized for the cores one scale-up step reaches: 16 cores, one wave
        pytest.param(True, MODEL, Reason.POLICY_PARALLELISM, 16, int((30 - 0.2 - 0.05) * 16 * 900), id="sized-for-the-next-step"),
        pytest.param(False, MODEL, Reason.POLICY_PARALLELISM, 0, None, id="source-takes-no-limit"),
        pytest.param(True, replace(MODEL, cold=True), Reason.POLICY_PARALLELISM, 0, None, id="no-warm-model-yet"),
        pytest.param(True, MODEL, Reason.OPERATOR_REQUEST, 0, None, id="an-operator-request-is-taken-as-asked"),
    ],
)
def test_a_restart_bounds_the_batches_of_a_query_whose_rate_limit_the_daemon_manages(managed, model, wanted_reason, limit_cores, expected):
    q = query_view(parallelism=8, trigger=timedelta(seconds=10), managed_rate_limit=managed)
    wanted = {"q": (replace(q.params, parallelism=16), wanted_reason)}
    changes, _ = plan_queries(
        QueryPlanInput(NOW, [q], 8, False, wanted, ScalingHistory(), NormalizeSettings(), models={"q": model}, limit_cores=limit_cores)
    )
    [change] = changes
    assert change.to_params.parallelism == 16 and change.to_params.max_rows_per_batch == expected


def test_no_restart_for_the_rate_limit_alone():
    q = query_view(parallelism=8, trigger=timedelta(seconds=10), managed_rate_limit=True)
    changes, refusals = plan_queries(QueryPlanInput(NOW, [q], 8, False, {}, ScalingHistory(), NormalizeSettings(), models={"q": MODEL}))
    assert changes == () and refusals == ()


# --- a hosted query after a daemon restart ---------------------------------------------------------

DECLARED = QueryParams(parallelism=4, trigger_interval=timedelta(seconds=2), max_rows_per_batch=None)


@pytest.mark.parametrize(
    "declared_now, running, declared_then, expected, resumed",
    [
        pytest.param(DECLARED, None, None, DECLARED, (), id="nothing-saved"),
        pytest.param(DECLARED, replace(DECLARED, parallelism=12, max_rows_per_batch=2000), DECLARED,
                     replace(DECLARED, parallelism=12, max_rows_per_batch=2000), ("parallelism", "max_rows_per_batch"), id="operator-rate-limit-and-daemon-partitions"),
        pytest.param(DECLARED, replace(DECLARED, trigger_interval=timedelta(seconds=5)), DECLARED,
                     replace(DECLARED, trigger_interval=timedelta(seconds=5)), ("trigger_interval",), id="operator-trigger"),
        # the pipeline now declares a 10 s trigger: its new definition wins over the old override
        pytest.param(replace(DECLARED, trigger_interval=timedelta(seconds=10)), replace(DECLARED, trigger_interval=timedelta(seconds=5)), DECLARED,
                     replace(DECLARED, trigger_interval=timedelta(seconds=10)), (), id="new-definition-wins"),
        # partitions beyond the pipeline's range (its maximum went down to 8): as declared
        pytest.param(DECLARED, replace(DECLARED, parallelism=64), DECLARED, DECLARED, (), id="partitions-outside-the-range"),
        pytest.param(DECLARED, DECLARED, DECLARED, DECLARED, (), id="ran-as-declared"),
    ],
)
def test_a_restarted_daemon_starts_a_query_as_it_ran_keeping_operator_changes(declared_now, running, declared_then, expected, resumed):
    from autoscaler.core.plan import QueryResume, resumed_params

    saved = QueryResume(running, declared_then) if running is not None else None
    assert resumed_params(declared_now, saved, 1, 32) == (expected, resumed)


# --- a managed rate limit the cores outgrew ---------------------------------------------------------

def limited_view(limit: int, last_batch_rows: int, declared_limit: int | None = None) -> Any:
    from autoscaler.core.model import BatchSample, QueryParams

    view = query_view(parallelism=16, trigger=timedelta(seconds=10), managed_rate_limit=True)
    params = replace(view.params, max_rows_per_batch=limit)
    sample = BatchSample(batch_id=9, started_at=NOW - timedelta(seconds=12), duration=timedelta(seconds=2), input_rows=last_batch_rows,
                         input_rate=None, processing_rate=None, backlog_rows=None)
    declared = QueryParams(parallelism=16, trigger_interval=timedelta(seconds=10), max_rows_per_batch=declared_limit)
    return replace(view, params=params, samples=(sample,), declared=declared)


# rows 16 partitions process in 3 triggers of 10 s on 16 cores (one wave), by MODEL
RAISED = int((30 - 0.2 - 0.05) * 16 * 900)


@pytest.mark.parametrize(
    "limit, last_batch_rows, declared_limit, expected",
    [
        # a limit set for 2 cores (two 8-partition waves ... ): the batches are full, 16 cores do 2x and more
        pytest.param(RAISED // 4, RAISED // 4, None, RAISED, id="full-batches-and-outgrown: raised"),
        pytest.param(RAISED // 4, RAISED // 8, None, None, id="batches-not-full: the load, not the limit, sets them"),
        pytest.param(RAISED * 2 // 3, RAISED * 2 // 3, None, None, id="not-outgrown-twice: no restart for a little more"),
        pytest.param(RAISED // 4, RAISED // 4, RAISED // 4, None, id="the-pipeline's-own-limit: left alone"),
    ],
)
def test_a_managed_rate_limit_the_cores_outgrew_is_raised_with_a_restart(limit, last_batch_rows, declared_limit, expected):
    q = limited_view(limit, last_batch_rows, declared_limit)
    changes, refusals = plan_queries(QueryPlanInput(NOW, [q], 16, False, {}, ScalingHistory(), NormalizeSettings(), models={"q": MODEL}))
    assert refusals == ()
    if expected is None:
        assert changes == ()
    else:
        [change] = changes
        assert change.reason == Reason.RATE_LIMIT_OUTGROWN and change.to_params == replace(q.params, max_rows_per_batch=expected)
        assert change.message == f"rate limit {limit} rows a batch outgrown by 16 core(s), at most {expected} rows a batch"
