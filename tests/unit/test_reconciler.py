"""Scenario tests: the real reconciler over many ticks on a fake clock against a fake cluster."""

from datetime import timedelta

import pytest

from autoscaler.core.model import Mode, Reason
from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.config import load_settings
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.reconciler import Reconciler
from tests.fakes import FakeCluster, FlakyStateStore, LoadFeeder, query_view

TICK = timedelta(seconds=5)


def make(overrides=None, **cluster_kw):
    clock = FakeClock()
    settings = load_settings(
        None,
        {
            "executors.min": 1,
            "executors.max": 6,
            "reconcile_interval": "5s",
            "request_timeout": "30s",
            "normalize.scale_down_delay": "30s",
            "normalize.stabilization": "10s",
            "window.metrics_window": "30s",
            **(overrides or {}),
        },
        environ={},
    )
    cluster = FakeCluster(clock.now(), **cluster_kw)
    rec = Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock)
    return clock, cluster, rec


def run_for(clock, rec, feeder, seconds, rate):
    records = []
    for _ in range(int(seconds / TICK.total_seconds())):
        clock.advance(TICK)
        if feeder:
            feeder.run_until(clock.now(), rate)
        records.append(rec.tick())
    return records


def test_active_mode_follows_a_load_step_up_and_down():
    clock, cluster, rec = make(executors=1)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 60, rate=400)
    assert len(cluster.alive) == 1
    up = run_for(clock, rec, feeder, 60, rate=2500)
    # converges within two decisions to 4 executors (8 partitions -> 4 cores give two full waves)
    decisions = [r.decision.target for r in up if r.decision.changes]
    assert decisions[:1] == [4] and len(decisions) <= 2
    assert len(cluster.alive) == 4
    # the default policy keeps capacity it bought for at least its 5-minute dwell and until its idle
    # cores have cost a rescale (3 minutes of the cluster); then the normalization's delay
    down = run_for(clock, rec, feeder, 15 * 60, rate=400)
    assert len(cluster.alive) == 1
    first_down = next(r for r in down if r.decision.proposed == 1)
    assert first_down.decision.reason == Reason.SCALE_DOWN_DELAYED
    removed = [c for c in cluster.calls if c[0] == "remove"]
    assert removed, "scale-down removes named executors"


def test_lost_executor_is_detected_within_one_tick_and_replaced():
    clock, cluster, rec = make(executors=1)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 90, rate=2500)
    assert len(cluster.alive) == 4
    cluster.lose("2")  # mid-batch: the next batches run on 3 executors
    [record] = run_for(clock, rec, feeder, 5, rate=2500)
    assert record.executors_lost == ("2",)
    assert record.notable
    run_for(clock, rec, feeder, 10, rate=2500)
    assert len(cluster.alive) == 4  # re-asserted target brings a replacement


def test_request_not_granted_falls_back_to_reactive_behaviour():
    clock, cluster, rec = make(executors=1, grant=False)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    records = run_for(clock, rec, feeder, 90, rate=2500)
    modes = [(r.mode.mode, r.mode.fallback, r.mode.reason) for r in records]
    assert (Mode.ACTIVE, False, Reason.CAN_REQUEST_EXECUTORS) in modes
    assert records[-1].mode.reason == Reason.REQUEST_NOT_GRANTED and records[-1].mode.fallback
    assert records[-1].executors_pending == 3
    assert len(cluster.alive) == 1  # never failed, kept running on what exists


def test_an_error_in_one_tick_backs_off_and_recovers():
    clock, cluster, rec = make(executors=1)
    loop = ReconcileLoop(rec, clock, TICK)
    cluster.fail_next_observe = RuntimeError("driver REST timed out")
    assert loop.run_once() is False
    assert loop.errors["observe"] == 1
    assert loop.next_delay() == 10.0  # 5 s x 2^1
    assert loop.run_once() is True
    assert loop.next_delay() == 5.0


