"""A running batch's rows on a real local cluster, while the batch runs: from its checkpoint's
offset log before any of its tasks ends (``window.planned_batch_rows``), and from the tasks that
finished (``window.running_batch_rows``). A step in the load is counted while the step's first,
long batch runs."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from autoscaler.runtime.clock import SystemClock
from autoscaler.spark.executors import SparkExecutors
from autoscaler.spark.host import QueryHost
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.tools.demo.workload import trace_pipeline
from autoscaler.tools.traces import RateProfile
from tests.integration.conftest import wait_until

pytestmark = pytest.mark.spark


def test_a_running_batch_tells_its_rows_before_it_ends(spark_session_factory, tmp_path):
    spark = spark_session_factory("local-cluster[1,1,512]")
    # 100 rows/s, then 1500 rows/s at 1 ms a row on one core: the step's batches run several
    # triggers long, their 8 tasks one after another
    profile = RateProfile.steps([(15, 100), (120, 1500)])
    start = time.time() + 5
    build = trace_pipeline(profile=profile, start=start, cost_seconds=0.001, out_dir=tmp_path / "out")
    spec = PipelineSpec("rows", build, trigger=timedelta(seconds=2), initial_parallelism=8, max_parallelism=8)
    executors = SparkExecutors(spark)

    def host(on):
        return QueryHost(
            spark, [spec], checkpoint_root=tmp_path / "ckpt", clock=SystemClock(), registered_cores=executors.registered_cores,
            running_batch_rows=on, planned_batch_rows=on,
        )

    def stepped():
        return time.time() > start + 15 + 2  # a batch planned after the step

    reader = host(True)
    reader.prepare(1)
    reader.start_all()
    try:
        def planned():
            view = reader.views()[0]
            no_task_ended = view.batch_tasks is None or view.batch_tasks[0] == 0
            if stepped() and view.batch_running and no_task_ended and view.batch_planned_rows is not None:
                assert view.running_batch_rows == view.batch_planned_rows  # preferred to the tasks' count
                return view
            return None

        view = wait_until(planned, 180, "a running batch's planned rows before any of its tasks ended", interval=0.3)
        ended_before = {s.batch_id for s in view.samples}
        batch = wait_until(lambda: next((s for s in reader.views()[0].samples if s.batch_id not in ended_before), None), 180, "it to end")
        # the offset log's rows are the batch's, exactly, as its progress event tells them when it ends
        assert batch.input_rows == view.batch_planned_rows > 3 * 2 * 100, (view.batch_planned_rows, batch.input_rows)

        def counted():
            view = reader.views()[0]
            read = view.batch_read
            if stepped() and view.batch_running and read is not None and 2 <= read.tasks_done < read.tasks:
                return view, read
            return None

        view, read = wait_until(counted, 180, "a running batch with finished tasks", interval=0.3)
        ended_before = {s.batch_id for s in view.samples}

        def ended():
            return next((s for s in reader.views()[0].samples if s.batch_id not in ended_before), None)

        batch = wait_until(ended, 180, "the running batch to end")
        # counted while it ran: the rows its first tasks read, for all 8 (the source splits a
        # batch's rows evenly); Spark's progress event tells the rows when it ends
        assert read.tasks == 8
        assert read.batch_rows() == pytest.approx(batch.input_rows, rel=0.15), (read, batch.input_rows)
        assert batch.input_rows > 3 * 2 * 100  # a batch of the step, not of the 100 rows/s before it
        # without the settings the host does not ask
        assert host(False).views() and all(v.batch_read is None and v.batch_planned_rows is None for v in host(False).views())
    finally:
        reader.stop_all()
