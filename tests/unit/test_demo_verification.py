import json
from pathlib import Path

import pytest

from autoscaler.tools.demo.workload import verify_output


def record(out, batch, lo, hi, lag=1.0):
    n = 0 if lo is None else hi - lo + 1
    total = None if lo is None else (lo + hi) * n // 2
    (out / f"batch-{batch}.json").write_text(
        json.dumps({"batch": batch, "min": lo, "max": hi, "rows": n, "sum": total, "done": 100.0 + batch, "lag_seconds": lag})
    )


def test_contiguous_batches_verify_exactly_once(tmp_path):
    record(tmp_path, 0, 0, 99)
    record(tmp_path, 1, 100, 249, lag=3.5)
    record(tmp_path, 2, None, None)
    v = verify_output(tmp_path, 250)
    assert (v.rows_out, v.lost_rows, v.duplicate_rows, v.consistent, v.max_lag_seconds) == (250, 0, 0, True, 3.5)


def test_gaps_and_overlaps_are_counted(tmp_path):
    record(tmp_path, 0, 0, 99)
    record(tmp_path, 1, 90, 149)  # 10 rows written twice
    record(tmp_path, 2, 200, 249)  # 150..199 never written
    v = verify_output(tmp_path, 250)
    assert (v.duplicate_rows, v.lost_rows) == (10, 50)


def test_a_record_whose_sum_does_not_match_its_range_is_inconsistent(tmp_path):
    (tmp_path / "batch-0.json").write_text(json.dumps({"batch": 0, "min": 0, "max": 9, "rows": 10, "sum": 7, "done": 1, "lag_seconds": 1}))
    assert not verify_output(tmp_path, 10).consistent


@pytest.mark.parametrize("mode", ["active", "reactive"])
def test_the_demo_configuration_is_valid(mode, tmp_path):
    from autoscaler.tools.demo.run import DemoOptions, demo_settings
    from policies import create_policy

    settings = demo_settings(DemoOptions(mode=mode), tmp_path)
    assert settings.mode.value == mode and settings.executors.max == DemoOptions().max_executors
    create_policy(settings.policy.name, settings.policy.params)  # the compressed-time parameters are accepted


@pytest.mark.parametrize("lag, shown", [(0.0, "0.0s"), (12.34, "12.3s"), (None, "      -")])
def test_the_live_view_prints_a_lag_of_zero(lag, shown):
    """A lag of exactly zero is a falsy timedelta: the line printed it through format(timedelta(0), '5.1f'),
    which raises, ending the demo's tick callback."""
    import io
    from dataclasses import replace
    from datetime import timedelta

    from autoscaler.tools.demo.run import PIPELINE, LiveView
    from autoscaler.tools.traces import RateProfile
    from tests.harness import build

    daemon = build(query_name=PIPELINE)
    record = daemon.tick(rate=100.0)
    (load,) = record.loads
    load = replace(load, lag=None if lag is None else timedelta(seconds=lag))
    out = io.StringIO()
    LiveView(0.0, RateProfile((0.0,), (100.0,)).rate_at, out)(replace(record, loads=(load,)))
    line = out.getvalue().splitlines()[-1]
    assert f"{shown} " in line, line


@pytest.mark.parametrize("t, shown", [(-0.4, "    0s "), (-0.6, "   -1s "), (0.4, "    0s "), (179.5, "  180s ")])
def test_the_live_view_prints_no_negative_zero_time(t, shown):
    """The last tick of the warm-up printed "-0s" (-0.4 s formatted with :5.0f)."""
    from autoscaler.tools.demo.run import PIPELINE, LiveView
    from autoscaler.tools.traces import RateProfile
    from tests.harness import build

    record = build(query_name=PIPELINE).tick(rate=100.0)
    assert LiveView(0.0, RateProfile((0.0,), (100.0,)).rate_at).line(record, t).startswith(shown)


@pytest.mark.parametrize("cores, executors, peak", [(1, 6, 600.0), (2, 6, 1200.0), (4, 6, 2400.0), (5, 6, 2800.0), (64, 6, 2800.0), (64, 2, 1200.0), (2, 1, 600.0)])
def test_the_demos_default_peak_is_sized_to_the_cores_it_can_use(cores, executors, peak):
    from autoscaler.tools.demo.params import default_peak_rate

    assert default_peak_rate(executors, cores) == peak


def test_the_demos_cores_are_the_ones_this_process_may_run_on(monkeypatch):
    import os

    from autoscaler.tools.demo import params
    from autoscaler.tools.demo.run import DemoOptions

    monkeypatch.setattr(params, "CPU_MAX", Path("/nonexistent/cpu.max"))  # no quota, whatever this machine has
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)  # a cpuset of 3 cores
    assert params.usable_cores() == 3 and DemoOptions().peak() == 1800.0 and DemoOptions(max_executors=2).peak() == 1200.0
    monkeypatch.delattr(os, "sched_getaffinity")  # macOS, Windows: the machine's count
    assert params.usable_cores() == 32 and DemoOptions().peak() == 2800.0
    assert DemoOptions(peak_rate=5000.0).peak() == 5000.0  # given: as given


@pytest.mark.parametrize(
    "cpu_max, cores",
    [
        pytest.param("max 100000\n", 8, id="no-quota"),
        pytest.param("200000 100000\n", 2, id="two-cpus"),  # docker --cpus 2 on an 8-core machine: the demo sized 8 cores' load
        pytest.param("150000 100000\n", 2, id="one-and-a-half-cpus"),
        pytest.param("50000 100000\n", 1, id="half-a-cpu"),
        pytest.param("1600000 100000\n", 8, id="quota-above-the-cpuset"),
        pytest.param("garbage\n", 8, id="unreadable"),
        pytest.param(None, 8, id="no-cgroup-v2"),
    ],
)
def test_the_demos_cores_are_fewer_under_a_cpu_quota(monkeypatch, tmp_path, cpu_max, cores):
    import os

    from autoscaler.tools.demo import params

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    assert params.usable_cores(path) == cores