def test_a_failing_action_does_not_stop_the_tick():
    clock, cluster, rec = make(executors=1, overrides={"policy.name": "static", "policy.params": {"executors": 3}})
    cluster.fail_next_set_target = RuntimeError("py4j down")
    clock.advance(TICK)
    record = rec.tick()
    assert [r.ok for r in record.results] == [False]
    clock.advance(TICK)
    record = rec.tick()
    assert record.results[-1].ok


def test_reactive_mode_rescales_queries_to_the_cores_that_appear():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    for _ in range(2):
        cluster.add_worker(clock.now())
    clock.advance(TICK)
    record = rec.tick()
    assert record.mode.mode == Mode.REACTIVE
    assert [(c.name, c.to_params.parallelism, c.reason) for c in record.plan.query_changes] == [
        ("q", 4, Reason.PARTITIONS_BELOW_CORES)
    ]
    assert all(c[0] != "set_target" for c in cluster.calls)


def test_auto_mode_is_reactive_when_executors_cannot_be_requested():
    clock, cluster, rec = make(executors=2, can_request=False)
    clock.advance(TICK)
    record = rec.tick()
    assert record.mode.mode == Mode.REACTIVE and record.mode.reason == Reason.CANNOT_REQUEST_EXECUTORS


@pytest.mark.parametrize("flag", ["dry_run", "paused"])
def test_dry_run_and_pause_decide_but_do_not_act(flag):
    clock, cluster, rec = make(executors=1, overrides={"policy.name": "static", "policy.params": {"executors": 3}})
    from dataclasses import replace

    rec.update_control(lambda c: replace(c, **{flag: True}))
    clock.advance(TICK)
    record = rec.tick()
    assert record.decision.target == 3
    assert record.results == () and cluster.calls == []


def test_manual_target_overrides_policy_within_bounds():
    clock, cluster, rec = make(executors=1)
    from dataclasses import replace

    rec.update_control(lambda c: replace(c, manual_executors=99))
    clock.advance(TICK)
    record = rec.tick()
    assert (record.decision.target, record.decision.reason) == (6, Reason.MANUAL_TARGET)


def test_measured_rescale_pause_lands_in_history():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=4)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    clock.advance(TICK)
    rec.tick()
    clock.advance(TICK)
    rec.tick()
    assert rec.history.restart_pauses() == [timedelta(seconds=2)]


def test_an_operator_request_already_in_effect_is_dropped_and_does_not_pin_the_query():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    from dataclasses import replace

    current = cluster.queries["q"].params
    rec.update_control(lambda c: replace(c, query_requests={"q": current}))
    clock.advance(TICK)
    rec.tick()
    assert rec.control.query_requests == {}


def test_an_operator_rate_limit_request_rescales_the_query_and_is_consumed_once_in_force():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    from dataclasses import replace

    wanted = replace(cluster.queries["q"].params, max_rows_per_batch=500, trigger_interval=timedelta(seconds=4))
    rec.update_control(lambda c: replace(c, query_requests={"q": wanted}))
    clock.advance(TICK)
    record = rec.tick()
    [change] = record.plan.query_changes
    assert (change.reason, change.to_params) == (Reason.OPERATOR_REQUEST, wanted)
    assert rec.control.query_requests == {"q": wanted}  # started, not yet seen in force
    clock.advance(TICK)
    assert rec.tick().plan.query_changes == ()
    assert cluster.queries["q"].params == wanted and rec.control.query_requests == {}


def _request_limit(rec, cluster, rows):
    from dataclasses import replace

    wanted = replace(cluster.queries["q"].params, max_rows_per_batch=rows)
    rec.update_control(lambda c: replace(c, query_requests={"q": wanted}))
    return wanted


