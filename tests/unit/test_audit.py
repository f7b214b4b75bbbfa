"""The audit trail: bounded, folded holds, outcomes attached, every rescale explained."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from autoscaler.core.history import EXECUTORS
from autoscaler.core.model import ActionOutcome, QueryParams, Reason
from autoscaler.runtime.audit import DECISION, EVENT, OPERATOR, AuditTrail
from tests.fakes import LoadFeeder, query_view
from tests.unit.test_reconciler import TICK, run_for
from tests.unit.test_reconciler import make as make_default


def make(overrides=None, **cluster_kw):
    """These tests follow a quick step up and down: the target-utilization policy turns within a minute."""
    return make_default({"policy.name": "target-utilization", **(overrides or {})}, **cluster_kw)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def add(trail: AuditTrail, t: float, what: str = "x", fingerprint: str | None = None, kind: str = OPERATOR):
    return trail.add(at=at(t), kind=kind, who="alice", what=what, fingerprint=fingerprint)


def test_entries_are_listed_newest_first_and_filtered_by_kind():
    trail = AuditTrail()
    add(trail, 0, "a")
    add(trail, 1, "b", kind=DECISION)
    add(trail, 2, "c")
    assert [e.what for e in trail.entries()] == ["c", "b", "a"]
    assert [e.what for e in trail.entries(limit=2)] == ["c", "b"]
    assert [e.what for e in trail.entries(kind=OPERATOR)] == ["c", "a"]
    assert [e.id for e in trail.entries()] == [3, 2, 1]


def test_the_trail_is_bounded_by_count():
    trail = AuditTrail(max_count=3)
    for i in range(5):
        add(trail, i, str(i))
    assert [e.what for e in trail.entries()] == ["4", "3", "2"]


def test_the_trail_is_bounded_by_age_since_the_last_occurrence():
    trail = AuditTrail(max_age=timedelta(minutes=10))
    add(trail, 0, "old")
    add(trail, 60, "held", fingerprint="h")
    add(trail, 500, "held", fingerprint="h")  # still repeating: kept although it began long ago
    add(trail, 661, "new")
    assert [e.what for e in trail.entries()] == ["new", "held"]


def test_a_repeated_hold_is_folded_into_one_entry():
    trail = AuditTrail()
    first = add(trail, 0, "held", fingerprint="h")
    add(trail, 5, "held", fingerprint="h")
    folded = add(trail, 10, "held", fingerprint="h")
    assert len(trail) == 1 and folded.id == first.id
    assert (folded.repeats, folded.at, folded.last_at) == (3, at(0), at(10))
    add(trail, 15, "other")
    add(trail, 20, "held", fingerprint="h")  # interrupted: a new entry
    assert len(trail) == 3


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError):
        AuditTrail().add(at=T0, kind="gossip", who="x", what="y")


def test_entry_json_is_a_copy():
    trail = AuditTrail()
    e = trail.add(at=T0, kind=OPERATOR, who="alice", what="pause", details={"change": {"paused": [False, True]}})
    data = e.to_json()
    data["details"]["change"]["paused"][1] = "tampered"
    assert trail.get(e.id).details["change"]["paused"][1] is True
    assert data["who"] == "alice" and data["at"] == "2026-01-01T00:00:00+00:00" and data["repeats"] == 1


# --- from the reconciler -------------------------------------------------------------------------


def test_every_executor_rescale_is_explained_by_a_decision_entry():
    clock, cluster, rec = make(executors=1)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 60, rate=400)
    run_for(clock, rec, feeder, 60, rate=2500)
    run_for(clock, rec, feeder, 120, rate=400)
    changes = [e for e in rec.history.events if e.subject == EXECUTORS]
    assert {e.direction for e in changes} == {"up", "down"}
    decisions = rec.audit.entries(kind=DECISION)
    for event in changes:
        entry = next(e for e in decisions if e.at == event.at and e.details["results"])
        d = entry.details
        assert (d["decision"]["current"], d["decision"]["target"]) == (event.from_value, event.to_value)
        assert d["decision"]["reason"] == event.reason.value == entry.reason
        assert d["proposal"]["reason"] and d["proposal"]["message"]
        assert d["inputs"]["queries"]["q"]["input_rows_per_second"] is not None
        assert d["inputs"]["executors"]["alive"] == event.from_value
        assert any(r["action"] == "set_target" and r["ok"] for r in d["results"])
        assert entry.what.startswith(f"executors {event.from_value} -> {event.to_value}")


def test_a_held_scale_down_is_recorded_once_with_its_reason_and_repeats():
    clock, cluster, rec = make(executors=1)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 90, rate=2500)
    run_for(clock, rec, feeder, 25, rate=400)  # below the 30 s scale-down delay
    holds = [e for e in rec.audit.entries(kind=DECISION) if e.reason == Reason.SCALE_DOWN_DELAYED.value]
    assert len(holds) == 1
    assert holds[0].repeats >= 3 and "held at 4" in holds[0].what


def test_a_query_rescale_gets_its_measured_pause_attached():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=4)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    clock.advance(TICK)
    rec.tick()
    clock.advance(TICK)
    rec.tick()  # the outcome arrives with the next snapshot
    [entry] = [e for e in rec.audit.entries(kind=DECISION) if e.details["plan"]["query_changes"]]
    assert entry.what == "query q: partitions 2 -> 4 (PartitionsBelowCores)"
    [result] = [r for r in entry.details["results"] if r["action"] == "rescale"]
    assert result["outcome"]["ok"] and result["outcome"]["pause_seconds"] == 2.0
    assert rec.audit.entries(kind=EVENT) == []


def test_a_failed_rescale_is_attached_and_also_raised_as_an_event():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=4)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    clock.advance(TICK)
    rec.tick()
    failed = ActionOutcome("q", "rescale", False, clock.now(), clock.now(), "checkpoint locked", None,
                           QueryParams(2), QueryParams(4))
    cluster.outcomes = [failed]
    clock.advance(TICK)
    rec.tick()
    [event] = rec.audit.entries(kind=EVENT)
    assert event.reason == Reason.QUERY_FAILED.value and "rescale failed (partitions 2 -> 4): checkpoint locked" in event.what
    decision = rec.audit.get(event.details["decision_id"])
    assert decision is not None
    # the decision that started the rescale carries how it ended
    [outcome] = [r["outcome"] for r in decision.details["results"] if r["action"] == "rescale"]
    assert outcome["ok"] is False and outcome["message"] == "checkpoint locked"


def test_paused_ticks_record_the_wanted_change_as_not_applied():
    clock, cluster, rec = make(executors=1, overrides={"policy.name": "static", "policy.params": {"executors": 3}})
    rec.update_control(lambda c: replace(c, paused=True))
    for _ in range(3):
        clock.advance(TICK)
        rec.tick()
    [entry] = rec.audit.entries(kind=DECISION)
    assert entry.what == "executors 1 -> 3 (StaticTarget) [paused: not applied]"
    assert entry.reason == Reason.PAUSED.value and entry.repeats == 3 and entry.details["paused"]


def test_every_rescale_of_a_mixed_run_is_explained_with_its_pause():
    from autoscaler.runtime.audit import explain_event

    clock, cluster, rec = make(executors=1)
    cluster.add_query(query_view(parallelism=2, max_parallelism=16))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 90, rate=2500)
    run_for(clock, rec, feeder, 150, rate=300)
    subjects = {e.subject for e in rec.history.events}
    assert subjects == {EXECUTORS, "q"}, rec.history.events  # executor changes and query rescales
    for event in rec.history.events:
        why = explain_event(rec.audit, event)
        assert why is not None, event
        assert why["reason"] == event.reason.value
        if event.subject == "q":
            assert why["pause_seconds"] == 2.0


def test_reactive_mode_says_an_executor_change_is_not_applied():
    clock, cluster, rec = make(overrides={"policy.name": "reactive", "mode": "reactive", "executors.max": 12}, executors=8)
    rec.update_control(lambda c: replace(c, max_executors=6))
    for _ in range(3):
        clock.advance(TICK)
        rec.tick()
    [entry] = rec.audit.entries(kind=DECISION)
    assert entry.what == "executors 8 -> 6 (BoundedByMax) [reactive mode: not applied]" and entry.repeats == 3
    assert entry.reason == Reason.USE_AVAILABLE.value and len(cluster.alive) == 8
