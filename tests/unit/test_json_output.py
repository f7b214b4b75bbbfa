"""Every `--json` prints exactly one JSON document on stdout, and its logs and progress on stderr:
`... --json | jq` works. Each command runs as a user runs it (a process of its own) with small
parameters; the ones that start Spark are marked `spark`.

Before, `benchmark step-load --json` printed the daemon's log lines (structlog's default: stdout)
before the JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import pytest


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Two hours at a 5 minute step: quiet, a burst, quiet."""
    path = tmp_path_factory.mktemp("trace") / "small.csv"
    t0 = datetime(2024, 3, 1)
    values = [10, 12, 11, 10, 40, 42, 12, 10, 11, 10, 12, 11, 10, 11, 10, 12, 11, 10, 12, 11, 10, 11, 12, 10]
    path.write_text("timestamp,value\n" + "\n".join(f"{(t0 + timedelta(minutes=5 * i)).isoformat(sep=' ')},{v}" for i, v in enumerate(values)) + "\n")
    return path


def run_json(*args: str, timeout: float = 300, stderr: list[str] | None = None) -> dict:
    result = subprocess.run([sys.executable, "-m", "autoscaler", *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    if stderr is not None:
        stderr.extend(result.stderr.splitlines())
    return json.loads(result.stdout)  # the whole of stdout: one document, nothing before or after


def test_simulate_json(trace):
    out = run_json("simulate", "--trace", str(trace), "--json", "--peak-executors", "4")
    assert out["policy"] == "default" and out["policy_params"] == {}
    assert "settings" not in out and "simulator" not in out
    assert set(out["code"]) == {"version", "commit", "modified"}  # autoscaler.tools.provenance


def test_simulate_json_keeps_what_it_was_run_with(trace):
    # the seed files of docs/results/seeds-* were run before this and name their parameters
    # only in the docs' prose: a result should say how to make it again
    out = run_json(
        "simulate", "--trace", str(trace), "--json", "--peak-executors", "4", "--days", "0.05", "--seed", "1",
        "--param", "target_utilization=0.9", "--setting", "normalize.scale_down_delay=0s", "--set", "executor_startup=5",
    )
    assert out["seed"] == 1 and out["policy_params"] == {"target_utilization": 0.9}
    assert out["settings"] == {"normalize.scale_down_delay": "0s"}
    assert out["simulator"] == {"executor_startup": "5"}  # as given, as --setting's are


def test_simulate_compare_json(trace):
    out = run_json("simulate", "--trace", str(trace), "--compare", "--json", "--peak-executors", "4", "--days", "0.05")
    assert {r["policy"] for r in out["results"]} >= {"default", "static"}
    assert set(out["code"]) == {"version", "commit", "modified"}


def test_benchmark_sim_speed_json(trace):
    out = run_json("benchmark", "sim-speed", "--trace", str(trace), "--days", "0.02", "--repeats", "1", "--fingerprint", "--json")
    assert out["repeats"] == 1 and out["fingerprint"]


@pytest.mark.spark
def test_benchmark_step_load_json(tmp_path):
    out = run_json("benchmark", "step-load", "--runs", "autoscaler", "--phases", "5,5,5", "--warmup", "5", "--json", "--workdir", str(tmp_path), timeout=600)
    assert set(out["runs"]) == {"autoscaler"} and out["profile"]["phases_seconds"] == [5.0, 5.0, 5.0]
    assert out["profile"]["warmup_seconds"] == 5.0


@pytest.mark.spark
def test_benchmark_latencies_json():
    err: list[str] = []
    out = run_json("benchmark", "latencies", "--repeats", "1", "--json", timeout=600, stderr=err)
    assert out["executor_add_seconds"]["n"] == 1 and out["rescale_pause_seconds"]["n"] == 2
    # an executor the benchmark removed is not an error on the console: Spark's scheduler logs
    # "Lost an executor N (already removed): Executor killed by driver." at ERROR after each
    # removal (log4j2-driver.properties filters it; seen on the console before, 2026-11-29)
    assert [line for line in err if "Lost an executor" in line or "Lost executor" in line] == [], err
    # the daemon's session drops a removed executor from the driver's list after 1 s: with
    # Spark's 5 s disconnection delay no removal takes less than 5 s (measured 5.17-5.36 s)
    assert out["executor_remove_seconds"]["max"] < 4.0, out["executor_remove_seconds"]