def test_an_operator_request_is_kept_while_its_restart_runs_and_survives_a_daemon_restart():
    from autoscaler.runtime.state import MemoryStateStore

    store = MemoryStateStore()
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2, slow_rescales=True, rescale_pause=timedelta(seconds=12))
    rec = Reconciler(settings=rec.settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    wanted = _request_limit(rec, cluster, 500)
    clock.advance(TICK)
    assert [c.to_params for c in rec.tick().plan.query_changes] == [wanted]  # the restart starts
    clock.advance(TICK)
    rec.tick()
    assert rec.control.query_requests == {"q": wanted}  # still restarting: kept, and saved
    # the daemon dies mid-restart; the query comes back with its old settings; a new daemon on the same state
    cluster.restarting.clear()
    from dataclasses import replace

    cluster.queries["q"] = replace(cluster.queries["q"], status=cluster.queries["q"].status.RUNNING)
    again = Reconciler(settings=rec.settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    assert again.control.query_requests == {"q": wanted}
    clock.advance(TICK)
    [change] = again.tick().plan.query_changes
    assert (change.reason, change.to_params) == (Reason.OPERATOR_REQUEST, wanted)
    for _ in range(4):
        clock.advance(TICK)
        again.tick()
    assert cluster.queries["q"].params == wanted and again.control.query_requests == {}


def test_a_request_that_names_no_shuffle_partitions_is_done_once_the_checkpoint_pins_them():
    """The checkpoint pins the shuffle partitions once a batch ran: a request made before that
    (none named) is in force with the pinned ones, not asked for again and again."""
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2, slow_rescales=True)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    cluster.pinned_shuffle = 200
    _request_limit(rec, cluster, 500)
    rescales = []
    for _ in range(8):
        clock.advance(TICK)
        rescales += rec.tick().plan.query_changes
    assert len(rescales) == 1 and rec.control.query_requests == {}
    assert cluster.queries["q"].params.max_rows_per_batch == 500 and cluster.queries["q"].params.shuffle_partitions == 200


def test_an_operator_request_whose_restart_fails_is_dropped_not_retried_every_tick():
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2, slow_rescales=True)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    cluster.fail_rescales.add("q")
    _request_limit(rec, cluster, 500)
    rescales = []
    for _ in range(6):
        clock.advance(TICK)
        rescales += rec.tick().plan.query_changes
    assert len(rescales) == 1 and rec.control.query_requests == {}
    assert cluster.queries["q"].params.max_rows_per_batch is None  # back on its old settings


def test_saved_overrides_that_no_longer_fit_the_configuration_are_dropped_on_restart():
    from autoscaler.core.control import ControlState
    from autoscaler.runtime.state import MemoryStateStore

    store = MemoryStateStore()
    saved = ControlState(paused=True, min_executors=5, policy_params={"executors": 2})
    store.save({"control": saved.to_json(), "history": {}})
    clock, cluster, _ = make(executors=1)
    settings = load_settings(None, {"executors.max": 4}, environ={})  # default policy: no `executors` param
    rec = Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    assert rec.control.paused  # what still fits is kept
    assert (rec.control.min_executors, rec.control.policy_params) == (None, None)
    [event] = rec.audit.entries()
    assert "min_executors" in event.what and "policy_params" in event.what


def test_partitions_are_aligned_to_where_active_mode_is_heading_not_to_executors_still_arriving():
    # 6 partitions on the 5 executors that exist would waste 40% (6 tasks in 2 waves), but the
    # target is 6: re-aligning to 5 now would restart the query twice (5, then 6 again)
    clock, cluster, rec = make(executors=5, overrides={"policy.name": "static", "policy.params": {"executors": 6}})
    cluster.add_query(query_view(parallelism=6, max_parallelism=64))
    clock.advance(TICK)
    record = rec.tick()
    assert record.decision.target == 6
    assert record.plan.query_changes == ()
    assert not [c for c in cluster.calls if c[0] == "rescale"]


def test_a_dry_run_recommendation_is_recorded_in_the_audit_trail():
    from dataclasses import replace

    clock, cluster, rec = make(executors=1, overrides={"policy.name": "static", "policy.params": {"executors": 1}})
    rec.update_control(lambda c: replace(c, dry_run=True, manual_executors=2))
    clock.advance(TICK)
    record = rec.tick()
    assert record.decision.target == 2 and record.results == ()
    assert record.notable
    [entry] = rec.audit.entries(limit=1, kind="decision")
    assert entry.what == "executors 1 -> 2 (ManualTarget) [dry run: not applied]"


