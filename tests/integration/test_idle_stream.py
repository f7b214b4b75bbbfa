"""An on/off stream on real Spark with the default policy: while no rows arrive, Spark's idle
reports reach the daemon, the query has no input rate and no lag, and the executors go back to
the floor. (A burst after the quiet stretch, seen within two triggers: in the simulator,
tests/unit/test_sim.py, and on real Spark in `benchmark on-off`, docs/benchmarks.md.)"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from autoscaler.app.driver import DriverDaemon
from autoscaler.runtime.config import load_settings
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.tools.demo.run import ACTIVE_PARAMS
from autoscaler.tools.demo.workload import drain, trace_pipeline
from autoscaler.tools.traces import RateProfile
from tests.integration.conftest import assert_every_row_once, trail, wait_until

pytestmark = pytest.mark.spark

TRIGGER = 2.0
SCALE_DOWN_DELAY = 10.0


def test_an_on_off_stream_goes_back_to_the_floor_while_idle(spark_session_factory, tmp_path):
    spark = spark_session_factory("local-cluster[3,1,512]")
    # a burst of 2 executors' worth (1 ms of work per row), then quiet
    profile = RateProfile.steps([(30, 1600), (240, 0)])
    start = time.time() + 8
    build = trace_pipeline(profile=profile, start=start, cost_seconds=0.001, out_dir=tmp_path / "out")
    spec = PipelineSpec("onoff", build, trigger=timedelta(seconds=TRIGGER), initial_parallelism=6, min_parallelism=6, max_parallelism=6)
    settings = load_settings(
        None,
        {
            "mode": "active",
            "executors.min": 1,
            "executors.max": 3,
            "executors.initial": 3,  # the burst's capacity is there: the quiet stretch must release it
            "reconcile_interval": "1s",
            "resource_wait_timeout": "20s",
            "normalize.scale_down_delay": f"{SCALE_DOWN_DELAY:g}s",
            "normalize.stabilization": "5s",
            "policy.params": ACTIVE_PARAMS,  # the default policy with the demo's compressed time constants
            "pipelines.checkpoint_root": str(tmp_path / "ckpt"),
            "http.port": 0,
        },
        environ={},
    )
    records = []
    daemon = DriverDaemon(settings, specs=[spec], spark=spark, on_tick=records.append)
    loop = None
    try:
        daemon.start()
        wait_until(lambda: daemon.executors.observe(daemon.clock.now()).count == 3, 60, "the initial executors", interval=1)
        loop = threading.Thread(target=daemon.loop.run, daemon=True)  # type: ignore[union-attr]
        loop.start()
        # the burst's rows are all processed (on this shared 2-core box that may take a while
        # after they stop): from then on the query is quiet
        burst_rows = profile.cumulative(30)
        wait_until(lambda: records and sum(x.input_rows for q in records[-1].queries for x in q.samples) >= burst_rows, 240, "the burst's rows", interval=1)
        quiet_from = max(x.ended_at.timestamp() for q in records[-1].queries for x in q.samples)
        # the floor is due 25 s after the first idle report, which comes within 10 s of the
        # last rows: half a minute after that, the floor has held for at least 15 s of ticks
        wait_until(lambda: time.time() > quiet_from + 10 + SCALE_DOWN_DELAY + 30, 200, "half a minute of quiet", interval=2)
        quiet = [r for r in records if r.at.timestamp() >= quiet_from]
        idle = [r for r in quiet if r.loads and r.loads[0].idle]
        # Spark reports the query idle (QueryIdleEvent) at the first trigger that finds no rows:
        # the daemon's session reports such triggers 1 s apart at most (Spark's default, 10 s
        # after the last batch, kept the last batch's rate and a growing lag that long)
        assert idle and idle[0].at.timestamp() - quiet_from < 10, trail(records)
        # no rows arrive and none waits: rate 0, lag 0 (no lag alert for a stream that is quiet)
        assert all(r.loads[0].input_rate == 0.0 and r.loads[0].lag == timedelta(0) for r in idle), trail(records)
        # the executors go back to the floor within the scale-down delay and the policy's
        # (compressed) price of a rescale, stay there, and nothing scales up while idle
        floor_by = idle[0].at.timestamp() + SCALE_DOWN_DELAY + 15
        late = [r for r in idle if r.at.timestamp() >= floor_by]
        assert late and all(r.executors_alive == 1 for r in late[-5:]), trail(records)
        assert not any(r.decision.changes and r.decision.target > r.decision.current for r in idle), trail(records)
    finally:
        daemon.shutdown()
        if loop is not None:
            loop.join(30)
    drain(spark, build, "onoff", tmp_path / "ckpt" / "onoff", 6)
    assert_every_row_once(tmp_path / "out", tmp_path / "ckpt" / "onoff")
