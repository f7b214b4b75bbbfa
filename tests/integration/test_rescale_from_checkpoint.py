"""Rescaling queries from their latest checkpoint on a real local cluster."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.core.model import QueryChange, QueryStatus, Reason
from autoscaler.runtime.clock import SystemClock
from autoscaler.runtime.config import load_settings
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.spark.checkpoint import read_checkpoint
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost
from autoscaler.spark.observer import SparkObserver
from autoscaler.spark.pipelines import PipelineContext, PipelineSpec
from autoscaler.tools.demo.source import NAME, register
from autoscaler.tools.demo.workload import drain, trace_pipeline
from autoscaler.tools.traces import RateProfile
from tests.integration.conftest import (
    assert_every_row_once,
    batches_since,
    newest,
    wait_until,
)

pytestmark = pytest.mark.spark

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


@pytest.fixture(scope="module")
def spark(spark_session_factory):
    return spark_session_factory("local-cluster[2,1,512]")


def host_for(spark, specs, root):
    executors = SparkExecutors(spark)
    return QueryHost(spark, specs, checkpoint_root=root, clock=SystemClock(), registered_cores=executors.registered_cores), executors


def next_outcome(host, collected, timeout=120):
    def fetch():
        collected.extend(host.take_outcomes())
        return collected[-1] if collected else None

    outcome = wait_until(fetch, timeout, "the rescale to complete")
    collected.clear()
    return outcome


def test_query_rescaled_several_times_from_its_checkpoint_loses_and_duplicates_nothing(spark, tmp_path):
    profile = RateProfile.steps([(900, 400)])
    start = time.time() + 3
    build = trace_pipeline(profile=profile, start=start, cost_seconds=0.0002, out_dir=tmp_path / "out")
    spec = PipelineSpec("multi", build, trigger=timedelta(seconds=1), initial_parallelism=2, max_parallelism=8)
    host, _ = host_for(spark, [spec], tmp_path / "ckpt")
    host.prepare(2)
    host.start_all()
    collected = []
    pauses = []
    try:
        for target in (4, 3, 1, 2):
            seen = newest(host.views()[0].samples)
            wait_until(lambda seen=seen: batches_since(host.views()[0].samples, seen) >= 2, 90, "batches at the current scale")
            view = host.views()[0]
            change = QueryChange("multi", view.params, replace(view.params, parallelism=target), Reason.OPERATOR_REQUEST)
            assert host.rescale(change, SystemClock().now())
            outcome = next_outcome(host, collected)
            assert outcome.ok, outcome.message
            assert outcome.pause is not None and outcome.pause > timedelta(0)
            pauses.append(outcome.pause.total_seconds())
            view = host.views()[0]
            assert view.status == QueryStatus.RUNNING and view.params.parallelism == target
            # the new run's first batch with rows was read by Spark with `target` tasks (as the
            # sink saw it on the executors, not as the host asked for it)
            def first_with_rows():
                v = host.views()[0]
                return next((s for s in v.samples if s.started_at >= v.run_started_at and s.input_rows > 0), None)

            first = wait_until(first_with_rows, 60, "a batch with rows in the new run")
            record = json.loads((tmp_path / "out" / f"batch-{first.batch_id}.json").read_text())
            assert record["partitions"] == target, record
    finally:
        host.stop_all()
    assert len(pauses) == 4
    drain(spark, build, "multi", tmp_path / "ckpt" / "multi", 2)
    assert assert_every_row_once(tmp_path / "out", tmp_path / "ckpt" / "multi") > 1000


def stateful_pipeline(profile: RateProfile, start: float, out: Path, provider: str | None):
    """Counts rows per (id % 10) in update mode; the sink keeps each batch's updates (idempotent)."""
    out.mkdir(parents=True, exist_ok=True)

    def sink(df, batch_id):
        rows = [r.asDict() for r in df.collect()]
        path = out / f"batch-{batch_id}.json"
        tmp = path.with_name("." + path.name)
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, path)

    def build(spark, ctx: PipelineContext):
        from pyspark.sql import functions as F

        register(spark)
        if provider:
            spark.conf.set(PROVIDER, provider)
        else:
            spark.conf.unset(PROVIDER)
        src = (
            spark.readStream.format(NAME)
            .option("profile", profile.encode())
            .option("start", repr(start))
            .option("numPartitions", str(ctx.parallelism))
            .load()
        )
        counts = src.groupBy((F.col("id") % 10).alias("k")).agg(F.count("*").alias("n"), F.max("id").alias("m"))
        return counts.writeStream.outputMode("update").foreachBatch(sink)

    return build


