"""``spark-autoscaler benchmark soak``: many rescales from the checkpoint, some under faults, and
not one row lost or duplicated.

On a local Spark cluster, two hosted queries run side by side: a stateless one (the demo's trace
source into a sink that keeps one record per batch id) and a stateful one (a count per key over
the same rows, RocksDB state, updates written per batch id). The benchmark drives ``rescales``
restarts from the checkpoint through the query host, alternating the queries: new source
partitions for the stateless one, new shuffle (state) partitions for the stateful one, which
drains and repartitions its state. Between rescales the executor count changes
(``requestTotalExecutors`` / ``killExecutors``). Every ``fault_every``-th rescale (5 by
default) runs under an injected fault, in turn:

* ``executor_killed``: an executor JVM is SIGKILLed as the rescale starts;
* ``start_failed``: the new run fails to start once (its pipeline raises): the host goes back
  to the old settings, and the rescale is asked for again;
* ``mid_batch``: the rescale is asked for while a batch is in flight (the stop waits for the
  batch boundary).

At the end both queries drain what their source has and stop; the stateless output is checked
row by row against the rows Spark consumed (its checkpoint's offsets), the stateful one key by
key against the counts those rows make.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from autoscaler.core.model import ActionOutcome, QueryChange, QueryStatus, Reason
from autoscaler.core.settings import SparkSettings
from autoscaler.runtime.clock import SystemClock
from autoscaler.runtime.files import write_whole
from autoscaler.runtime.waiting import poll
from autoscaler.spark.checkpoint import read_checkpoint
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost
from autoscaler.spark.pipelines import PipelineContext, PipelineSpec
from autoscaler.spark.session import build_session, stop_session
from autoscaler.spark.standalone import executor_pids
from autoscaler.tools.demo.source import NAME, register
from autoscaler.tools.demo.workload import drain, trace_pipeline, verify_output
from autoscaler.tools.traces import RateProfile

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
FAULTS = ("executor_killed", "start_failed", "mid_batch")
STATELESS_PARTITIONS = (4, 3, 6, 2, 5)
STATE_PARTITIONS = (6, 8, 4)
KEYS = 10


class SoakError(Exception):
    """The soak could not go on (a rescale that never completed, Spark gone)."""


def counting_pipeline(profile: RateProfile, start: float, out: Path, *, fail_once: Path | None = None) -> Callable[[Any, PipelineContext], Any]:
    """Rows counted per ``id % 10`` (RocksDB state), updates kept per batch id (idempotent).

    ``fail_once``: while this file exists, building the pipeline removes it and raises (a start
    that fails once)."""
    out.mkdir(parents=True, exist_ok=True)

    def sink(df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        write_whole(out / f"batch-{batch_id}.json", json.dumps(rows))

    def build(spark: Any, ctx: PipelineContext) -> Any:
        from pyspark.sql import functions as F

        _maybe_fail(fail_once)
        register(spark)
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        src = spark.readStream.format(NAME).option("profile", profile.encode()).option("start", repr(start)).option("numPartitions", str(ctx.parallelism)).load()
        counts = src.groupBy((F.col("id") % KEYS).alias("k")).agg(F.count("*").alias("n"))
        return counts.writeStream.outputMode("update").foreachBatch(sink)

    return build


def _maybe_fail(flag: Path | None) -> None:
    if flag is not None and flag.exists():
        flag.unlink()
        raise RuntimeError("injected: the new run fails to start")


def failing_once(build: Callable[[Any, PipelineContext], Any], flag: Path) -> Callable[[Any, PipelineContext], Any]:
    def wrapped(spark: Any, ctx: PipelineContext) -> Any:
        _maybe_fail(flag)
        return build(spark, ctx)

    return wrapped


def final_counts(out: Path) -> dict[int, int]:
    """Each key's count as the last batch that updated it wrote it."""
    counts: dict[int, int] = {}
    for path in sorted(out.glob("batch-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        for row in json.loads(path.read_text()):
            counts[int(row["k"])] = int(row["n"])
    return counts


def expected_counts(rows: int) -> dict[int, int]:
    """The counts per ``id % 10`` of rows 0 .. rows-1."""
    return {k: rows // KEYS + (1 if k < rows % KEYS else 0) for k in range(KEYS) if rows > k}


def _rows_consumed(checkpoint: Path) -> int:
    info = read_checkpoint(checkpoint)
    [offset] = info.source_offsets
    return int(offset["row"])


def _wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    value = poll(check, timeout, interval)
    if not value:
        raise SoakError(f"timed out after {timeout:.0f}s waiting for {what}")
    return value


class _Soak:
    def __init__(self, workdir: Path, master: str, log: Callable[[str], None], fault_every: int) -> None:
        self.workdir, self.log, self.fault_every = workdir, log, fault_every
        self.start = time.time() + 5
        profile = RateProfile.steps([(86400, 300)])
        self.flags = {"soak_rows": workdir / "fail-rows", "soak_counts": workdir / "fail-counts"}
        self.rows_build = trace_pipeline(profile=profile, start=self.start, cost_seconds=0.0003, out_dir=workdir / "out" / "rows")
        self.counts_build = counting_pipeline(profile, self.start, workdir / "out" / "counts")
        specs = [
            PipelineSpec("soak_rows", failing_once(self.rows_build, self.flags["soak_rows"]), trigger=timedelta(seconds=1),
                         initial_parallelism=2, max_parallelism=8),
            PipelineSpec("soak_counts", failing_once(self.counts_build, self.flags["soak_counts"]), trigger=timedelta(seconds=1),
                         initial_parallelism=2, max_parallelism=2, shuffle_partitions=4),
        ]
        self.spark = build_session(SparkSettings(master=master, app_name="spark-autoscaler-soak",
                                                 conf={"spark.executor.cores": "1", "spark.executor.memory": "512m"}))
        self.executors = SparkExecutors(self.spark)
        self.host = QueryHost(self.spark, specs, checkpoint_root=workdir / "ckpt", clock=SystemClock(),
                              registered_cores=self.executors.registered_cores, restart_backoff_max=timedelta(seconds=4))
        self.outcomes: list[ActionOutcome] = []
        self.pauses: list[float] = []
        self.faults: list[dict[str, Any]] = []
        self.executor_changes = 0

    def view(self, name: str) -> Any:
        return next(v for v in self.host.views() if v.name == name)

    def outcome_for(self, name: str, timeout: float = 240) -> ActionOutcome:
        def found() -> ActionOutcome | None:
            self.outcomes.extend(self.host.take_outcomes())
            return next((o for o in self.outcomes if o.subject == name), None)

        outcome = _wait(found, timeout, f"the rescale of {name} to complete")
        self.outcomes.remove(outcome)
        return outcome

    def batches_since_run_start(self, name: str) -> int:
        v = self.view(name)
        return sum(1 for s in v.samples if v.run_started_at is not None and s.started_at >= v.run_started_at)

    def rescale(self, index: int) -> None:
        name = "soak_rows" if index % 2 == 0 else "soak_counts"
        every = self.fault_every
        fault = FAULTS[(index // every) % len(FAULTS)] if index % every == every - 1 else None
        _wait(lambda: self.view(name).status == QueryStatus.RUNNING and self.batches_since_run_start(name) >= 2, 240,
              f"{name} to run batches")
        view = self.view(name)
        if name == "soak_rows":
            wanted = replace(view.params, parallelism=STATELESS_PARTITIONS[(index // 2) % len(STATELESS_PARTITIONS)])
        else:
            wanted = replace(view.params, shuffle_partitions=STATE_PARTITIONS[(index // 2) % len(STATE_PARTITIONS)])
        if wanted == view.params:
            wanted = replace(view.params, parallelism=view.params.parallelism % 8 + 1) if name == "soak_rows" else replace(
                view.params, shuffle_partitions=(view.params.shuffle_partitions or 4) + 2)
        if fault == "mid_batch":
            _wait(lambda: self.view(name).batch_running, 60, f"a batch of {name} in flight", interval=0.02)
        if fault == "start_failed":
            self.flags[name].write_text("fail")
        change = QueryChange(name, view.params, wanted, Reason.OPERATOR_REQUEST, "soak")
        if not self.host.rescale(change, SystemClock().now()):
            raise SoakError(f"the host refused the rescale of {name}")
        if fault == "executor_killed":
            pids = executor_pids(self.spark.sparkContext.applicationId)
            if pids:
                os.kill(pids[0], signal.SIGKILL)
        outcome = self.outcome_for(name)
        if fault == "start_failed":
            recovered = not outcome.ok and self.view(name).params == view.params
            self.faults.append({"rescale": index, "fault": fault, "query": name, "first_attempt_ok": outcome.ok, "went_back_to_old_settings": recovered})
            _wait(lambda: self.view(name).status == QueryStatus.RUNNING, 120, f"{name} back on its old settings")
            if not self.host.rescale(change, SystemClock().now()):
                raise SoakError(f"the host refused the second attempt at rescaling {name}")
            outcome = self.outcome_for(name)
            self.faults[-1]["second_attempt_ok"] = outcome.ok
        elif fault is not None:
            self.faults.append({"rescale": index, "fault": fault, "query": name, "rescale_ok": outcome.ok})
        if not outcome.ok:
            raise SoakError(f"rescale {index} of {name} failed: {outcome.message}")
        if outcome.pause is not None:
            self.pauses.append(outcome.pause.total_seconds())
        self.log(f"rescale {index + 1}: {name} {change.from_params.to_json()} -> {wanted.to_json()} "
                 f"pause {outcome.pause.total_seconds() if outcome.pause else float('nan'):.1f}s{' under ' + fault if fault else ''}")

    def change_executors(self, index: int) -> None:
        now = SystemClock().now()
        view = self.executors.observe(now)
        target = 3 if view.count <= 2 else 2
        if target < view.count:
            self.executors.remove([e.id for e in sorted(view.alive, key=lambda e: -int(e.id) if e.id.isdigit() else 0)][: view.count - target], now)
        self.executors.set_target(target, now)
        self.executor_changes += 1
        _wait(lambda: self.executors.observe(SystemClock().now()).count == target, 120, f"{target} executors")

    def finish(self) -> dict[str, Any]:
        self.host.stop_all()
        drain(self.spark, self.rows_build, "soak_rows", self.workdir / "ckpt" / "soak_rows", 2)
        drain(self.spark, self.counts_build, "soak_counts", self.workdir / "ckpt" / "soak_counts", 2)
        rows_in = _rows_consumed(self.workdir / "ckpt" / "soak_rows")
        check = verify_output(self.workdir / "out" / "rows", rows_in)
        counted = _rows_consumed(self.workdir / "ckpt" / "soak_counts")
        expected, got = expected_counts(counted), final_counts(self.workdir / "out" / "counts")
        over = sum(max(0, got.get(k, 0) - n) for k, n in expected.items())
        under = sum(max(0, n - got.get(k, 0)) for k, n in expected.items())
        return {
            "rows_in": rows_in + counted,
            "rows_out": check.distinct_rows + sum(min(got.get(k, 0), n) for k, n in expected.items()),
            "lost_rows": check.lost_rows + under,
            "duplicate_rows": check.duplicate_rows + over,
            "stateless": {"rows_in": rows_in, "lost_rows": check.lost_rows, "duplicate_rows": check.duplicate_rows, "consistent": check.consistent},
            "stateful": {"rows_in": counted, "keys": len(expected), "counted_too_often": over, "counted_too_rarely": under,
                         "state_partitions": read_checkpoint(self.workdir / "ckpt" / "soak_counts").shuffle_partitions},
        }


def run_soak(
    rescales: int, *, workdir: Path, master: str = "local-cluster[3,1,512]", fault_every: int = 5, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Drive ``rescales`` rescales (see the module docstring) and check every row came out once."""
    if fault_every < 1:
        raise ValueError("fault_every must be at least 1")
    soak = _Soak(Path(workdir), master, log, fault_every)
    started = time.monotonic()
    done = 0
    try:
        soak.host.prepare(2)
        soak.host.start_all()
        for index in range(rescales):
            if index % 3 == 2:
                soak.change_executors(index)
            soak.rescale(index)
            done += 1
        result = soak.finish()
    finally:
        soak.host.stop_all()
        stop_session(soak.spark)
    pauses = sorted(soak.pauses)
    return {
        "rescales": done,
        **result,
        "executor_changes": soak.executor_changes,
        "faults": soak.faults,
        "pause_seconds": {
            "p50": round(statistics.median(pauses), 2) if pauses else None,
            "p95": round(pauses[min(len(pauses) - 1, math.ceil(0.95 * len(pauses)) - 1)], 2) if pauses else None,
            "max": round(pauses[-1], 2) if pauses else None,
        },
        "wall_seconds": round(time.monotonic() - started, 1),
    }
