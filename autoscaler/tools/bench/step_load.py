"""Head-to-head on real Spark: our daemon vs Spark's dynamic allocation vs static maximum.

Replays a load profile on ``local-cluster[6,1,512]`` (1 ms of work per row, 8 partitions, 2 s
trigger, up to 6 executors), each run after the same 30 s warm-up, measured over the profile's
windows only:

* ``step-load``: the step of ``docs/benchmarks.md`` (after the baseline measured in the team
  notes): 400 -> 2500 -> 400 rows/s for 120 / 180 / 180 s;
* ``on-off`` (:class:`OnOffProfile`): a compressed stretch of a bursty shared trace (Twitter
  CVS: bursts of one trace step, then nothing for an hour or more), in which a daemon must
  release executors during the quiet stretches.

Runs: ``autoscaler`` (the default policy, with the demo's compressed time constants),
``spark-dra`` (Spark's dynamic allocation), ``static-max``, and, as an extra,
``autoscaler-target-utilization`` (the simpler policy the step load ran before).

* executor-seconds: the number of registered executors, sampled every second, integrated;
* lag of a batch: commit time minus the generation time of its oldest row (the longest any
  row of that batch waited); "peak lag per phase" is the largest lag of the batches
  committed in that phase.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any, Callable, Protocol

from autoscaler.app.compose import configure
from autoscaler.core.settings import SparkSettings
from autoscaler.spark.executors import parse_executors
from autoscaler.spark.pipelines import PipelineContext, PipelineSpec
from autoscaler.spark.rest import driver_api, get_json
from autoscaler.spark.session import build_session, stop_session
from autoscaler.tools.demo.params import ACTIVE_PARAMS, WARMUP_SECONDS
from autoscaler.tools.demo.workload import trace_pipeline, verify_output
from autoscaler.tools.traces import RateProfile, compress_trace, load_trace, prefixed


class LoadProfile(Protocol):
    @property
    def warmup(self) -> float: ...  # seconds at a low rate before the phases, which count from its end
    def rate_profile(self) -> RateProfile: ...
    def bounds(self) -> list[tuple[str, float, float]]: ...
    @property
    def need_executor_seconds(self) -> float: ...
    def to_json(self) -> dict[str, Any]: ...

RUNS = ("autoscaler", "spark-dra", "static-max")
EXTRA_RUNS = ("autoscaler-target-utilization",)
ALL_RUNS = RUNS + EXTRA_RUNS
MASTER = "local-cluster[6,1,512]"
PARTITIONS = 8
TRIGGER = timedelta(seconds=2)
COST_SECONDS = 0.001
NEED = (1, 4, 1)  # measured need per phase on this machine (team notes, calibration)


@dataclass(frozen=True)
class StepProfile:
    low: float = 400.0
    high: float = 2500.0
    phases: tuple[float, float, float] = (120.0, 180.0, 180.0)
    warmup: float = WARMUP_SECONDS

    def rate_profile(self) -> RateProfile:
        p1, p2, p3 = self.phases
        return RateProfile.steps([(self.warmup, self.low), (p1, self.low), (p2, self.high), (p3, self.low)])

    def bounds(self) -> list[tuple[str, float, float]]:
        """(phase, start, end) in seconds from the profile start."""
        p1, p2, p3 = self.phases
        w = self.warmup
        t0, t1, t2, t3 = w, w + p1, w + p1 + p2, w + p1 + p2 + p3
        return [("P1", t0, t1), ("P2", t1, t2), ("P3", t2, t3)]

    @property
    def need_executor_seconds(self) -> float:
        return sum(n * p for n, p in zip(NEED, self.phases, strict=True))

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "phases_seconds": list(self.phases), "warmup_seconds": self.warmup}


EXECUTOR_RATE = 850.0  # rows/s one executor sustains here with 8 partitions (team notes: 820-900)
CVS_TRACE = "Twitter_volume_CVS.csv"
# the five hours of it around the default replay's four (autoscaler/tools/demo/traces/README.md):
# the on/off benchmark runs where ../shared/traces is not
BUNDLED_CVS_TRACE = Path(__file__).parents[1] / "demo" / "traces" / "Twitter_volume_CVS_2015-02-28.csv"


@dataclass(frozen=True)
class OnOffProfile:
    """A compressed stretch of a bursty shared trace, each of its steps one window.

    By default four hours of Twitter CVS from 2015-02-28 08:42 at 20x (a 5-minute step lasts
    15 s, the stretch 12 minutes): six bursts of one to three steps, the longest quiet stretch
    an hour of the trace (3 minutes here), its peak scaled to 2500 rows/s (3 executors' worth).
    The warm-up runs at 100 rows/s (the daemon's cost model needs batches).
    """

    trace: Path
    start: datetime = datetime(2015, 2, 28, 8, 42)
    seconds_per_day: float = 4320.0
    duration: float = 720.0
    peak_rate: float = 2500.0
    warmup_rate: float = 100.0
    warmup: float = WARMUP_SECONDS

    @cached_property  # read once: the command line checks it before Spark starts, the runs read it after
    def _trace_profile(self) -> RateProfile:
        trace = load_trace(self.trace)
        return compress_trace(trace, seconds_per_day=self.seconds_per_day, peak_rate=self.peak_rate, duration=self.duration, start=self.start)

    def rate_profile(self) -> RateProfile:
        return prefixed(self._trace_profile, self.warmup, self.warmup_rate)

    def bounds(self) -> list[tuple[str, float, float]]:
        p = self._trace_profile
        out = []
        for k, (a, b) in enumerate(pairwise(p.starts)):
            out.append((f"{'quiet' if p.rates[k] == 0 else 'burst'}-{k}", self.warmup + a, self.warmup + b))
        return out

    @property
    def need_executor_seconds(self) -> float:
        p = self._trace_profile
        return sum(max(1, math.ceil(r / EXECUTOR_RATE)) * (b - a) for (a, b), r in zip(pairwise(p.starts), p.rates, strict=False))

    def to_json(self) -> dict[str, Any]:
        return {
            "trace": self.trace.name,
            "start": self.start.isoformat(),
            "seconds_per_day": self.seconds_per_day,
            "duration_seconds": self.duration,
            "peak_rate": self.peak_rate,
            "warmup_seconds": self.warmup,
        }


@dataclass
class RunResult:
    name: str
    executor_seconds: float
    executors_per_phase: dict[str, float]
    peak_lag_per_phase: dict[str, float | None]
    min_executors: int
    max_executors: int
    lost_rows: int
    duplicate_rows: int
    notes: list[str] = field(default_factory=list)
    started_at: float = 0.0  # wall-clock seconds of the profile's start (T0 is its warm-up later)
    executor_timeline: list[tuple[float, int]] = field(default_factory=list)  # (s from start, executors) at each change
    quiet_stretches: list[QuietStretch] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "executor_seconds": round(self.executor_seconds, 1),
            "executors_per_phase": {k: round(v, 2) for k, v in self.executors_per_phase.items()},
            "peak_lag_seconds_per_phase": {k: (None if v is None else round(v, 1)) for k, v in self.peak_lag_per_phase.items()},
            "min_executors": self.min_executors,
            "max_executors": self.max_executors,
            "lost_rows": self.lost_rows,
            "duplicate_rows": self.duplicate_rows,
            "notes": self.notes,
            "executor_timeline": [[round(t, 1), n] for t, n in self.executor_timeline],
            "quiet_stretches": [q.to_json() for q in self.quiet_stretches],
        }


@dataclass(frozen=True)
class QuietStretch:
    """Consecutive windows without input, seconds from the profile's start: when the stretch
    began, when the query committed its last batch with rows (the backlog of the burst before
    it drained, and Spark's idle reports began), and when the executors first stood at the
    floor (None: not within the stretch)."""

    start: float
    end: float
    drained: float
    at_floor: float | None

    def to_json(self) -> dict[str, Any]:
        after = None if self.at_floor is None else round(self.at_floor - self.start, 1)
        after_idle = None if self.at_floor is None else round(max(0.0, self.at_floor - self.drained), 1)
        return {
            "start": round(self.start, 1),
            "end": round(self.end, 1),
            "drained": round(self.drained, 1),
            "at_floor": None if self.at_floor is None else round(self.at_floor, 1),
            "floor_after_quiet_seconds": after,
            "floor_after_idle_seconds": after_idle,
        }


def timeline(samples: list[tuple[float, int]], start: float) -> list[tuple[float, int]]:
    """The executor count at each change (and the first sample), seconds from ``start``."""
    out: list[tuple[float, int]] = []
    for t, n in samples:
        if not out or out[-1][1] != n:
            out.append((t - start, n))
    return out


def quiet_stretches(
    bounds: list[tuple[str, float, float]], changes: list[tuple[float, int]], commits: list[tuple[float, int]], floor: int
) -> list[QuietStretch]:
    """Each stretch of consecutive ``quiet-*`` windows of ``bounds``, read from the executor
    count's ``changes`` and the batch ``commits`` (done, rows), all in seconds from the start."""
    spans: list[tuple[float, float]] = []
    for name, a, b in bounds:
        if not name.startswith("quiet"):
            continue
        if spans and spans[-1][1] == a:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    out = []
    for a, b in spans:
        drained = max((done for done, rows in commits if a <= done < b and rows > 0), default=a)
        # from when on the count stays at the floor to the stretch's end (executors that
        # arrive for the burst's backlog after the stretch began count against it)
        before = [(a, n) for t, n in changes if t <= a][-1:]
        at_floor: float | None = None
        for t, n in before + [(t, n) for t, n in changes if a < t < b]:
            if n > floor:
                at_floor = None
            elif at_floor is None:
                at_floor = t
        out.append(QuietStretch(a, b, drained, at_floor))
    return out


class ExecutorSampler:
    """Counts the registered executors every ``interval`` through the driver's REST API (``url``,
    from :meth:`of`); none where the UI is off."""

    def __init__(self, url: str | None, interval: float = 1.0) -> None:
        self.url = url
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @classmethod
    def of(cls, spark: Any) -> ExecutorSampler:
        return cls(driver_api(spark, "executors"))

    def _run(self) -> None:
        while self.url is not None and not self._stop.wait(self.interval):
            try:
                count = len(parse_executors(get_json(self.url, timeout=2)))
            except (OSError, ValueError):
                continue  # a missed second: the step function carries the last count over it
            self.samples.append((time.time(), count))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def integrate(self, t0: float, t1: float) -> tuple[float, float, int, int]:
        """Executor-seconds, mean, min and max over [t0, t1] (step function between samples)."""
        inside = [(t, n) for t, n in self.samples if t0 <= t <= t1]
        if not inside:
            return 0.0, 0.0, 0, 0
        total = 0.0
        for (ta, na), (tb, _) in pairwise(inside):
            total += na * (tb - ta)
        total += inside[-1][1] * (t1 - inside[-1][0]) + inside[0][1] * (inside[0][0] - t0)
        counts = [n for _, n in inside]
        return total, total / (t1 - t0), min(counts), max(counts)


def floor_executors(kind: str) -> int:
    """The executors a run never goes below: all 6 for the static maximum, else 1."""
    return 6 if kind == "static-max" else 1


def _session(kind: str) -> Any:
    conf: dict[str, str | int | float | bool] = {"spark.executor.cores": "1"}
    if kind == "spark-dra":
        conf.update(
            {
                "spark.dynamicAllocation.enabled": "true",
                "spark.dynamicAllocation.minExecutors": "1",
                "spark.dynamicAllocation.maxExecutors": "6",
            }
        )
    return build_session(SparkSettings(master=MASTER, app_name=f"step-load-{kind}", conf=conf))


def run_one(kind: str, profile: LoadProfile, workdir: Path, log: Callable[[str], None]) -> RunResult:
    spark = _session(kind)
    out = workdir / kind / "out"
    ckpt = workdir / kind / "checkpoint"
    rates = profile.rate_profile()
    sampler = ExecutorSampler.of(spark)
    daemon = None
    query = None
    try:
        sampler.start()
        start = time.time() + 5.0
        build = trace_pipeline(profile=rates, start=start, cost_seconds=COST_SECONDS, out_dir=out)
        if kind.startswith("autoscaler"):
            from autoscaler.app.driver import DriverDaemon

            spec = PipelineSpec(
                "step",
                build,
                trigger=TRIGGER,
                initial_parallelism=PARTITIONS,
                min_parallelism=PARTITIONS,
                max_parallelism=PARTITIONS,
                manage_rate_limit=True,  # the trace source takes maxRowsPerBatch
            )
            settings = configure(None, daemon_settings(kind, workdir / kind), environ={})
            ticks = open(workdir / kind / "ticks.jsonl", "w")
            daemon = DriverDaemon(settings, specs=[spec], spark=spark, on_tick=lambda r: print(tick_line(r, start), file=ticks))
            daemon.start()
            threading.Thread(target=daemon.loop.run, daemon=True).start()  # type: ignore[union-attr]
        else:
            # like the baseline runs: the executors Spark starts with are registered first
            wanted = floor_executors(kind)
            while (sampler.samples[-1][1] if sampler.samples else 0) < wanted and time.time() < start + profile.warmup / 2:
                time.sleep(0.5)
            query = _start_plain(spark, build, ckpt)
        end = start + profile.bounds()[-1][2]
        while time.time() < end:
            time.sleep(min(10.0, max(0.0, end - time.time())))
            if query is not None and not query.isActive:  # e.g. a Python worker timed out under load
                log(f"  {kind}: query stopped ({query.exception()}); restarting it from its checkpoint")
                query = _start_plain(spark, build, ckpt)
            log(f"  {kind}: {time.time() - start:5.0f}s of {end - start:.0f}s, {sampler.samples[-1][1] if sampler.samples else '?'} executors")
    finally:
        sampler.stop()
        if daemon is not None:
            daemon.loop.stop()  # type: ignore[union-attr]
            daemon.shutdown()
        if query is not None:
            query.stop()
        stop_session(spark)
    return _evaluate(kind, profile, start, sampler, out, rates)


def daemon_settings(kind: str, checkpoints: Path) -> dict[str, Any]:
    """The daemon's settings for a run: ``autoscaler`` is the default policy with the demo's
    compressed time constants (a day of a trace lasts minutes here); ``autoscaler-target-utilization``
    the simpler policy at a target utilization of 0.8 and a band of 0.15."""
    if kind == "autoscaler":
        policy: dict[str, Any] = {"policy.name": "default", "policy.params": ACTIVE_PARAMS}
    else:
        policy = {"policy.name": "target-utilization", "policy.params": {"target_utilization": 0.8, "utilization_band": 0.15}}
    return {
        "mode": "active",
        "executors.min": 1,
        "executors.max": 6,
        "executors.initial": 1,
        "reconcile_interval": "2s",
        "resource_wait_timeout": "20s",
        "window.metrics_window": "30s",
        "normalize.scale_down_delay": "30s",
        "normalize.stabilization": "10s",
        **policy,
        "pipelines.checkpoint_root": str(checkpoints),
        "http.enabled": False,  # a benchmark needs no API, and must not collide with a running demo
    }


def _start_plain(spark: Any, build: Callable[[Any, PipelineContext], Any], ckpt: Path) -> Any:
    writer = build(spark, PipelineContext("step", PARTITIONS, str(ckpt), trigger_interval=TRIGGER))
    return (
        writer.queryName("step")
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime=f"{int(TRIGGER.total_seconds())} seconds")
        .start()
    )


def tick_line(r: Any, start: float) -> str:
    """One compact JSON line per reconcile tick, for looking into a run afterwards."""
    load = r.loads[0] if r.loads else None
    model = load.model if load else None
    return json.dumps(
        {
            "t": round(r.at.timestamp() - start, 1),
            "alive": r.executors_alive,
            "requested": r.executors_requested,
            "proposed": r.decision.proposed,
            "target": r.decision.target,
            "reason": r.decision.reason.value,
            "rate": None if not load or load.input_rate is None else round(load.input_rate),
            "lag": None if not load or load.lag is None else round(load.lag.total_seconds(), 1),
            "mu": None if not model else round(model.per_slot),
            "w": None if not model else round(model.per_task, 3),
            "o": None if not model else round(model.fixed, 3),
            "k": None if not model else round(model.contention, 3),
            "msg": r.proposal.message[:80],
        }
    )


def _evaluate(kind: str, profile: LoadProfile, start: float, sampler: ExecutorSampler, out: Path, rates: RateProfile) -> RunResult:
    per_phase: dict[str, float] = {}
    lags: dict[str, float | None] = {}
    total = 0.0
    lo, hi = 10**9, 0
    records = [json.loads(p.read_text()) for p in out.glob("batch-*.json")]
    for name, a, b in profile.bounds():
        seconds, mean, mn, mx = sampler.integrate(start + a, start + b)
        total += seconds
        per_phase[name] = mean
        lo, hi = min(lo, mn), max(hi, mx)
        phase_lags = [r["lag_seconds"] for r in records if r["lag_seconds"] is not None and start + a <= r["done"] < start + b]
        lags[name] = max(phase_lags) if phase_lags else None
    committed_max = max((r["max"] for r in records if r["max"] is not None), default=-1)
    check = verify_output(out, committed_max + 1)
    changes = timeline(sampler.samples, start)
    commits = [(r["done"] - start, r["rows"]) for r in records]
    floor = floor_executors(kind)
    return RunResult(
        kind, total, per_phase, lags, lo, hi, check.lost_rows, check.duplicate_rows, started_at=start,
        executor_timeline=changes, quiet_stretches=quiet_stretches(profile.bounds(), changes, commits, floor),
    )


def run_benchmark(
    runs: tuple[str, ...] = RUNS, profile: LoadProfile = StepProfile(), workdir: Path | None = None, log: Callable[[str], None] = print
) -> dict[str, Any]:
    own = workdir is None
    root = Path(workdir or tempfile.mkdtemp(prefix="step-load-"))
    results: dict[str, Any] = {}
    try:
        for kind in runs:
            log(f"run {kind} ...")
            results[kind] = run_one(kind, profile, root, log).to_json()
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)
    out = {"profile": profile.to_json(), "need_executor_seconds": profile.need_executor_seconds, "runs": results}
    if isinstance(profile, OnOffProfile):
        out["summary"] = on_off_summary(results)
    return out


def on_off_summary(results: dict[str, Any]) -> dict[str, Any]:
    """Per run: executor-seconds, the mean executors in the quiet and the burst windows, the
    peak lag of any window, and for each quiet stretch the seconds until the executors stood at
    the floor for good, from its start and from the query's last batch with rows; and our run's
    executor-seconds over Spark dynamic allocation's."""
    out: dict[str, Any] = {}
    for name, r in results.items():
        quiet = {k: v for k, v in r["executors_per_phase"].items() if k.startswith("quiet")}
        burst = {k: v for k, v in r["executors_per_phase"].items() if k.startswith("burst")}
        lags = [v for v in r["peak_lag_seconds_per_phase"].values() if v is not None]
        out[name] = {
            "executor_seconds": r["executor_seconds"],
            "mean_executors_quiet": round(sum(quiet.values()) / len(quiet), 2) if quiet else None,
            "mean_executors_burst": round(sum(burst.values()) / len(burst), 2) if burst else None,
            "peak_lag_seconds": max(lags) if lags else None,
        }
        stretches = r.get("quiet_stretches")
        if stretches:  # (results written before the stretches were kept have none)
            out[name]["floor_after_quiet_seconds"] = [q["floor_after_quiet_seconds"] for q in stretches]
            out[name]["floor_after_idle_seconds"] = [q["floor_after_idle_seconds"] for q in stretches]
    if "autoscaler" in results and "spark-dra" in results and results["spark-dra"]["executor_seconds"] > 0:
        out["autoscaler_over_spark_dra"] = round(results["autoscaler"]["executor_seconds"] / results["spark-dra"]["executor_seconds"], 3)
    return out


def format_table(result: dict[str, Any]) -> str:
    need = result["need_executor_seconds"]
    if "summary" in result:  # on-off: quiet and burst windows instead of three phases
        lines = [f"need: {need:.0f} executor-seconds", f"{'run':<30} {'exec-s':>8} {'x need':>7} {'quiet':>6} {'burst':>6} {'peak lag s':>10}"]
        for name, r in result["summary"].items():
            if not isinstance(r, dict):
                continue
            lag = "-" if r["peak_lag_seconds"] is None else f"{r['peak_lag_seconds']:.1f}"
            lines.append(
                f"{name:<30} {r['executor_seconds']:>8.0f} {r['executor_seconds'] / need:>7.2f} "
                f"{r['mean_executors_quiet'] or 0:>6.2f} {r['mean_executors_burst'] or 0:>6.2f} {lag:>10}"
            )
        for name, r in result["summary"].items():
            if isinstance(r, dict) and r.get("floor_after_idle_seconds"):
                after = ", ".join("not reached" if v is None else f"{v:.0f} s" for v in r["floor_after_idle_seconds"])
                lines.append(f"{name}, at the floor after each quiet stretch's last batch with rows: {after}")
        if "autoscaler_over_spark_dra" in result["summary"]:
            lines.append(f"autoscaler / spark-dra executor-seconds: {result['summary']['autoscaler_over_spark_dra']:.2f}")
        return "\n".join(lines)
    lines = [
        f"need (1/4/1 executors): {need:.0f} executor-seconds",
        f"{'run':<12} {'exec-s':>8} {'x need':>7}  {'executors P1/P2/P3':<20} {'peak lag s P1/P2/P3':<22} lost dup",
    ]
    for name, r in result["runs"].items():
        ex = "/".join(f"{r['executors_per_phase'][p]:.2f}" for p in ("P1", "P2", "P3"))
        lag = "/".join("-" if r["peak_lag_seconds_per_phase"][p] is None else f"{r['peak_lag_seconds_per_phase'][p]:.1f}" for p in ("P1", "P2", "P3"))
        lines.append(
            f"{name:<12} {r['executor_seconds']:>8.0f} {r['executor_seconds'] / need:>7.2f}  {ex:<20} {lag:<22} {r['lost_rows']} {r['duplicate_rows']}"
        )
    return "\n".join(lines)