def test_reactive_mode_keeps_partitions_on_the_cores_that_exist_whatever_the_policy_wants():
    # the default policy wants more executors (and partitions for them) under this load;
    # reactive mode will not request them, so the query keeps partitions fitting 2 cores
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2)
    cluster.add_query(query_view(parallelism=2, max_parallelism=64))
    feeder = LoadFeeder(cluster, "q", clock.now())
    records = run_for(clock, rec, feeder, 120, rate=2500)
    assert any(r.proposal.executors is not None and r.proposal.executors > 2 for r in records)
    assert not [c for r in records for c in r.plan.query_changes]
    assert all(c[0] != "set_target" for c in cluster.calls)


@pytest.mark.parametrize("mode, remaining", [("active", 6), ("reactive", 8)])
def test_a_lowered_max_removes_executors_even_without_a_policy_opinion(mode, remaining):
    """`reactive` (no opinion on the count) in active mode: the bound still holds; reactive mode never acts."""
    clock, cluster, rec = make(overrides={"policy.name": "reactive", "mode": mode, "executors.max": 12}, executors=8)
    from dataclasses import replace

    rec.update_control(lambda c: replace(c, max_executors=6))
    clock.advance(TICK)
    record = rec.tick()
    assert (record.decision.target, record.decision.reason) == (6, Reason.BOUNDED_MAX)
    clock.advance(TICK * 3)
    rec.tick()
    assert len(cluster.alive) == remaining


def make_with_store(store, **kw):
    clock, cluster, _ = make(**kw)
    settings = load_settings(None, {"executors.max": 6, "policy.name": "static", "policy.params": {"executors": 3}}, environ={})
    rec = Reconciler(settings=settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    return clock, cluster, rec


def test_a_state_store_that_cannot_be_written_does_not_lose_the_ticks_record(restore_logging):
    import structlog

    store = FlakyStateStore()
    clock, cluster, rec = make_with_store(store, executors=1)
    store.broken = True
    records = []
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            clock.advance(TICK)
            records.append(rec.tick())  # no TickError: the actions of the tick are done and recorded
        assert records[0].decision.target == 3 and rec.last is records[-1]
        assert [e.what for e in rec.audit.entries(kind="decision")][-1].startswith("executors 1 -> 3")
        assert rec.state_error is not None and "No space left on device" in rec.state_error
        store.broken = False
        clock.advance(TICK)
        rec.tick()
        assert rec.state_error is None
    # logged once while it lasts (not a line a tick), and once when it is over
    told = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("state_save")]
    assert told == [("state_save_failed", "error"), ("state_saved", "info")]
    assert store.load()["history"]["events"], "the change made while the store failed is saved once it works"


class CountingStore(FlakyStateStore):
    """A state store that counts its saves."""

    def __init__(self) -> None:
        super().__init__()
        self.saves = 0

    def save(self, state) -> None:
        super().save(state)
        self.saves += 1


def test_a_tick_that_changed_only_the_scale_down_window_saves_at_most_once_a_minute():
    """A save writes the whole state (every query's remembered rates); a tick that only added a
    recommendation to the scale-down window does not write it again within a minute, a tick
    that changed what a restarted daemon must not lose writes it at once."""
    from dataclasses import replace

    store = CountingStore()
    clock, cluster, rec = make_with_store(store, executors=1)
    clock.advance(TICK)
    rec.tick()  # 1 -> 3 executors: an event, saved
    assert store.saves == 1 and store.load()["history"]["events"]
    for _ in range(24):  # two minutes at 3 executors: nothing but the window changes
        clock.advance(TICK)
        rec.tick()
    assert store.saves == 3, "once a minute"
    assert store.load()["history"]["recommendations"][-1][0] == clock.now().isoformat()
    clock.advance(TICK)
    rec.tick()
    assert store.saves == 3 and store.load()["history"]["recommendations"][-1][0] == (clock.now() - TICK).isoformat()
    rec.update_control(lambda c: replace(c, max_executors=2))  # saved by the change itself ...
    clock.advance(TICK)
    rec.tick()  # ... and the tick that scales 3 -> 2 saves at once
    assert store.saves == 5 and store.load()["history"]["events"][-1]["to"] == 2
    clock.advance(TICK)
    rec.tick()
    assert store.saves == 5
    # a recommendation above the newest saved is saved at once (a restart must not forget it)
    rec.history = rec.history.with_recommendation(clock.now(), 6)
    rec._save_tick(clock.now())
    assert store.saves == 6 and store.load()["history"]["recommendations"][-1] == [clock.now().isoformat(), 6]


