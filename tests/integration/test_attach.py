"""attach(): the daemon in a driver the user owns, on a real local cluster."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler import attach
from autoscaler.core.model import QueryStatus, Reason
from autoscaler.runtime.config import load_settings
from autoscaler.spark.host import trigger_interval
from autoscaler.spark.pipelines import PipelineContext
from autoscaler.tools.demo.workload import trace_pipeline
from autoscaler.tools.traces import RateProfile
from tests.integration.conftest import wait_until

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(spark_session_factory):
    return spark_session_factory("local-cluster[2,1,512]")


def test_attach_observes_a_users_query_never_restarts_it_and_leaves_it_running(spark, tmp_path):
    build = trace_pipeline(profile=RateProfile.steps([(600, 200)]), start=time.time() + 2, cost_seconds=0.0002, out_dir=tmp_path / "out")
    ckpt = str(tmp_path / "ckpt")
    query = build(spark, PipelineContext("events", 2, ckpt)).queryName("events").option("checkpointLocation", ckpt)
    query = query.trigger(processingTime="1 second").start()
    run_id = str(query.runId)
    state = tmp_path / "state" / "daemon.json"
    settings = load_settings(
        None,
        {"mode": "reactive", "reconcile_interval": "1s", "state.path": str(state), "window.metrics_window": "30s"},
        environ={},
    )
    handle = attach(spark, queries=[query], parallelism={"events": 2}, settings=settings)
    try:

        def observed():
            r = handle.reconciler.last
            return r if r is not None and r.loads and r.loads[0].samples >= 2 else None

        record = wait_until(observed, 90, "ticks that see the user's batches")
        view = handle.host.views()[0]
        assert (view.name, view.status, view.rescalable) == ("events", QueryStatus.RUNNING, False)
        assert view.params.trigger_interval == timedelta(seconds=1)  # read from the running query's JVM side
        assert record.loads[0].input_rate is not None and record.loads[0].input_rate > 0  # its load reaches the decision
        # a change asked for (past the API's own check) is held for good: the daemon cannot rebuild the query
        handle.reconciler.update_control(lambda c: replace(c, query_requests={"events": replace(view.params, parallelism=4)}))
        refused = wait_until(lambda: (r := handle.reconciler.last) is not None and r.plan.refusals, 30, "the held request")
        [refusal] = refused
        assert (refusal.name, refusal.reason) == ("events", Reason.QUERY_NOT_RESCALABLE)
        assert handle.reconciler.history.events == ()  # nothing was restarted
    finally:
        handle.stop()
    try:
        assert not handle.thread.is_alive()
        assert query.isActive and str(query.runId) == run_id and query.exception() is None  # the user's query runs on
        assert state.is_file()  # the state store works as in driver mode (its directory created by the first save)
        ticks = handle.loop.ticks
        time.sleep(2.5)
        assert handle.loop.ticks == ticks  # the loop stopped
    finally:
        query.stop()


def test_a_running_querys_trigger_is_read_from_spark(spark, tmp_path):
    rate = spark.readStream.format("rate").option("rowsPerSecond", 5).load()

    def start(name, **trigger):
        writer = rate.writeStream.format("noop").queryName(name).option("checkpointLocation", str(tmp_path / name))
        return (writer.trigger(**trigger) if trigger else writer).start()

    queries = [start("every_7s", processingTime="7 seconds"), start("back_to_back"), start("once", availableNow=True)]
    try:
        # a processing-time trigger is its interval; none (batches back to back) and a one-shot
        # trigger have no interval
        assert [trigger_interval(q) for q in queries] == [timedelta(seconds=7), None, None]
    finally:
        for q in queries:
            q.stop()


def test_attach_names_a_session_setting_that_slows_the_daemon(spark):
    from autoscaler.spark.session import untimely_session_conf

    assert untimely_session_conf(spark) == []  # the test sessions are built as the daemon builds its own
    key = "spark.sql.streaming.noDataProgressEventInterval"
    spark.conf.set(key, "10000ms")  # a user's session at Spark's default
    try:
        [advice] = untimely_session_conf(spark)
    finally:
        spark.conf.set(key, "1s")
    assert advice.startswith(f"{key} is 10000ms, the daemon's own session sets 1s")
