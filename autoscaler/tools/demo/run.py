"""``spark-autoscaler demo``: the daemon scaling a trace-driven stream on a real local cluster.

A standalone master and worker processes run on loopback (no Kubernetes). The NYC taxi trace
is compressed so a day passes in ``seconds_per_day`` and replayed from 3 a.m., so the load
climbs through the morning, peaks in the evening and falls at night.

* ``--mode active``: the workers for ``max_executors`` exist (spare capacity); the daemon
  requests and removes executors through Spark's executor-request API.
* ``--mode reactive``: the demo itself adds and kills worker processes on a schedule, as spot
  capacity would come and go (a killed worker is one running an executor the driver has
  registered, so the application loses it); the daemon never requests executors and rescales the query from
  its checkpoint so its partitions fit the cores that exist.

At the end the query is stopped at a batch boundary, the rest of the input is drained from
the checkpoint, and every generated row is checked to have come out exactly once.

While it runs, the daemon serves ``/metrics``, ``/healthz``, ``/readyz`` and the REST API on
``--http-host:--http-port`` (default 127.0.0.1:8090); the control endpoints are enabled when
``$SPARK_AUTOSCALER_API_TOKEN`` is set. ``--record FILE`` writes every tick's metrics for
``spark-autoscaler dashboard render``. The summary lists every rescale with the audit entry
that explains it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

from autoscaler.app.compose import configure
from autoscaler.app.signals import StopSignals
from autoscaler.core.history import EXECUTORS
from autoscaler.core.model import TickRecord
from autoscaler.core.settings import Settings, SparkSettings
from autoscaler.runtime.audit import explain_event
from autoscaler.runtime.logs import configure_logging
from autoscaler.spark.executors import parse_executors
from autoscaler.spark.pipelines import PipelineSpec
from autoscaler.spark.rest import driver_api, get_json
from autoscaler.spark.session import build_session, stop_session
from autoscaler.spark.standalone import LocalStandaloneCluster
from autoscaler.tools.bench.step_load import ExecutorSampler
from autoscaler.tools.dashboard.recording import MetricsRecorder
from autoscaler.tools.demo.explain import explain_rescale, explain_tick
from autoscaler.tools.demo.params import ACTIVE_PARAMS, COMPRESSED_TIME_PARAMS, DEMO_MAX_EXECUTORS, WARMUP_SECONDS, default_peak_rate
from autoscaler.tools.demo.workload import drain, trace_pipeline, verify_output
from autoscaler.tools.traces import RateProfile, compress_trace, load_trace, prefixed

BUNDLED_TRACE = Path(__file__).parent / "traces" / "nyc_taxi.csv"
PIPELINE = "taxi"


@dataclass(frozen=True)
class DemoOptions:
    mode: str = "active"
    duration: float = 180.0
    trace: Path | None = None
    seconds_per_day: float = 150.0
    peak_rate: float | None = None  # rows/s at the trace's busiest moment; None: sized to the cores (default_peak_rate)
    max_executors: int = DEMO_MAX_EXECUTORS
    workdir: Path | None = None
    cost_seconds: float = 0.001  # per-row work
    start_hour: float = 3.0
    warmup: float = WARMUP_SECONDS  # seconds at the trace's first rate before the trace starts (cold start)
    http_host: str = "127.0.0.1"
    http_port: int = 8090
    http: bool = True
    record: Path | None = None  # write each tick's metrics here (JSON lines)

    def peak(self) -> float:
        """Rows/s at the trace's busiest moment: ``peak_rate``, else sized to the cores the demo can use."""
        return self.peak_rate if self.peak_rate is not None else default_peak_rate(self.max_executors)




def default_trace() -> Path:
    """``../shared/traces/nyc_taxi.csv`` from the working directory or the checkout, else the bundled copy."""
    candidates = [
        Path.cwd().parent / "shared" / "traces" / "nyc_taxi.csv",
        Path(__file__).resolve().parents[4] / "shared" / "traces" / "nyc_taxi.csv",
    ]
    return next((p for p in candidates if p.is_file()), BUNDLED_TRACE)


def reactive_schedule(duration: float) -> list[tuple[float, str, int]]:
    """(seconds, 'add' | 'kill', workers): capacity arriving and vanishing like spot nodes."""
    return [
        (0.15 * duration, "add", 1),
        (0.30 * duration, "add", 2),
        (0.55 * duration, "kill", 1),  # SIGKILL mid-batch: a lost node
        (0.75 * duration, "kill", 2),
    ]


