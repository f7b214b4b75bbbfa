"""How well the simulator predicts real Spark: the same load on the local cluster and in the
simulator, the simulator set up with what that run measured on this machine.

``benchmark sim-to-real`` runs the daemon (``autoscaler``, the default policy) on the step load
of :mod:`autoscaler.tools.bench.step_load`, then simulates the same profile with the same
daemon settings and a :class:`~autoscaler.tools.sim.config.SimConfig` taken from the run: the
batch cost model the daemon fitted on the real batches (rows per core-second, per-task and
fixed cost, contention), the executor start-up measured from the daemon's own requests to their
registration, the removal delay and restart pause of ``benchmark latencies``. It compares the
executor-seconds over the measured window and the 95th percentile of the per-batch lag (commit
time minus the oldest row's generation time): ``executor_seconds_error`` is simulated / real - 1,
``p95_lag_ratio`` simulated / real.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import statistics
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autoscaler.tools.bench.step_load import PARTITIONS, TRIGGER, LoadProfile, StepProfile, daemon_settings, run_one
from autoscaler.tools.sim.cluster import SimCluster
from autoscaler.tools.sim.config import SimConfig
from autoscaler.tools.sim.runner import simulate
from autoscaler.tools.sim.workload import Workload

# `benchmark latencies` on this machine with the daemon's session, 2026-11-28 (docs/benchmarks.md;
# 5.17 s and 2.48 s before the session shortened Spark's 5 s wait on a removed executor)
REMOVAL_DELAY = 1.14  # s
RESTART_PAUSE = 2.32  # s


def measured_startup(ticks: list[dict[str, Any]], default: float = 3.7) -> float:
    """Median seconds from a raised executor target to the registration of the executors it
    asked for, read from the daemon's tick log (``default`` when it never scaled up)."""
    delays = []
    for i, tick in enumerate(ticks):
        before = ticks[i - 1]["requested"] if i else None
        asked = tick["requested"]
        if before is None or asked is None or asked <= before:
            continue
        done = next((t for t in ticks[i:] if t["alive"] >= asked), None)
        if done is not None:
            delays.append(done["t"] - tick["t"])
    return statistics.median(delays) if delays else default


def fitted_model(ticks: list[dict[str, Any]]) -> dict[str, float] | None:
    """The daemon's last batch cost model of the run (mu, w, o, k)."""
    for tick in reversed(ticks):
        if tick.get("mu"):
            return {"mu": tick["mu"], "w": tick["w"] or 0.0, "o": tick["o"] or 0.0, "k": tick.get("k") or 0.0}
    return None


def batch_lags_real(out: Path, start: float, end: float) -> list[float]:
    records = [json.loads(p.read_text()) for p in out.glob("batch-*.json")]
    return [r["lag_seconds"] for r in records if r["lag_seconds"] is not None and start <= r["done"] < end]


def p95(values: list[float]) -> float | None:
    return float(np.percentile(values, 95)) if values else None


def simulate_profile(profile: LoadProfile, config: SimConfig, settings: dict[str, Any], window: tuple[float, float]) -> dict[str, Any]:
    """The same profile in the simulator: registered executor-seconds and per-batch lags in ``window``."""
    rates = profile.rate_profile()
    end = rates.starts[-1]
    workload = Workload.from_steps("sim-to-real", datetime(2026, 1, 1, tzinfo=timezone.utc), list(rates.starts[:-1]), list(rates.rates[:-1]), end)
    registered: list[tuple[float, int]] = []
    clusters: list[SimCluster] = []

    def on_tick(record: Any, cluster: SimCluster) -> None:
        registered.append((cluster.t, len(cluster.alive)))
        if not clusters:
            clusters.append(cluster)

    sim_settings = {k: v for k, v in settings.items() if k not in ("policy.name", "policy.params", "pipelines.checkpoint_root", "http.enabled")}
    result = simulate(
        workload,
        policy=settings["policy.name"],
        params=settings["policy.params"],
        peak_executors=3,
        max_executors=settings["executors.max"],
        config=config,
        tick=TRIGGER.total_seconds(),
        settings=sim_settings,
        on_tick=on_tick,
    )
    completions = clusters[0].completions
    a, b = window
    seconds = 0.0
    for (t0, n), (t1, _) in itertools.pairwise(registered):
        lo, hi = max(a, t0), min(b, t1)
        if hi > lo:
            seconds += n * (hi - lo)
    lags = [end_k - completions[i][1] for i, (end_k, _) in enumerate(completions[1:]) if a <= end_k < b]
    return {"executor_seconds": round(seconds, 1), "p95_lag_seconds": p95(lags), "batches": len(lags), "rescales": result.rescales}


def run_sim_to_real(profile: LoadProfile | None = None, workdir: Path | None = None, log: Callable[[str], None] = print) -> dict[str, Any]:
    profile = profile or StepProfile()
    own = workdir is None
    root = Path(workdir or tempfile.mkdtemp(prefix="sim-to-real-"))
    try:
        log("real run (autoscaler, default policy) ...")
        real = run_one("autoscaler", profile, root, log)
        ticks = [json.loads(line) for line in (root / "autoscaler" / "ticks.jsonl").read_text().splitlines() if line.strip()]
        model = fitted_model(ticks)
        startup = measured_startup(ticks)
        window = (profile.warmup, profile.bounds()[-1][2])
        start = real.started_at
        real_lags = batch_lags_real(root / "autoscaler" / "out", start + window[0], start + window[1])
        fitted: dict[str, float] = {}
        if model:
            fitted = {"rows_per_core_second": model["mu"], "task_cost": model["w"], "fixed_cost": model["o"], "contention": model["k"]}
        config = SimConfig(
            trigger_interval=TRIGGER.total_seconds(),
            partitions=PARTITIONS,
            min_partitions=PARTITIONS,
            executor_startup=startup,
            removal_delay=REMOVAL_DELAY,
            restart_delay=RESTART_PAUSE,
        ).with_changes(fitted)
        log("simulated run ...")
        simulated = simulate_profile(profile, config, daemon_settings("autoscaler", root / "sim"), window)
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    real_out = {"executor_seconds": round(real.executor_seconds, 1), "p95_lag_seconds": p95(real_lags), "batches": len(real_lags)}
    error = simulated["executor_seconds"] / real_out["executor_seconds"] - 1 if real_out["executor_seconds"] else math.nan
    ratio = simulated["p95_lag_seconds"] / real_out["p95_lag_seconds"] if simulated["p95_lag_seconds"] and real_out["p95_lag_seconds"] else math.nan
    return {
        "profile": profile.to_json(),
        "simulator": {
            "rows_per_core_second": config.rows_per_core_second,
            "task_cost": config.task_cost,
            "fixed_cost": config.fixed_cost,
            "contention": config.contention,
            "executor_startup": round(config.executor_startup, 2),
            "removal_delay": config.removal_delay,
            "restart_delay": config.restart_delay,
        },
        "real": real_out,
        "simulated": simulated,
        "executor_seconds_error": round(error, 3),
        "p95_lag_ratio": round(ratio, 3),
    }
