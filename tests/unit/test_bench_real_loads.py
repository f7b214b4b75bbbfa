"""The real-Spark benchmarks' arithmetic, without Spark: the on/off profile, its summary, and what
sim-to-real reads from a run (the executor start-up the daemon measured, its fitted cost model),
and how the executors a run held are sampled from the driver and summed."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import pytest

from autoscaler.cli import main
from autoscaler.tools.bench.sim_to_real import fitted_model, measured_startup
from autoscaler.tools.bench.step_load import BUNDLED_CVS_TRACE, ExecutorSampler, OnOffProfile, StepProfile, daemon_settings, on_off_summary
from autoscaler.tools.demo.params import WARMUP_SECONDS
from autoscaler.tools.provenance import code_version

CVS = Path(__file__).parents[3] / "shared" / "traces" / "Twitter_volume_CVS.csv"


def test_the_bundled_stretch_of_cvs_replays_as_the_whole_trace_does():
    # the on/off benchmark's default where ../shared/traces is not: the same profile, step for step
    if not CVS.is_file():
        pytest.skip("the shared traces are not on this machine")
    whole, bundled = OnOffProfile(trace=CVS), OnOffProfile(trace=BUNDLED_CVS_TRACE)
    assert bundled.bounds() == whole.bounds() and bundled.rate_profile() == whole.rate_profile()


def test_the_on_off_profile_is_a_compressed_stretch_of_bursts_and_quiet_steps():
    profile = OnOffProfile(trace=BUNDLED_CVS_TRACE)  # the whole trace replays the same (above)
    windows = profile.bounds()
    assert windows[0][1] == WARMUP_SECONDS and len(windows) == 48  # 4 hours of 5-minute steps, 15 s each
    bursts = [w for w in windows if w[0].startswith("burst")]
    assert len(bursts) == 6 and all(b - a == 15 for _, a, b in windows)
    rates = profile.rate_profile()
    assert rates.rate_at(1.0) == 100.0 and max(rates.rates) == 2500.0  # warm-up, then the peak scaled
    # the longest quiet stretch outlasts Spark's 60 s idle timeout and our scale-down delay
    quiet_runs, run = [], 0
    for name, _, _ in windows:
        run = run + 1 if name.startswith("quiet") else 0
        quiet_runs.append(run)
    assert max(quiet_runs) * 15 >= 120


def test_the_on_off_summary_compares_quiet_and_burst_windows_and_dynamic_allocation():
    runs = {
        "autoscaler": {"executor_seconds": 400.0, "executors_per_phase": {"quiet-0": 1.0, "burst-1": 3.0, "quiet-2": 1.5}, "peak_lag_seconds_per_phase": {"quiet-0": None, "burst-1": 12.0, "quiet-2": 4.0}},
        "spark-dra": {"executor_seconds": 1000.0, "executors_per_phase": {"quiet-0": 4.0, "burst-1": 5.0, "quiet-2": 4.0}, "peak_lag_seconds_per_phase": {"quiet-0": None, "burst-1": 8.0, "quiet-2": 3.0}},
    }
    summary = on_off_summary(runs)
    assert summary["autoscaler"] == {"executor_seconds": 400.0, "mean_executors_quiet": 1.25, "mean_executors_burst": 3.0, "peak_lag_seconds": 12.0}
    assert summary["autoscaler_over_spark_dra"] == 0.4


def test_the_benchmark_runs_the_default_policy_as_autoscaler(tmp_path):
    assert daemon_settings("autoscaler", tmp_path)["policy.name"] == "default"
    assert daemon_settings("autoscaler-target-utilization", tmp_path)["policy.name"] == "target-utilization"


def test_sim_to_real_reads_the_start_up_and_the_cost_model_of_the_run():
    ticks = [
        {"t": 0.0, "alive": 1, "requested": 1, "mu": None},
        {"t": 2.0, "alive": 1, "requested": 3, "mu": 850.0, "w": 0.07, "o": 0.2, "k": 0.1},
        {"t": 4.0, "alive": 2, "requested": 3, "mu": 860.0, "w": 0.06, "o": 0.2, "k": 0.1},
        {"t": 14.0, "alive": 3, "requested": 3, "mu": 870.0, "w": 0.05, "o": 0.21, "k": 0.12},
        {"t": 40.0, "alive": 3, "requested": 4, "mu": None},
        {"t": 46.0, "alive": 4, "requested": 4, "mu": None},
    ]
    # from the raised target to the registration of all it asked for: 12 s and 6 s
    assert measured_startup(ticks) == 9.0
    assert measured_startup(ticks[:1]) == 3.7  # never scaled up: the latencies benchmark's figure
    assert fitted_model(ticks) == {"mu": 870.0, "w": 0.05, "o": 0.21, "k": 0.12}


def test_the_phases_count_from_the_end_of_the_warm_up_given():
    profile = StepProfile(low=400.0, high=2500.0, phases=(10.0, 20.0, 30.0), warmup=5.0)
    assert profile.bounds() == [("P1", 5.0, 15.0), ("P2", 15.0, 35.0), ("P3", 35.0, 65.0)]
    rates = profile.rate_profile()
    assert (rates.rate_at(4.9), rates.rate_at(14.9), rates.rate_at(15.1), rates.rate_at(35.1)) == (400.0, 400.0, 2500.0, 400.0)
    assert profile.to_json()["warmup_seconds"] == 5.0 and StepProfile().warmup == WARMUP_SECONDS
    assert OnOffProfile(trace=CVS, warmup=5.0).to_json()["warmup_seconds"] == 5.0  # (reads no trace)


def test_sim_to_real_simulates_the_same_profile_with_the_daemons_settings(tmp_path):
    from autoscaler.tools.bench.sim_to_real import simulate_profile
    from autoscaler.tools.sim.config import SimConfig

    profile = StepProfile(phases=(30.0, 30.0, 30.0))
    config = SimConfig(trigger_interval=2.0, partitions=8, min_partitions=8, executor_startup=8.0, duration_noise=0.0, slow_batch_probability=0.0)
    out = simulate_profile(profile, config, daemon_settings("autoscaler", tmp_path), (profile.warmup, profile.bounds()[-1][2]))
    assert out["batches"] > 30 and 90 <= out["executor_seconds"] <= 6 * 90 and out["p95_lag_seconds"] > 0


def test_each_quiet_stretch_reports_when_the_backlog_drained_and_when_the_executors_stood_at_the_floor():
    from autoscaler.tools.bench.step_load import quiet_stretches, timeline

    bounds = [("burst-0", 30.0, 45.0), ("quiet-1", 45.0, 60.0), ("quiet-2", 60.0, 75.0), ("burst-3", 75.0, 90.0), ("quiet-4", 90.0, 105.0)]
    samples = [(1000.0 + t, n) for t, n in [(0, 1), (1, 1), (40, 3), (41, 3), (52, 4), (80, 2), (81, 1), (95, 2), (99, 1)]]
    changes = timeline(samples, 1000.0)
    assert changes == [(0.0, 1), (40.0, 3), (52.0, 4), (80.0, 2), (81.0, 1), (95.0, 2), (99.0, 1)]
    commits = [(44.0, 500), (50.0, 900), (58.0, 300), (62.0, 0), (92.0, 200)]
    first, second = quiet_stretches(bounds, changes, commits, floor=1)
    # the two quiet windows are one stretch; the backlog drained at 58 s; 4 executors to its end
    assert (first.start, first.end, first.drained, first.at_floor) == (45.0, 75.0, 58.0, None)
    # at the floor from 81 s, then an executor that came for the backlog and left again: the
    # floor counts from when the count stayed there (99 s)
    assert (second.start, second.drained, second.at_floor) == (90.0, 92.0, 99.0)
    assert second.to_json()["floor_after_quiet_seconds"] == 9.0 and second.to_json()["floor_after_idle_seconds"] == 7.0
    assert first.to_json()["floor_after_idle_seconds"] is None


def test_the_on_off_summary_lists_the_seconds_to_the_floor_of_each_quiet_stretch():
    stretch = {"floor_after_quiet_seconds": 40.0, "floor_after_idle_seconds": 31.5}
    runs = {
        "autoscaler": {"executor_seconds": 400.0, "executors_per_phase": {"quiet-0": 1.0}, "peak_lag_seconds_per_phase": {"quiet-0": None}, "quiet_stretches": [stretch]},
        "spark-dra": {"executor_seconds": 1000.0, "executors_per_phase": {"quiet-0": 4.0}, "peak_lag_seconds_per_phase": {"quiet-0": None}},
    }
    summary = on_off_summary(runs)
    assert summary["autoscaler"]["floor_after_idle_seconds"] == [31.5] and summary["autoscaler"]["floor_after_quiet_seconds"] == [40.0]
    assert "floor_after_idle_seconds" not in summary["spark-dra"]  # a result from before the stretches were kept


def test_the_executor_sampler_counts_the_active_executors_the_driver_serves(httpserver):
    payload = [
        {"id": "driver", "isActive": True, "totalCores": 0},
        {"id": "1", "isActive": True, "totalCores": 1, "addTime": "2026-11-27T18:00:00.000GMT"},
        {"id": "2", "isActive": True, "totalCores": 1},
        {"id": "3", "isActive": False, "totalCores": 1},  # removed: the driver keeps it listed
    ]
    httpserver.expect_request("/api/v1/applications/app-1/executors").respond_with_json(payload)
    sampler = ExecutorSampler(httpserver.url_for("/api/v1/applications/app-1/executors"), interval=0.01)
    sampler.start()
    deadline = time.monotonic() + 10
    while len(sampler.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert len(sampler.samples) >= 3 and {n for _, n in sampler.samples} == {2}
    # the UI off serves no address: no samples, and stopping does not wait
    quiet = ExecutorSampler(None, interval=0.01)
    quiet.start()
    quiet.stop()
    assert quiet.samples == []


def test_executor_seconds_are_the_sampled_counts_held_between_samples():
    sampler = ExecutorSampler(None)
    sampler.samples = [(10.0, 1), (12.0, 3), (15.0, 2)]
    # [8, 20]: 1 from 8 (the first count held back to the start) to 12, 3 to 15, 2 to 20
    assert sampler.integrate(8.0, 20.0) == (1 * 4 + 3 * 3 + 2 * 5, 23 / 12, 1, 3)
    assert sampler.integrate(30.0, 40.0) == (0.0, 0.0, 0, 0)


@pytest.mark.parametrize(
    ("module", "function", "command"),
    [
        ("autoscaler.tools.bench.step_load", "run_benchmark", ["benchmark", "step-load"]),
        ("autoscaler.tools.bench.step_load", "run_benchmark", ["benchmark", "on-off", "--trace", "TRACE"]),
        ("autoscaler.tools.bench.sim_to_real", "run_sim_to_real", ["benchmark", "sim-to-real"]),
        ("autoscaler.tools.bench.latencies", "measure", ["benchmark", "latencies"]),
    ],
)
def test_each_real_spark_benchmark_keeps_the_code_it_ran_beside_its_figures(tmp_path, monkeypatch, capsys, module, function, command):
    # the run itself is Spark's (the integration tests and the benchmarks run it); here only what is written
    monkeypatch.setattr(importlib.import_module(module), function, lambda *a, **k: {"figure": 1.5})
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,value\n" + "".join(f"2024-03-01 00:{m:02d}:00,{m % 3}\n" for m in range(0, 60, 5)))
    output = tmp_path / "result.json"
    command = [str(trace) if c == "TRACE" else c for c in command]
    assert main([*command, "--json", "--output", str(output)]) == 0
    written = json.loads(output.read_text())
    assert written == {"figure": 1.5, "code": code_version()} == json.loads(capsys.readouterr().out)