class LiveView:
    """One line per reconcile tick: time, load, rates, lag, executors, and what the daemon does and why."""

    HEADER = f"{'time':>6} {'load':>6} {'in':>6} {'proc':>6} {'backlog':>8} {'lag':>7} {'exec':>9} {'parts':>5}  what the daemon does, and why"
    LEGEND = (
        "        time: seconds since the trace began (negative: the warm-up before it); load: rows/s the trace generates; "
        "in, proc: rows/s arriving and processed, as the last batch measured them; backlog: rows the source holds "
        "that no batch has taken; lag: age of the oldest row not yet processed; exec: executors registered/requested "
        "(reactive mode requests none: -); parts: partitions"
    )

    def __init__(
        self, start: float, load_at: Callable[[float], float], out: TextIO | None = None, slo: timedelta | None = None
    ) -> None:
        self.start = start
        self.load_at = load_at  # rows/s generated at t seconds from `start` (negative during the warm-up)
        # sys.stdout when called, not when this module was imported (a default of sys.stdout was
        # the stream of that moment: under pytest's capture, a file closed by the next test)
        self.out = out = out if out is not None else sys.stdout
        self.slo = slo  # the lag the query should stay under (slo.target_lag): said when it is missed
        self.records: list[TickRecord] = []
        print(self.HEADER, file=out)
        print(self.LEGEND, file=out, flush=True)

    def __call__(self, r: TickRecord) -> None:
        self.records.append(r)
        print(self.line(r, time.time() - self.start), file=self.out, flush=True)

    def line(self, r: TickRecord, t: float) -> str:
        load = next((x for x in r.loads if x.name == PIPELINE), None)
        # reactive mode requests nothing (the API's target is null there): no target to show
        target = r.executors_requested if r.mode.requesting and r.executors_requested is not None else "-"
        # a lag of exactly zero is a falsy timedelta: test for None, not truth
        lag = load.lag.total_seconds() if load is not None and load.lag is not None else None
        rate, processing, backlog, parts = (None, None, None, None) if load is None else (
            load.input_rate, load.processing_rate, load.backlog_rows, load.parallelism
        )
        seconds = round(t)  # an int: the warm-up's last -0.4 s prints as 0s, where :5.0f printed "-0s"
        return (
            f"{seconds:5d}s {self.load_at(t):6.0f} {_num(rate, 6)} {_num(processing, 6)} {_num(backlog, 8)} "
            f"{_num(lag, 6, '.1f', 's')} {r.executors_alive:>4}/{target:<4} {_num(parts, 5)}  {explain_tick(r)}{self._over_slo(lag)}"
        )

    def _over_slo(self, lag: float | None) -> str:
        """A missed SLO named (the reactive demo ran 75 s over its 60 s with no word of it)."""
        if self.slo is None or lag is None or lag <= self.slo.total_seconds():
            return ""
        return f"; the lag is over the {self.slo.total_seconds():g} s SLO"


def _num(v: float | None, width: int, fmt: str = ".0f", unit: str = "") -> str:
    """``v`` right-aligned in ``width`` columns, then ``unit``; ``-`` in the same columns when unknown."""
    return "-".rjust(width + len(unit)) if v is None else format(v, f"{width}{fmt}") + unit


def run_demo(
    options: DemoOptions, out: TextIO | None = None, signals: StopSignals | None = None, profile: RateProfile | None = None
) -> dict[str, Any] | None:
    """Run the demo and return its summary; None when a signal stopped it early (``signals``:
    SIGINT/SIGTERM, installed by the caller; once the query runs they stop it at a batch boundary).
    ``profile``: :func:`demo_profile` of ``options`` when the caller has it already (the command
    line checks it before anything starts), so the trace is not read twice. ``out``: the console,
    sys.stdout when None (as it is when called)."""
    out = out if out is not None else sys.stdout
    configure_logging("console", level="WARNING", stream=sys.stderr)
    trace_path = options.trace or default_trace()
    profile = profile if profile is not None else demo_profile(options)
    own_dir = options.workdir is None
    workdir = Path(options.workdir or tempfile.mkdtemp(prefix="spark-autoscaler-demo-")).resolve()
    if not own_dir and (workdir / "checkpoints").exists():
        shutil.rmtree(workdir / "checkpoints")
        shutil.rmtree(workdir / "output", ignore_errors=True)
    print(f"demo: {options.mode} mode, trace {trace_path.name}, {options.duration:.0f}s at a peak of {options.peak():.0f} rows/s, "
          f"workdir {workdir}", file=out, flush=True)
    cluster = LocalStandaloneCluster(workdir / "cluster")
    spark = None
    # 20-30 s here before the first line of the live view: said, not left silent
    print("starting a local Spark master and worker, then the daemon's driver ...", file=out, flush=True)
    try:
        cluster.start(workers=1)
        spark = build_session(
            SparkSettings(master=cluster.url, app_name="spark-autoscaler-demo", conf={"spark.executor.cores": "1"})
        )
        return _run(options, profile, workdir, cluster, spark, out, signals or StopSignals())
    finally:
        if spark is not None:
            stop_session(spark)
        cluster.stop()
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)