def test_a_restarted_daemon_takes_the_newest_saved_recommendation_as_made_when_it_starts():
    """What it lost of the scale-down window (at most a minute, none of it above the newest
    saved recommendation) is covered: its scale-down waits at most one delay longer, never less."""
    store = CountingStore()
    clock, cluster, rec = make_with_store(store, executors=1)
    for _ in range(6):
        clock.advance(TICK)
        rec.tick()
    saved = store.load()["history"]["recommendations"]
    assert saved[-1][0] < clock.now().isoformat(), "the newest ticks were not saved"
    clock.advance(timedelta(minutes=3))  # the daemon was down
    again = Reconciler(settings=rec.settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    assert again.history.recommendations[-1] == (clock.now(), saved[-1][1])
    assert [(a.isoformat(), n) for a, n in again.history.recommendations[:-1]] == [tuple(r) for r in saved]


def test_an_operator_change_that_cannot_be_saved_is_not_applied():
    from dataclasses import replace

    from autoscaler.runtime.state import StateStoreError

    store = FlakyStateStore()
    _, _, rec = make_with_store(store, executors=1)
    policy = rec.policy
    store.broken = True
    with pytest.raises(StateStoreError, match="No space left"):
        rec.update_control(lambda c: replace(c, paused=True, policy_params={"executors": 5}))
    assert not rec.control.paused and rec.control.policy_params is None and rec.policy is policy
    store.broken = False
    assert rec.update_control(lambda c: replace(c, paused=True)).paused and store.load()["control"]["paused"] is True


def test_each_hosted_query_is_saved_as_it_runs_for_the_next_daemon():
    from dataclasses import replace

    from autoscaler.core.plan import QueryResume
    from autoscaler.runtime.state import MemoryStateStore
    from autoscaler.runtime.state.schema import restore_state

    store = MemoryStateStore()
    clock, cluster, rec = make(overrides={"mode": "reactive"}, executors=2)
    rec = Reconciler(settings=rec.settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, state_store=store)
    declared = query_view(parallelism=2, max_parallelism=64).params
    cluster.add_query(replace(query_view(parallelism=2, max_parallelism=64), declared=declared))
    wanted = _request_limit(rec, cluster, 700)
    for _ in range(2):
        clock.advance(TICK)
        rec.tick()
    assert restore_state(store.load(), "test").queries == {"q": QueryResume(wanted, declared)}


def test_two_queries_one_light_beside_one_at_its_partitions_limit_do_not_grow_the_pool():
    # a at 100 rows/s needs a core; b at 3000 rows/s can use 4 (8 partitions): 6 executors are
    # more than enough. The default policy judges each query on all the executors, so b's hold
    # meant all 6; summed with a's release to 1, the policy asked for 7 as a scale-down, and
    # on each tick after for one more: 6 -> 7 -> 8 -> 9 -> 10 -> 11 in 30 minutes
    clock, cluster, rec = make(executors=6, overrides={"executors.max": 12})
    cluster.add_query(query_view(name="a", parallelism=8, rescalable=False, max_parallelism=8))
    cluster.add_query(query_view(name="b", parallelism=8, rescalable=False, max_parallelism=8))
    light, busy = LoadFeeder(cluster, "a", clock.now()), LoadFeeder(cluster, "b", clock.now())
    sizes = []
    for _ in range(int(1800 / TICK.total_seconds())):
        clock.advance(TICK)
        light.run_until(clock.now(), 100.0)
        busy.run_until(clock.now(), 3000.0)
        record = rec.tick()
        sizes.append(len(cluster.alive))
        assert not (record.proposal.reason == Reason.SCALE_DOWN_FOR_LOAD and record.proposal.executors > record.decision.current), record.proposal
    assert max(sizes) == 6
