"""Metrics on a fresh registry per test, fed by the real reconciler on the fake cluster."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.ops.metrics import PREFIX, Metrics
from autoscaler.runtime.loop import ReconcileLoop
from tests.fakes import LoadFeeder, query_view
from tests.unit.test_reconciler import TICK, run_for
from tests.unit.test_reconciler import make as make_default


def make(overrides=None, **cluster_kw):
    """These tests follow a quick step up and down: the target-utilization policy turns within a minute."""
    return make_default({"policy.name": "target-utilization", **(overrides or {})}, **cluster_kw)

APP = "app"
ALLOWED_LABELS = {"application", "query", "mode", "direction", "reason", "phase", "action", "result", "status", "change",
                  "version", "policy", "le"}


def wired(overrides=None, **cluster_kw):
    clock, cluster, rec = make(overrides, **cluster_kw)
    registry = CollectorRegistry()
    metrics = Metrics(registry, application=APP, policy=rec.settings.policy.name)
    metrics.configure(rec.settings)
    rec.on_tick = metrics.observe_tick
    return clock, cluster, rec, registry, metrics


def value(registry, name, **labels):
    return registry.get_sample_value(name, {"application": APP, **labels})


def test_gauges_follow_a_load_step():
    clock, cluster, rec, reg, _ = wired(executors=1)
    cluster.add_query(query_view(parallelism=8, rescalable=False, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 60, rate=400)
    low_rate = value(reg, f"{PREFIX}query_input_rows_per_second", query="q")
    assert low_rate == pytest.approx(400, rel=0.1)
    assert value(reg, f"{PREFIX}executors") == 1
    run_for(clock, rec, feeder, 60, rate=2500)
    assert value(reg, f"{PREFIX}query_input_rows_per_second", query="q") == pytest.approx(2500, rel=0.1)
    assert value(reg, f"{PREFIX}executors") == 4 and value(reg, f"{PREFIX}executors_target") == 4
    assert value(reg, f"{PREFIX}executor_cores") == 4
    assert value(reg, f"{PREFIX}query_capacity_rows_per_second", query="q") > 2500
    assert value(reg, f"{PREFIX}query_lag_seconds", query="q") is not None
    assert value(reg, f"{PREFIX}query_batch_duration_seconds", query="q") > 0
    assert value(reg, f"{PREFIX}query_partitions", query="q") == 8
    assert value(reg, f"{PREFIX}query_status", query="q", status="running") == 1
    assert value(reg, f"{PREFIX}query_status", query="q", status="failed") == 0
    assert value(reg, f"{PREFIX}decisions_total", direction="up", reason="ScaleUpForLoad") >= 1
    assert value(reg, f"{PREFIX}executor_rescales_total", direction="up") >= 1
    assert value(reg, f"{PREFIX}actions_total", action="set_target", result="ok") >= 1
    assert value(reg, f"{PREFIX}mode", mode="active") == 1 and value(reg, f"{PREFIX}mode", mode="reactive") == 0
    assert value(reg, f"{PREFIX}configured_mode", mode="auto") == 1
    assert value(reg, f"{PREFIX}last_decision_timestamp_seconds") > 1.7e9
    assert value(reg, f"{PREFIX}reconcile_duration_seconds_count") == 24
    run_for(clock, rec, feeder, 120, rate=400)
    assert value(reg, f"{PREFIX}executors") == 1
    assert value(reg, f"{PREFIX}decisions_total", direction="hold", reason="ScaleDownDelayed") >= 1
    assert value(reg, f"{PREFIX}executor_rescales_total", direction="down") >= 1
    assert value(reg, f"{PREFIX}actions_total", action="remove", result="ok") >= 1


def test_a_query_that_goes_away_loses_all_its_label_sets():
    clock, cluster, rec, reg, _ = wired(overrides={"mode": "reactive"}, executors=4)
    cluster.add_query(query_view("q", parallelism=2, max_parallelism=64))
    cluster.add_query(query_view("other", parallelism=4, max_parallelism=4))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 30, rate=400)
    assert value(reg, f"{PREFIX}query_rescales_total", query="q", result="ok") == 1
    assert value(reg, f"{PREFIX}query_rescale_pause_seconds_count", query="q") == 1
    del cluster.queries["q"]
    clock.advance(TICK)
    rec.tick()
    text = generate_latest(reg).decode()
    assert 'query="q"' not in text
    assert 'query="other"' in text


def test_unknown_values_are_absent_not_zero():
    clock, cluster, rec, reg, _ = wired(overrides={"mode": "reactive"}, executors=2)
    cluster.add_query(query_view(parallelism=2, max_parallelism=2))  # no batches yet
    clock.advance(TICK)
    rec.tick()
    assert value(reg, f"{PREFIX}executors_requested") is None  # never requested in reactive mode
    assert value(reg, f"{PREFIX}query_input_rows_per_second", query="q") is None
    assert value(reg, f"{PREFIX}query_max_rows_per_batch", query="q") is None  # no rate limit
    assert value(reg, f"{PREFIX}query_trigger_interval_seconds", query="q") == 2


def test_errors_are_counted_by_phase_and_every_phase_starts_at_zero():
    clock, cluster, rec, reg, metrics = wired(executors=1)
    loop = ReconcileLoop(rec, clock, TICK, on_error=lambda phase, exc: metrics.tick_failed(phase))
    assert value(reg, f"{PREFIX}reconcile_errors_total", phase="observe") == 0
    cluster.fail_next_observe = RuntimeError("driver REST timed out")
    loop.run_once()
    assert value(reg, f"{PREFIX}reconcile_errors_total", phase="observe") == 1
    assert value(reg, f"{PREFIX}reconcile_errors_total", phase="policy") == 0


def test_paused_and_dry_run_gauges_and_not_applied_decisions():
    clock, cluster, rec, reg, _ = wired(executors=1, overrides={"policy.name": "static", "policy.params": {"executors": 3}})
    from dataclasses import replace

    rec.update_control(lambda c: replace(c, paused=True))
    clock.advance(TICK)
    rec.tick()
    assert value(reg, f"{PREFIX}paused") == 1
    assert value(reg, f"{PREFIX}decisions_total", direction="up", reason="Paused") == 1
    rec.update_control(lambda c: replace(c, paused=False, dry_run=True))
    clock.advance(TICK)
    rec.tick()
    assert value(reg, f"{PREFIX}paused") == 0 and value(reg, f"{PREFIX}dry_run") == 1
    assert value(reg, f"{PREFIX}decisions_total", direction="up", reason="DryRun") == 1
    assert value(reg, f"{PREFIX}executors_proposed") == 3


def test_operator_changes_and_configuration_values():
    _, _, rec, reg, metrics = wired(executors=1)
    metrics.operator_change("pause")
    assert value(reg, f"{PREFIX}operator_changes_total", change="pause") == 1
    assert value(reg, f"{PREFIX}slo_target_lag_seconds") == rec.settings.slo.target_lag.total_seconds()
    assert value(reg, f"{PREFIX}reconcile_interval_seconds") == 5
    assert reg.get_sample_value(f"{PREFIX}build_info", {"application": APP, "version": "0.1.0", "policy": "target-utilization"}) == 1


def test_names_units_and_labels_follow_the_conventions():
    clock, cluster, rec, reg, _ = wired(overrides={"mode": "reactive"}, executors=4)
    cluster.add_query(query_view("q", parallelism=2, max_parallelism=64))
    feeder = LoadFeeder(cluster, "q", clock.now())
    run_for(clock, rec, feeder, 30, rate=400)
    for family in reg.collect():
        assert family.name.startswith(PREFIX), family.name
        assert not family.name.endswith("_ms") and "millis" not in family.name
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, sample
            assert not sample.name.endswith("_created"), sample.name
            if family.type == "counter":
                assert sample.name.endswith("_total")
    assert "spark_autoscaler_executors_lost_total" in Metrics.names(reg)
    assert "spark_autoscaler_query_rescale_pause_seconds_bucket" in Metrics.names(reg)


def test_lost_executors_are_counted_without_their_ids():
    clock, cluster, rec, reg, _ = wired(executors=3, overrides={"policy.name": "static", "policy.params": {"executors": 3}})
    clock.advance(TICK)
    rec.tick()
    cluster.lose("1")
    clock.advance(TICK)
    rec.tick()
    assert value(reg, f"{PREFIX}executors_lost_total") == 1
    assert '"1"' not in generate_latest(reg).decode().replace('le="1.0"', "")
