"""Operator changes: validated against the configuration rules, atomic, audited, effective next tick."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from autoscaler.core.control import ControlState
from autoscaler.core.model import Mode, QueryParams, QueryStatus, Reason
from autoscaler.runtime.audit import OPERATOR
from autoscaler.runtime.commands import ChangeError, Commands
from tests.fakes import query_view
from tests.unit.test_reconciler import TICK, make


def commands(overrides=None, **kw):
    clock, cluster, rec = make(overrides, **kw)
    return clock, cluster, rec, Commands(rec, clock=clock)


@pytest.mark.parametrize(
    "changes, field, message",
    [
        pytest.param({"min_executors": 7}, "min_executors", "min_executors (7) must not exceed max_executors (6)", id="min-above-configured-max"),
        pytest.param({"max_executors": 0}, "max_executors", "must be at least 1", id="max-zero"),
        pytest.param({"min_executors": -1}, "min_executors", "must be at least 0", id="min-negative"),
        pytest.param({"min_executors": 4, "max_executors": 3}, "min_executors", "min_executors (4) must not exceed max_executors (3)", id="both-inverted"),
        pytest.param({"manual_executors": 9}, "manual_executors", "9 is outside the executor bounds [1, 6]", id="manual-outside-bounds"),
        pytest.param({"policy_params": {"target_utilization": 3}}, "policy_params", "params.target_utilization", id="param-out-of-range"),
        pytest.param({"policy_params": {"no_such": 1}}, "policy_params", "params.no_such: unknown parameter", id="unknown-param"),
        pytest.param({"policy_params": {"": 1}}, "policy_params", "params.'': unknown parameter", id="empty-param-name"),
        pytest.param({"policy_params": {"catch_up_duration": "soon"}}, "policy_params", "expected a duration", id="bad-duration-param"),
        pytest.param({"speed": 11}, "speed", "not a control field", id="unknown-field"),
        pytest.param({}, "body", "give at least one of", id="empty"),
    ],
)
def test_an_invalid_change_names_the_field_and_changes_nothing(changes, field, message):
    _, _, rec, cmd = commands()
    rec.update_control(lambda c: ControlState(paused=True))
    before, policy = rec.control, rec.policy
    with pytest.raises(ChangeError) as info:
        cmd.change_control("alice", {"paused": False, **changes} if changes else changes)
    fields = [f for f, _ in info.value.problems]
    assert field in fields and message in str(info.value)
    assert rec.control is before and rec.policy is policy  # nothing half-applied (not even `paused`)
    assert rec.audit.entries(kind=OPERATOR) == []


@pytest.mark.parametrize(
    "bounds, field",
    [pytest.param({"max_executors": 3}, "max_executors", id="max-below"), pytest.param({"min_executors": 6}, "min_executors", id="min-above")],
)
def test_a_bound_moved_past_the_manual_target_is_refused_as_the_target_outside_the_bounds_is(bounds, field):
    # manual 5 then max 3 was taken (a state manual 5 then max 3 in the other order was refused)
    _, _, rec, cmd = commands()
    cmd.change_control("alice", {"manual_executors": 5 if field == "max_executors" else 4})
    before = rec.control
    with pytest.raises(ChangeError) as info:
        cmd.change_control("alice", bounds)
    assert [f for f, _ in info.value.problems] == [field]
    assert "would be outside the executor bounds" in str(info.value) and "in the same request" in str(info.value)
    assert rec.control is before
    cmd.change_control("alice", {**bounds, "manual_executors": None})  # both at once: taken
    assert rec.control.manual_executors is None and rec.bounds() == ((1, 3) if field == "max_executors" else (6, 6))


def test_a_valid_change_is_applied_at_once_audited_and_effective_on_the_next_tick():
    clock, cluster, rec, cmd = commands(overrides={"policy.name": "static", "policy.params": {"executors": 2}}, executors=1)
    applied = cmd.change_control("alice", {"mode": "reactive", "dry_run": True, "max_executors": 4, "policy_params": {"executors": 3}}, note="incident 42")
    assert rec.control.mode == Mode.REACTIVE and rec.control.dry_run and rec.bounds() == (1, 4)
    assert rec.policy.params.executors == 3  # type: ignore[attr-defined]
    entry = applied.entry
    assert entry is not None and entry.who == "alice" and entry.kind == OPERATOR and entry.at == clock.now()
    assert entry.details["changes"]["mode"] == {"from": None, "to": "reactive"}
    assert entry.details["note"] == "incident 42"
    assert "mode: default -> reactive" in entry.what and "max_executors: default -> 4" in entry.what
    clock.advance(TICK)
    record = rec.tick()
    assert record.mode.mode == Mode.REACTIVE and record.dry_run and record.proposal.executors == 3


def test_none_returns_a_field_to_the_configuration():
    _, _, rec, cmd = commands(overrides={"policy.name": "static", "policy.params": {"executors": 2}})
    cmd.change_control("alice", {"policy_params": {"executors": 5}, "mode": "active", "paused": True})
    cmd.change_control("bob", {"policy_params": None, "mode": None, "paused": None})
    assert rec.control == ControlState()
    assert rec.policy.params.executors == 2  # type: ignore[attr-defined]


def test_a_change_to_the_same_value_is_not_audited():
    _, _, rec, cmd = commands()
    assert cmd.change_control("alice", {"paused": False}).entry is None
    assert rec.audit.entries() == []


def test_manual_target_is_applied_on_the_next_tick():
    clock, cluster, rec, cmd = commands(executors=1)
    cmd.change_control("alice", {"manual_executors": 3})
    clock.advance(TICK)
    record = rec.tick()
    assert (record.decision.target, record.decision.reason) == (3, Reason.MANUAL_TARGET)
    assert ("set_target", 3) in cluster.calls


# --- queries ---------------------------------------------------------------------------------------


def observed(overrides=None, **view_kw):
    clock, cluster, rec, cmd = commands(overrides={"mode": "reactive", **(overrides or {})}, executors=2)
    cluster.add_query(query_view("q", parallelism=2, max_parallelism=16, **view_kw))
    clock.advance(TICK)
    rec.tick()
    return clock, cluster, rec, cmd


def test_a_rate_limit_and_trigger_request_restarts_the_query_on_the_next_tick():
    clock, cluster, rec, cmd = observed()
    applied = cmd.request_query("alice", "q", {"max_rows_per_batch": 500, "trigger_interval_seconds": 4})
    wanted = QueryParams(parallelism=2, trigger_interval=timedelta(seconds=4), max_rows_per_batch=500)
    assert rec.control.query_requests == {"q": wanted}
    assert applied.entry.what == (
        "query_requests.q: {parallelism=2, trigger_interval_seconds=2.0} -> "
        "{parallelism=2, trigger_interval_seconds=4.0, max_rows_per_batch=500}"
    )
    assert applied.entry.details["changes"]["query_requests.q"]["to"]["max_rows_per_batch"] == 500
    clock.advance(TICK)
    record = rec.tick()
    [change] = record.plan.query_changes
    assert change.reason == Reason.OPERATOR_REQUEST and change.to_params == wanted
    assert ("rescale", ("q", 2)) in cluster.calls and cluster.queries["q"].params == wanted
    decision = rec.audit.entries(kind="decision")[0]
    assert "rate limit none -> 500 rows/batch" in decision.what and "trigger 2s -> 4s" in decision.what


def test_a_null_trigger_restarts_the_query_with_no_interval():
    # before: refused ("must be a positive number of seconds"), so a query declared without an
    # interval could not be given back its own after one was set (the operator's gap)
    clock, cluster, rec, cmd = observed()
    cmd.request_query("alice", "q", {"trigger_interval_seconds": None})
    assert rec.control.query_requests["q"].trigger_interval is None
    clock.advance(TICK)
    rec.tick()
    assert cluster.queries["q"].params.trigger_interval is None
    assert "trigger 2s -> none" in rec.audit.entries(kind="decision")[0].what


def test_requests_accumulate_until_the_next_tick():
    _, _, rec, cmd = observed()
    cmd.request_query("alice", "q", {"max_rows_per_batch": 500})
    cmd.request_query("alice", "q", {"parallelism": 4})
    assert rec.control.query_requests["q"] == QueryParams(parallelism=4, trigger_interval=timedelta(seconds=2), max_rows_per_batch=500)


@pytest.mark.parametrize(
    "name, fields, status, field, message",
    [
        pytest.param("nope", {"parallelism": 2}, 404, "name", "unknown query 'nope'; known: q", id="unknown-query"),
        pytest.param("q", {"parallelism": 17}, 422, "parallelism", "17 is outside the query's range [1, 16]", id="parallelism-above-max"),
        pytest.param("q", {"max_rows_per_batch": 0}, 422, "max_rows_per_batch", "must be at least 1", id="zero-rate-limit"),
        pytest.param("q", {"trigger_interval_seconds": 0}, 422, "trigger_interval_seconds", "must be positive", id="zero-trigger"),
        pytest.param("q", {}, 422, "body", "give at least one of", id="empty"),
        pytest.param("q", {"partitions": 3}, 422, "partitions", "not a query setting", id="unknown-field"),
    ],
)
def test_an_invalid_query_request_names_the_field(name, fields, status, field, message):
    _, _, rec, cmd = observed()
    with pytest.raises(ChangeError) as info:
        cmd.request_query("alice", name, fields)
    assert info.value.status == status and field in [f for f, _ in info.value.problems] and message in str(info.value)
    assert rec.control.query_requests == {}


def test_a_stateful_shuffle_change_the_checkpoint_cannot_honour_is_refused_up_front():
    _, _, rec, cmd = observed(stateful=True, state_store="hdfs")
    with pytest.raises(ChangeError) as info:
        cmd.request_query("alice", "q", {"shuffle_partitions": 8})
    assert info.value.status == 409 and "StatePinsShufflePartitions" in str(info.value)
    assert [field for field, _ in info.value.problems] == ["shuffle_partitions"]  # the setting refused, not the query


@pytest.mark.parametrize("status", [QueryStatus.RUNNING, QueryStatus.FINISHED], ids=["running", "finished"])
def test_a_trigger_for_an_available_now_query_is_refused_and_its_other_settings_are_taken(status):
    # before: taken (and kept pending while the query was finished), then ignored by the host,
    # which starts an available_now pipeline with availableNow whatever the interval
    _, _, rec, cmd = observed(bounded=True, trigger=None, status=status)
    with pytest.raises(ChangeError) as info:
        cmd.request_query("alice", "q", {"trigger_interval_seconds": 5})
    assert info.value.status == 409 and "BoundedQueryTrigger" in str(info.value) and "available_now" in str(info.value)
    assert [field for field, _ in info.value.problems] == ["trigger_interval_seconds"]
    assert rec.control.query_requests == {}
    cmd.request_query("alice", "q", {"trigger_interval_seconds": None, "max_rows_per_batch": 500})  # no interval: what it has
    assert rec.control.query_requests["q"] == QueryParams(parallelism=2, max_rows_per_batch=500)


def test_an_attached_query_cannot_be_restarted():
    _, _, _, cmd = observed(rescalable=False)
    with pytest.raises(ChangeError) as info:
        cmd.request_query("alice", "q", {"max_rows_per_batch": 10})
    assert info.value.status == 409


def test_query_requests_before_the_first_observation_are_refused():
    _, _, _, cmd = commands()
    with pytest.raises(ChangeError) as info:
        cmd.request_query("alice", "q", {"parallelism": 2})
    assert info.value.status == 409 and "first tick" in str(info.value)


def test_a_pending_request_can_be_cancelled():
    _, _, rec, cmd = observed()
    cmd.request_query("alice", "q", {"parallelism": 4})
    cmd.cancel_query_request("bob", "q")
    assert rec.control.query_requests == {}
    with pytest.raises(ChangeError) as info:
        cmd.cancel_query_request("bob", "q")
    assert info.value.status == 404


def test_log_level_changes_at_once_and_is_audited():
    _, _, rec, cmd = commands()
    logging.getLogger("autoscaler.reconciler")
    before = logging.getLogger("autoscaler.reconciler").level
    try:
        applied = cmd.set_log_level("alice", "debug", "autoscaler.reconciler")
        assert logging.getLogger("autoscaler.reconciler").level == logging.DEBUG
        assert applied.entry.what == f"log_level.autoscaler.reconciler: {logging.getLevelName(before)} -> DEBUG"
    finally:
        logging.getLogger("autoscaler.reconciler").setLevel(before)
    with pytest.raises(ChangeError) as info:
        cmd.set_log_level("alice", "INFO", "no.such.logger.anywhere")
    assert info.value.problems[0][0] == "logger"
    with pytest.raises(ChangeError):
        cmd.set_log_level("alice", "LOUD")
