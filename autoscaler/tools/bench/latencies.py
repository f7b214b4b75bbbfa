"""Measure what a scaling action costs on a real local cluster.

* executor add: ``requestTotalExecutors(n + 1)`` until the new executor is registered;
* executor remove: ``killExecutors([id])`` until it is gone from the driver;
* query rescale: the decision until the first batch of the restarted query is done
  ("decision to first batch at the new scale"), and the pause without batches (stop to
  that first batch), through the daemon's own rescale protocol.

Each is repeated; the figures are printed and can be written as JSON.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from autoscaler.core.evaluate import batches_since, newest_start
from autoscaler.core.model import QueryChange, Reason
from autoscaler.core.settings import SparkSettings
from autoscaler.runtime.clock import SystemClock
from autoscaler.runtime.waiting import poll
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.spark.session import build_session, stop_session
from autoscaler.tools.demo.workload import trace_pipeline
from autoscaler.tools.traces import RateProfile


def _wait(check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` was true, asked every 50 ms."""
    start = time.monotonic()
    if not poll(check, timeout, interval=0.05):
        raise TimeoutError("condition not reached")
    return time.monotonic() - start


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
        "n": len(values),
    }


def measure(repeats: int = 3, log: Callable[[str], None] = print) -> dict[str, Any]:
    spark = build_session(SparkSettings(master="local-cluster[4,1,512]", app_name="latencies", conf={"spark.executor.cores": "1"}))
    clock = SystemClock()
    adds: list[float] = []
    removes: list[float] = []
    totals: list[float] = []
    pauses: list[float] = []
    try:
        ex = SparkExecutors(spark)
        count = lambda: ex.observe(clock.now()).count
        # pin a target of 2: remove the extra executors local-cluster started
        view = ex.observe(clock.now())
        ex.remove([e.id for e in view.alive[2:]], clock.now())
        ex.set_target(2, clock.now())
        _wait(lambda: count() == 2, 60)
        for _ in range(repeats):
            ex.set_target(3, clock.now())
            adds.append(_wait(lambda: count() == 3, 60))
            victim = sorted(ex.observe(clock.now()).alive, key=lambda e: e.added_at or clock.now())[-1]
            ex.remove([victim.id], clock.now())
            removes.append(_wait(lambda: count() == 2, 60))
            log(f"  executor add {adds[-1]:.2f}s, remove {removes[-1]:.2f}s")
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            build = trace_pipeline(
                profile=RateProfile.steps([(3600, 500)]), start=time.time() + 2, cost_seconds=0.001, out_dir=root / "out"
            )
            spec = PipelineSpec("latency", build, trigger=timedelta(seconds=2), initial_parallelism=2, max_parallelism=8)
            host = QueryHost(spark, [spec], checkpoint_root=root / "ckpt", clock=clock, registered_cores=ex.registered_cores)
            host.prepare(2)
            host.start_all()
            try:
                for target in [4, 2] * repeats:
                    since = newest_start(host.views()[0].samples)
                    _wait(lambda: batches_since(host.views()[0].samples, since) >= 3, 120)  # noqa: B023 - waited for here
                    params = host.views()[0].params
                    host.rescale(QueryChange("latency", params, replace(params, parallelism=target), Reason.OPERATOR_REQUEST), clock.now())
                    outcomes: list[Any] = []

                    def finished(outcomes: list[Any] = outcomes) -> bool:
                        outcomes.extend(host.take_outcomes())
                        return bool(outcomes)

                    _wait(finished, 120)
                    o = outcomes[0]
                    totals.append((o.finished_at - o.started_at).total_seconds())
                    pauses.append(o.pause.total_seconds() if o.pause else float("nan"))
                    log(f"  rescale to {target} partitions: decision to first batch {totals[-1]:.2f}s, pause {pauses[-1]:.2f}s")
            finally:
                host.stop_all()
    finally:
        stop_session(spark)
    return {
        "cluster": "local-cluster[4,1,512] on this machine",
        "executor_add_seconds": _summary(adds),
        "executor_remove_seconds": _summary(removes),
        "rescale_decision_to_first_batch_seconds": _summary(totals),
        "rescale_pause_seconds": _summary(pauses),
    }