def final_state(out: Path) -> dict[int, dict]:
    state: dict[int, dict] = {}
    for path in sorted(out.glob("batch-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        for row in json.loads(path.read_text()):
            state[row["k"]] = row
    return state


def start_stateful(spark, tmp_path, name, provider):
    profile = RateProfile.steps([(900, 200)])
    start = time.time() + 3
    build = stateful_pipeline(profile, start, tmp_path / "out", provider)
    spec = PipelineSpec(name, build, trigger=timedelta(seconds=1), initial_parallelism=2, shuffle_partitions=4)
    host, executors = host_for(spark, [spec], tmp_path / "ckpt")
    host.prepare(2)
    host.start_all()
    wait_until(lambda: len(host.views()[0].samples) >= 3 and host.views()[0].stateful, 120, "stateful batches")
    return host, executors, build


def test_stateful_shuffle_change_is_refused_on_the_default_state_store(spark, tmp_path):
    host, executors, _ = start_stateful(spark, tmp_path, "counts", provider=None)
    try:
        view = host.views()[0]
        assert (view.state_store, view.params.shuffle_partitions) == ("hdfs", 4)
        settings = load_settings(None, {"mode": "reactive", "policy.name": "reactive"}, environ={})
        rec = Reconciler(settings=settings, observer=SparkObserver(executors, host), executors=executors, queries=host, clock=SystemClock())
        run_id = str(host.query("counts").runId)
        rec.update_control(lambda c: replace(c, query_requests={"counts": replace(view.params, shuffle_partitions=8)}))
        record = rec.tick()
        [refusal] = record.plan.refusals
        assert refusal.reason == Reason.STATE_PINS_SHUFFLE_PARTITIONS
        assert "spark.sql.shuffle.partitions=4" in refusal.message and "RocksDB" in refusal.message
        assert record.plan.query_changes == ()
        assert str(host.query("counts").runId) == run_id and host.query("counts").isActive
        assert rec.control.query_requests == {}  # refused requests are consumed, with the reason in the audit trail
    finally:
        host.stop_all()


def test_stateful_shuffle_change_with_rocksdb_drains_repartitions_and_keeps_state(spark, tmp_path):
    host, _, build = start_stateful(spark, tmp_path, "counts_rocks", provider=ROCKSDB)
    collected = []
    try:
        view = host.views()[0]
        assert (view.state_store, view.params.shuffle_partitions) == ("rocksdb", 4)
        change = QueryChange("counts_rocks", view.params, replace(view.params, shuffle_partitions=8), Reason.OPERATOR_REQUEST)
        assert host.rescale(change, SystemClock().now())
        outcome = next_outcome(host, collected)
        assert outcome.ok, outcome.message
        wait_until(lambda: host.views()[0].params.shuffle_partitions == 8, 60, "8 state partitions reported by progress")
        seen = newest(host.views()[0].samples)
        wait_until(lambda: batches_since(host.views()[0].samples, seen) >= 2, 60, "batches after the repartition")
    finally:
        host.stop_all()
    info = read_checkpoint(tmp_path / "ckpt" / "counts_rocks")
    assert info.shuffle_partitions == 8 and info.state_store == "rocksdb"
    # the state itself was written in 8 partitions (state/<operator>/<partition>), not only asked for
    operator = tmp_path / "ckpt" / "counts_rocks" / "state" / "0"
    assert sorted(int(p.name) for p in operator.iterdir() if p.name.isdigit()) == list(range(8))
    state = final_state(tmp_path / "out")
    highest = max(row["m"] for row in state.values())
    assert sum(row["n"] for row in state.values()) == highest + 1  # every row counted once across the repartition