# what one executor of the demo takes on this machine: a Spark worker JVM and an executor JVM
# (about 0.25 GiB resident each in a demo of 3 executors, 2026-12-01) and the executor's
# Python workers (about 0.2 GiB)
DEMO_EXECUTOR_BYTES = 768 << 20


def executors_room_problem(max_executors: int, meminfo: Path = Path("/proc/meminfo")) -> str | None:
    """Why this machine has no room for ``max_executors`` of the demo's executors, or None (also
    where the memory available cannot be read). Every executor of the demo is a worker and an
    executor JVM on this machine: asked for 100,000, the demo started worker JVMs until its
    Python workers failed to connect back, and ran on, failing."""
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024  # kB
    except (OSError, KeyError, ValueError, IndexError):
        return None
    room = max(1, available // DEMO_EXECUTOR_BYTES)
    if max_executors <= room:
        return None
    return (
        f"--max-executors {max_executors}: the demo runs a Spark worker and an executor JVM for each on this machine "
        f"(about {DEMO_EXECUTOR_BYTES / 2**30:g} GiB each), and {available / 2**30:.1f} GiB are available: at most {room}"
    )


def peak_rate_problem(peak_rate: float, max_executors: int, cost_seconds: float = DemoOptions.cost_seconds) -> str | None:
    """Why the demo's executors could never carry ``peak_rate``, or None: at ``cost_seconds`` of
    work a row, a one-core executor processes at most ``1 / cost_seconds`` rows/s. Asked for 1e9
    rows/s, the demo started Spark and generated rows no executor count could take, and the
    check after the run drains the whole input first (1.8e11 rows in 180 s)."""
    most = max_executors / cost_seconds
    if peak_rate <= most:
        return None
    return (
        f"--peak-rate {peak_rate:g}: {max_executors} one-core executor(s) at {cost_seconds * 1000:g} ms of work a row carry "
        f"at most {most:g} rows/s before any overhead, so the backlog could only grow, and the check after the run drains "
        f"it all; give at most {most:g}, or more --max-executors"
    )


def demo_profile(options: DemoOptions) -> RateProfile:
    """The load the demo replays (before the warm-up); TraceError for a trace it cannot replay.
    The command line asks for it before anything starts, so that a problem is told at once."""
    return compress_trace(
        load_trace(options.trace or default_trace()),
        seconds_per_day=options.seconds_per_day,
        peak_rate=options.peak(),
        duration=options.duration,
        start_hour=options.start_hour,
    )


def demo_settings(options: DemoOptions, workdir: Path) -> Settings:
    """The daemon's configuration for the demo (validated like any user's)."""
    return configure(
        None,
        {
            "mode": options.mode,
            "executors.min": 1,
            "executors.max": options.max_executors,
            "executors.initial": 1,
            "reconcile_interval": "2s",
            "resource_wait_timeout": "30s",
            "request_timeout": "45s",  # an executor takes 25-30 s to register on a loaded 2-core box
            "window.metrics_window": "20s",
            "normalize.scale_down_delay": "10s",
            "normalize.stabilization": "10s",
            "normalize.query_rescale_cooldown": "10s",
            "policy.params": ACTIVE_PARAMS if options.mode == "active" else COMPRESSED_TIME_PARAMS,
            "pipelines.checkpoint_root": str(workdir / "checkpoints"),
            "pipelines.stop_timeout": "30s",  # a batch takes seconds here: a stop never waits longer
            "http.enabled": options.http,
            "http.host": options.http_host,
            "http.port": options.http_port,
        },
        environ={},
    )


def _run(
    options: DemoOptions,
    profile: RateProfile,
    workdir: Path,
    cluster: LocalStandaloneCluster,
    spark: Any,
    out: TextIO,
    signals: StopSignals,
) -> dict[str, Any] | None:
    from autoscaler.app.driver import DriverDaemon

    output = workdir / "output"
    settings = demo_settings(options, workdir)
    # The first batches of a new query (and of new executors) are slow because cold: the source
    # runs `warmup` seconds at the trace's first rate before the trace itself starts at `start`.
    source_profile = prefixed(profile, options.warmup, profile.rate_at(0))
    source_start = time.time() + 3.0
    start = source_start + options.warmup
    build = trace_pipeline(profile=source_profile, start=source_start, cost_seconds=options.cost_seconds, out_dir=output)
    spec = PipelineSpec(
        PIPELINE,
        build,
        trigger=timedelta(seconds=2),
        # active mode: 2 x the most executors, so every executor count gets full (or >= 80 %
        # full) task waves and executors change without restarting the query; the policy
        # keeps them (align_partitions off). Reactive mode shows the restarts.
        initial_parallelism=2 * options.max_executors if options.mode == "active" else None,
        min_parallelism=1,
        max_parallelism=4 * options.max_executors,
    )
    view = LiveView(start, lambda t: source_profile.rate_at(t + options.warmup), out, slo=settings.slo.target_lag)
    recorder: MetricsRecorder | None = None

    def on_tick(record: TickRecord) -> None:
        view(record)
        if recorder is not None:
            recorder(record)

    daemon = DriverDaemon(settings, specs=[spec], spark=spark, on_tick=on_tick)
    if options.record is not None:
        recorder = MetricsRecorder(daemon.registry, options.record)
    daemon.start()
    assert daemon.loop is not None and daemon.host is not None
    if daemon.http is not None:
        print(
            f"metrics {daemon.http.url}/metrics, API {daemon.http.url}/docs, audit trail {daemon.http.url}/api/v1/decisions",
            file=out,
            flush=True,
        )
    sampler = ExecutorSampler.of(spark)
    sampler.start()
    if options.mode == "active":
        for _ in range(options.max_executors - 1):
            cluster.add_worker()  # spare capacity: used only when the daemon asks for it
    else:
        _schedule_workers(cluster, start, reactive_schedule(options.duration), out, registered_executors(spark))
    loop = threading.Thread(target=daemon.loop.run, daemon=True)
    loop.start()
    signals.graceful()  # from here on a signal stops the query at a batch boundary, like the end does
    end = start + options.duration
    while time.time() < end and not signals.requested.is_set():
        signals.requested.wait(min(1.0, max(0.0, end - time.time())))
    daemon.loop.stop()
    loop.join(30)
    sampler.stop()
    # batches back to back (a backlog) leave no gap to stop in: the next one is planned as one
    # ends. A whole run's drain below replays it; a run stopped early runs it to its end, so the
    # checkpoint is left at a batch boundary, as `run` leaves it
    for report in daemon.host.stop_all(finish_cut_batches=signals.requested.is_set()):
        print(f"{time.time() - start:5.0f}s   {report.describe()}", file=out, flush=True)
    signals.install(graceful=False)  # nothing left to drain gracefully: a signal now interrupts
    if recorder is not None:
        recorder.close()
    try:
        if signals.requested.is_set():
            print("stopped early: no summary (the rows are checked after a whole run)", file=out, flush=True)
            return None
        print("draining the rest of the input from the checkpoint ...", file=out, flush=True)
        drain(spark, build, PIPELINE, workdir / "checkpoints" / PIPELINE, daemon.host.views()[0].params.parallelism)
        return _summary(options, source_profile, source_start, start, end, sampler, daemon, view.records, output, out)
    finally:
        daemon.stop_http()


def registered_executors(spark: Any) -> Callable[[], list[str]]:
    """The ids of the executors registered with the driver now, from its REST API; none while
    it does not answer (the kill then falls back to a worker the master says is in use)."""
    url = driver_api(spark, "executors")

    def ids() -> list[str]:
        try:
            return [e.id for e in parse_executors(get_json(url, timeout=2))] if url else []
        except (OSError, ValueError):
            return []

    return ids


def _schedule_workers(
    cluster: LocalStandaloneCluster, start: float, plan: list[tuple[float, str, int]], out: TextIO, registered: Callable[[], list[str]]
) -> None:
    def act(action: str, count: int) -> None:
        for _ in range(count):
            if action == "add":
                cluster.add_worker()
            else:
                # a lost node the application was using: one whose executor the driver has
                # registered (on a slow start a new worker's executor can take 20 s to), else
                # the newest running any
                cluster.remove_worker(cluster.worker_hosting(registered()), kill=True)
        print(f"{time.time() - start:5.0f}s   [cluster] {'added' if action == 'add' else 'killed'} {count} worker(s)", file=out, flush=True)

    for at, action, count in plan:
        timer = threading.Timer(max(0.0, start + at - time.time()), act, args=(action, count))
        timer.daemon = True
        timer.start()


def peak_lag_seen(records: Sequence[TickRecord]) -> float | None:
    """The largest lag the daemon saw at a tick (any query): the summary's other figure counts
    the batches that ended within the run only, and a batch still running at the end (a stall
    after workers were killed) is not among them."""
    lags = [load.lag.total_seconds() for r in records for load in r.loads if load.lag is not None]
    return round(max(lags), 1) if lags else None


def _summary(
    options: DemoOptions,
    source_profile: RateProfile,
    source_start: float,
    start: float,
    end: float,
    sampler: ExecutorSampler,
    daemon: Any,
    records: list[TickRecord],
    output: Path,
    out: TextIO,
) -> dict[str, Any]:
    rows_in = source_profile.cumulative(end - source_start + 1e-6)  # warm-up rows included: all checked
    check = verify_output(output, rows_in, lag_from=start, lag_until=end)
    seconds, mean, lo, hi = sampler.integrate(start, end)
    events = daemon.reconciler.history.events
    executor_changes = [e for e in events if e.subject == EXECUTORS]
    query_rescales = [e for e in events if e.subject != EXECUTORS]
    pauses = [e.pause.total_seconds() for e in query_rescales if e.pause is not None]
    summary: dict[str, Any] = {
        "mode": options.mode,
        "duration_seconds": options.duration,
        "peak_rate": options.peak(),
        "executor_seconds": round(seconds, 1),
        "mean_executors": round(mean, 2),
        "rescales": len(executor_changes) + len(query_rescales),
        "executor_changes": len(executor_changes),
        "query_rescales": len(query_rescales),
        "scaled_up": any(e.to_value > e.from_value for e in executor_changes) or (options.mode == "reactive" and hi > lo),
        "scaled_down": any(e.to_value < e.from_value for e in executor_changes) or (options.mode == "reactive" and hi > lo),
        "rescale_pause_seconds": [round(p, 2) for p in pauses],
        "min_executors": lo,
        "max_executors": hi,
        "rows_in": rows_in,
        "rows_out": check.rows_out,
        "lost_rows": check.lost_rows,
        "duplicate_rows": check.duplicate_rows,
        "max_lag_seconds": None if check.max_lag_seconds is None else round(check.max_lag_seconds, 1),
        "max_lag_seen_seconds": peak_lag_seen(records),
        "decisions": [
            {
                "at_seconds": round(e.at.timestamp() - start, 1),
                "subject": e.subject,
                "from": e.from_value,
                "to": e.to_value,
                "reason": e.reason.value,
                "pause_seconds": None if e.pause is None else round(e.pause.total_seconds(), 2),
                "audit": explain_event(daemon.reconciler.audit, e),
            }
            for e in events
        ],
    }
    summary["all_rescales_explained"] = all(d["audit"] is not None for d in summary["decisions"])
    ticks = {r.at: r for r in records}
    for d, e in zip(summary["decisions"], events, strict=True):
        tick = ticks.get(e.at)
        d["why"] = explain_rescale(tick, e.subject) if tick is not None else None
    print(
        "\nsummary: executor-seconds {executor_seconds}, executors {min_executors}..{max_executors}, "
        "{executor_changes} executor change(s), {query_rescales} query rescale(s) from the checkpoint\n"
        "         rows in {rows_in}, out {rows_out}, lost {lost_rows}, duplicated {duplicate_rows}, "
        "max lag {max_lag_seconds}s of the batches that ended in the run, {max_lag_seen_seconds}s seen at a tick".format(**summary),
        file=out,
        flush=True,
    )
    for d in summary["decisions"]:
        print(f"  {d['at_seconds']:6.1f}s  {summary_line(d)}", file=out, flush=True)
    return summary


def summary_line(d: dict[str, Any]) -> str:
    """One rescale of the summary: what changed, why (the live view's words), and its audit entry."""
    what = f"executors {d['from']} -> {d['to']}" if d["subject"] == EXECUTORS else f"{d['subject']}: partitions {d['from']} -> {d['to']}"
    why = d.get("why") or d["reason"]
    if d["subject"] != EXECUTORS and d["pause_seconds"] is not None:
        why += f", paused {d['pause_seconds']:.1f} s"
    audit = d["audit"]
    ref = f"audit #{audit['id']}" if audit else "NOT IN THE AUDIT TRAIL"
    return f"{what}: {why} ({ref})"
