"""Command line: ``spark-autoscaler run | operator | demo | benchmark | simulate | dashboard | policies | settings-doc``."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from autoscaler._version import __version__


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def _exit_on_sigterm() -> None:
    """Handle SIGTERM (``kill``, ``timeout``, a pod stopping) as Ctrl-C, so the commands that start a
    local Spark cluster stop it (master, workers, the driver JVM) instead of leaving JVMs behind.

    Whatever handles SIGINT at that moment runs: PySpark's cancels the running jobs first, then
    raises KeyboardInterrupt (raising SystemExit instead left the driver JVM running).
    """

    def handle(signum: int, frame: Any) -> None:
        on_interrupt = signal.getsignal(signal.SIGINT)
        if callable(on_interrupt):
            on_interrupt(signal.SIGINT, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handle)


def _output_file(*suffixes: str) -> Callable[[str], Path]:
    """An argparse type: a file to write at the end of a command, checked before the command runs
    (a simulation or a demo must not end in an error about where its result goes)."""

    def parse(text: str) -> Path:
        path = Path(text)
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is a directory; name a file")
        if suffixes and path.suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(f"{text!r} must end in {' or '.join(suffixes)}")
        parent = path.parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r}: directory {str(parent)!r} does not exist")
        existed = path.exists()
        try:  # try it (permission bits say little to root): append to it, or create and remove it
            with path.open("a" if existed else "x"):
                pass
            if not existed:
                path.unlink()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} cannot be written: {exc.strerror or exc}") from None
        return path

    return parse


_IMAGE = (".png", ".svg", ".pdf")


def _writable_dir(path: Path, option: str) -> str | None:
    """Why ``path`` cannot serve as a working directory (created if missing), or None."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{option} {str(path)!r}: cannot be created: {exc.strerror or exc}"
    try:  # tried, as for output files: permission bits say little to root
        tempfile.TemporaryFile(dir=path).close()
    except OSError as exc:
        return f"{option} {str(path)!r}: is not writable ({exc.strerror or exc})"
    return None


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} must look like name=value")
    return key.strip(), value.strip()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _duration_arg(text: str) -> timedelta:
    """A positive duration (``30m``, ``2h``), read by the settings' own parser."""
    from autoscaler.core.settings import parse_duration

    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= timedelta(0):
        raise argparse.ArgumentTypeError(f"{text!r} must be longer than 0")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} must be within 0..65535 (0: any free port)")
    return value


def _add_http_flags(parser: argparse.ArgumentParser, defaults: bool) -> None:
    # `run` leaves them unset so the configuration file and environment decide; `demo` has no file
    parser.add_argument("--http-host", default="127.0.0.1" if defaults else None,
                        help="address of /metrics, health checks and the REST API (default 127.0.0.1)")
    parser.add_argument("--http-port", type=_port, default=8090 if defaults else None, help="their port (default 8090)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spark-autoscaler", description="Elastic scaling for Spark Structured Streaming")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="driver mode: host the pipelines of a module and scale them")
    run.add_argument("--config", "-c", type=Path, help="YAML configuration file")
    run.add_argument("--pipelines", help="pipeline module (.py file or dotted name); overrides pipelines.module")
    run.add_argument("--mode", choices=["auto", "reactive", "active"])
    run.add_argument("--policy")
    run.add_argument("--min-executors", type=int)
    run.add_argument("--max-executors", type=int)
    run.add_argument("--master", help="Spark master URL; overrides spark.master")
    run.add_argument("--dry-run", action="store_true", default=None, help="decide and report, do not act")
    run.add_argument("--check", action="store_true", help="validate configuration and pipelines, then exit")
    run.add_argument("--log-format", choices=["json", "console"], default="json")
    run.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO")
    run.add_argument("--state-file", type=Path, help="keep history and operator overrides in this file (state.path)")
    _add_http_flags(run, defaults=False)

    demo = sub.add_parser("demo", help="run the embedded demo on a local Spark cluster")
    demo.add_argument("--mode", choices=["active", "reactive"], default="active")
    demo.add_argument("--duration", type=_positive_float, default=180.0, help="seconds of replayed load (default 180)")
    demo.add_argument("--summary-json", type=_output_file(), help="write the summary as JSON to this file")
    demo.add_argument("--trace", type=Path, help="trace CSV (timestamp,value); default ../shared/traces/nyc_taxi.csv or the bundled copy")
    demo.add_argument("--seconds-per-day", type=_positive_float, default=150.0, help="compressed length of one trace day")
    demo.add_argument("--peak-rate", type=_positive_float, default=2800.0, help="rows/s at the trace's peak")
    demo.add_argument("--max-executors", type=_positive_int, default=6)
    demo.add_argument("--warmup", type=_non_negative_float, default=30.0, help="seconds at the trace's first rate before the trace starts")
    demo.add_argument("--workdir", type=Path, help="keep checkpoints, output and logs here (default: a temp dir)")
    demo.add_argument("--record", type=_output_file(), help="write every tick's metrics to this JSON-lines file (for `dashboard render`)")
    demo.add_argument("--no-http", action="store_true", help="do not serve /metrics and the REST API")
    _add_http_flags(demo, defaults=True)

    bench = sub.add_parser("benchmark", help="benchmarks on real Spark, and of the simulator's speed")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True)
    step = bench_sub.add_parser("step-load", help="our daemon vs Spark dynamic allocation vs static maximum")
    step.add_argument("--json", action="store_true", help="print one JSON object")
    step.add_argument("--runs", default="autoscaler,spark-dra,static-max", help="comma-separated subset")
    step.add_argument("--phases", default="120,180,180", help="seconds of the low, high and low phases")
    step.add_argument("--output", type=_output_file(), help="also write the JSON result to this file")
    step.add_argument("--workdir", type=Path, help="keep checkpoints, sink records and tick logs here")

    speed = bench_sub.add_parser("sim-speed", help="the simulator's time and instructions per tick, and a fingerprint of its decisions")
    speed.add_argument("--trace", type=Path, required=True, help="trace CSV with a 'timestamp,value' header (NAB format)")
    speed.add_argument("--policy", default="default", help="policy name (default: 'default')")
    speed.add_argument("--days", type=_positive_float, default=0.5, help="days simulated per timed run (default 0.5)")
    speed.add_argument("--repeats", type=_positive_int, default=3, help="timed runs (default 3)")
    speed.add_argument("--instructions", action="store_true", help="also count instructions per tick under valgrind's callgrind")
    speed.add_argument("--warm-days", type=_positive_float, default=1.05, help="with --instructions: days simulated before counting (default 1.05)")
    speed.add_argument("--ticks", type=_positive_int, default=400, help="with --instructions: ticks counted (default 400)")
    speed.add_argument("--fingerprint", action="store_true", help="also print a hash of every decision of a --days run (equal before and after a change: no decision moved)")
    speed.add_argument("--json", action="store_true", help="print one JSON object")

    load = bench_sub.add_parser(
        "load",
        help="the reconcile tick with many queries, and the REST API under concurrent clients (no Spark)",
        description="CPU time a reconcile tick takes with N queries (an application simulated in memory, the real "
        "reconciler, default policy) and how it grows with N; then the real HTTP server under concurrent clients while "
        "the daemon ticks: server errors, latency p50 and p99.",
    )
    load.add_argument("--queries", default="1,10,50,100", help="comma-separated query counts to time (default 1,10,50,100)")
    load.add_argument("--ticks", type=_positive_int, default=60, help="ticks timed per query count, after 30 of warm-up (default 60)")
    load.add_argument("--clients", type=_positive_int, default=50, help="concurrent API clients (default 50)")
    load.add_argument("--requests-per-client", type=_positive_int, default=40, help="requests each client sends (default 40)")
    load.add_argument("--json", action="store_true", help="print one JSON document")

    soak = bench_sub.add_parser(
        "soak",
        help="many rescales from the checkpoint on a local cluster, some under injected faults: nothing lost or duplicated",
        description="Drive rescales from the checkpoint of a stateless and a stateful (RocksDB) query on a local Spark "
        "cluster, with executor changes in between and every fifth rescale under an injected fault (an executor "
        "killed, a start that fails once, a stop mid-batch); then drain and check every row came out once.",
    )
    soak.add_argument("--rescales", type=_positive_int, default=20, help="rescales to drive (default 20)")
    soak.add_argument("--master", default="local-cluster[3,1,512]", help="Spark master (default local-cluster[3,1,512])")
    soak.add_argument("--fault-every", type=_positive_int, default=5, help="inject a fault into every N-th rescale (default 5)")
    soak.add_argument("--workdir", type=Path, help="keep checkpoints and output here (default: a temp dir)")
    soak.add_argument("--json", action="store_true", help="print one JSON document (progress lines go to stderr)")

    lat = bench_sub.add_parser("latencies", help="executor add/remove and query rescale latencies")
    lat.add_argument("--repeats", type=_positive_int, default=3)
    lat.add_argument("--json", action="store_true")
    lat.add_argument("--output", type=_output_file())

    dash = sub.add_parser("dashboard", help="the Grafana dashboard, drawn without Grafana")
    dash_sub = dash.add_subparsers(dest="dashboard", required=True)
    render = dash_sub.add_parser(
        "render",
        help="draw the dashboard's panels into a PNG, each panel's queries answered by a real Prometheus",
        description="Draw the Grafana dashboard's panels into a PNG. Each panel's PromQL is answered by a real "
        "Prometheus: a recording (`demo --record`) is backfilled into a throwaway server (needs `prometheus` "
        "and `promtool`, Debian package `prometheus`), or --prometheus asks a running one.",
    )
    source = render.add_mutually_exclusive_group(required=True)
    source.add_argument("--recording", type=Path, help="JSON lines written by `demo --record`")
    source.add_argument("--prometheus", metavar="URL", help="a running Prometheus that scrapes the daemon, e.g. http://localhost:9090")
    render.add_argument("--since", type=_duration_arg, default=None, help="with --prometheus: how far back to draw (default 1h)")
    render.add_argument("--step", type=_positive_float, default=15.0, help="with --prometheus: seconds between points (default 15)")
    render.add_argument("--output", type=_output_file(*_IMAGE), required=True, help="PNG to write")
    render.add_argument("--dashboard", type=Path, help="dashboard JSON (default: the one the package ships)")
    render.add_argument("--title", help="figure title")
    sim = sub.add_parser(
        "simulate",
        help="replay a workload trace through the real reconciler against a simulated Spark application",
        description="Simulate a policy (the real reconciler, a simulated cluster) on a timestamp,value trace "
        "and score it against an oracle with perfect foresight.",
    )
    sim.add_argument("--trace", type=Path, required=True, help="trace CSV with a 'timestamp,value' header (NAB format)")
    sim.add_argument("--policy", help="policy name (default: the recommended policy, 'default')")
    sim.add_argument("--compare", action="store_true", help="run every registered policy and print a table")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.add_argument("--plot", type=_output_file(*_IMAGE), help="write a PNG of input rate, capacity, executors and lag")
    sim.add_argument("--peak-executors", type=_positive_int, default=32, help="executors the trace's peak needs (default 32)")
    sim.add_argument("--max-executors", type=_positive_int, help="upper bound for policies (default 2 x peak)")
    sim.add_argument("--slo-lag-seconds", type=_positive_float, default=60.0, help="lag SLO in seconds (default 60)")
    sim.add_argument("--days", type=_positive_float, help="simulate only the first D days (default: the whole trace)")
    sim.add_argument("--seed", type=_non_negative_int, default=0, help="seed of the measurement noise (default 0)")
    sim.add_argument("--tick", type=_positive_float, default=10.0, help="reconcile interval in seconds (default 10)")
    sim.add_argument("--param", type=_key_value, action="append", default=[], metavar="NAME=VALUE", help="policy parameter")
    sim.add_argument("--set", type=_key_value, action="append", default=[], metavar="NAME=VALUE", help="simulator parameter (see docs/benchmarks.md)")
    sim.add_argument("--jobs", type=_positive_int, help="policies simulated in parallel with --compare (default 1)")

    op = sub.add_parser(
        "operator",
        help="run the SparkStreamingApp operator (Kubernetes)",
        description="Run the SparkStreamingApp operator: each app becomes a daemon that is its Spark driver (a StatefulSet), "
        "changes the daemon can take live go to its REST API, the rest rolls its pod (docs/kubernetes.md). "
        "Flags override the --config file, which the Helm chart renders.",
    )
    op.add_argument("--config", "-c", type=Path, help="the operator's YAML configuration (the chart's ConfigMap)")
    op.add_argument("--namespaces", type=_namespaces, help="comma-separated namespaces whose apps to run (a Role in each)")
    op.add_argument("--leader-election", action=argparse.BooleanOptionalAction, default=None,
                    help="hold a Lease so that one of several replicas acts (default: on)")
    op.add_argument("--lease-name", help="the Lease (default spark-autoscaler-operator)")
    op.add_argument("--lease-namespace", help="the Lease's namespace (default: the operator pod's)")
    op.add_argument("--resync-interval", help="reconcile every app (and poll its daemon) this often, e.g. 30s")
    op.add_argument("--workers", type=_positive_int, help="apps reconciled at once (default 4)")
    op.add_argument("--metrics-port", type=_port, help="port of /metrics, /healthz, /readyz (default 8080; 0: none)")
    op.add_argument("--kubeconfig", help="a kubeconfig (default: the pod's service account, else $KUBECONFIG)")
    op.add_argument("--once", action="store_true", help="reconcile every app once, then exit (no election)")
    op.add_argument("--log-format", choices=["json", "console"], default="json")
    op.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO")

    sub.add_parser("policies", help="list the registered scaling policies")
    doc = sub.add_parser("settings-doc", help="print the settings reference (Markdown)")
    doc.add_argument("--output", type=_output_file())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {
        "run": _cmd_run,
        "demo": _cmd_demo,
        "benchmark": _cmd_benchmark,
        "dashboard": _cmd_dashboard,
        "simulate": _cmd_simulate,
        "operator": _cmd_operator,
        "policies": _cmd_policies,
        "settings-doc": _cmd_settings_doc,
    }[args.command]
    if problem := _missing_extra(args):
        return _fail(problem)
    if args.command in ("simulate", "benchmark"):  # they name policies before anything is assembled
        from autoscaler.app.compose import load_policies

        load_policies()
    try:
        return handler(args)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where a command handles it so (_exit_on_sigterm)
        print("spark-autoscaler: interrupted", file=sys.stderr)
        return 130


# what each extra brings (pyproject.toml): the demo's data source hands Spark Arrow batches
_EXTRAS = {"demo": "pyarrow", "plots": "matplotlib"}


def _missing_extra(args: argparse.Namespace) -> str | None:
    """What a command needs beyond the daemon's own dependencies, when it is not installed."""
    needs = []
    if args.command == "demo" or (args.command == "benchmark" and args.benchmark in ("step-load", "latencies", "soak")):
        needs.append("demo")
    if args.command == "dashboard" or (args.command == "simulate" and args.plot):
        needs.append("plots")
    import importlib.util

    for extra in needs:
        if importlib.util.find_spec(_EXTRAS[extra]) is None:
            return f"`{args.command}` needs the {extra} extra ({_EXTRAS[extra]} is not installed): pip install 'spark-autoscaler[{extra}]'"
    return None


def _fail(message: str, code: int = 2) -> int:
    print(f"spark-autoscaler: error: {message}", file=sys.stderr)
    return code


def _cmd_run(args: argparse.Namespace) -> int:
    from autoscaler.app.compose import configure
    from autoscaler.runtime.config import SettingsError
    from autoscaler.runtime.logs import configure_logging
    from autoscaler.spark.pipelines import PipelineError, load_pipelines

    configure_logging(args.log_format, args.log_level)
    overrides = {
        "pipelines.module": args.pipelines,
        "mode": args.mode,
        "policy.name": args.policy,
        "executors.min": args.min_executors,
        "executors.max": args.max_executors,
        "spark.master": args.master,
        "dry_run": args.dry_run,
        "http.host": args.http_host,
        "http.port": args.http_port,
        "state.path": str(args.state_file) if args.state_file else None,
    }
    try:
        settings = configure(args.config, overrides)
        if not settings.pipelines.module:
            return _fail("no pipelines: pass --pipelines FILE.py or set pipelines.module in the config")
        specs = load_pipelines(settings.pipelines.module)
    except (SettingsError, PipelineError) as exc:
        return _fail(str(exc))
    from autoscaler.app.compose import open_store
    from autoscaler.runtime.state import StateStoreError
    from autoscaler.runtime.state.schema import restore_state
    from autoscaler.spark.kubernetes import DriverAddressError, kubernetes_driver_conf
    from autoscaler.spark.session import spark_conf

    try:
        # a k8s:// master with a driver address executors cannot reach is refused before anything starts
        kubernetes_driver_conf(settings.spark.master, spark_conf(settings.spark), os.environ)
    except DriverAddressError as exc:
        return _fail(str(exc))
    try:
        # an unreadable state file, one the reconciler could not restore or one that cannot be
        # written stops us before Spark starts
        store = open_store(settings)
        state = store.load() if store is not None else None
        if state:
            restore_state(state, str(store))
        if store is not None:
            store.check_writable()  # every tick saves: a store that cannot be written is found now
    except StateStoreError as exc:
        return _fail(str(exc))
    if args.check:
        saved = f"; {store} restorable" if state else ""
        print(f"configuration valid; pipelines: {', '.join(s.name for s in specs)}{saved}")
        return 0
    from autoscaler.app.driver import DriverDaemon
    from autoscaler.ops.auth import TokenFileError
    from autoscaler.ops.server import HttpServerError

    try:
        daemon = DriverDaemon(settings, specs=specs, state_store=store)
        daemon.install_signal_handlers()
        daemon.start()
    except (PipelineError, StateStoreError, HttpServerError, TokenFileError) as exc:
        return _fail(str(exc))
    daemon.run()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from autoscaler.tools.demo.run import DemoOptions, run_demo
    from autoscaler.tools.traces import TraceError

    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    _exit_on_sigterm()
    options = DemoOptions(
        mode=args.mode,
        duration=args.duration,
        trace=args.trace,
        seconds_per_day=args.seconds_per_day,
        peak_rate=args.peak_rate,
        max_executors=args.max_executors,
        warmup=args.warmup,
        workdir=args.workdir,
        http_host=args.http_host,
        http_port=args.http_port,
        http=not args.no_http,
        record=args.record,
    )
    from autoscaler.ops.server import HttpServerError

    try:
        summary = run_demo(options)
    except (TraceError, HttpServerError) as exc:
        return _fail(str(exc))
    if args.summary_json:
        args.summary_json.write_text(json.dumps(summary, indent=2) + "\n")
    ok = summary["lost_rows"] == 0 and summary["duplicate_rows"] == 0 and summary["all_rescales_explained"]
    return 0 if ok else 1


def _cmd_benchmark(args: argparse.Namespace) -> int:
    if args.benchmark == "latencies":
        return _cmd_latencies(args)
    if args.benchmark == "sim-speed":
        return _cmd_sim_speed(args)
    if args.benchmark == "load":
        return _cmd_load(args)
    if args.benchmark == "soak":
        return _cmd_soak(args)
    from autoscaler.tools.bench.step_load import (
        RUNS,
        StepProfile,
        format_table,
        run_benchmark,
    )

    runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    unknown = [r for r in runs if r not in RUNS]
    if unknown or not runs:
        return _fail(f"--runs: unknown run(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(RUNS)}")
    try:
        phases = tuple(float(p) for p in args.phases.split(","))
    except ValueError:
        return _fail(f"--phases: {args.phases!r} must be three numbers of seconds")
    if len(phases) != 3 or not all(math.isfinite(p) and p > 0 for p in phases):
        return _fail(f"--phases: {args.phases!r} must be three positive numbers of seconds")
    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    _exit_on_sigterm()
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    result = run_benchmark(runs, StepProfile(phases=phases), workdir=args.workdir, log=log)
    if args.output:
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


def _cmd_soak(args: argparse.Namespace) -> int:
    from autoscaler.runtime.logs import configure_logging
    from autoscaler.tools.bench.soak import SoakError, run_soak

    configure_logging("console", "INFO", stream=sys.stderr)  # stdout carries the result
    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    _exit_on_sigterm()
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spark-autoscaler-soak-")))
        try:
            result = run_soak(args.rescales, workdir=workdir, master=args.master, fault_every=args.fault_every, log=log)
        except SoakError as exc:
            return _fail(f"soak stopped: {exc}")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"rescales {result['rescales']}, rows in {result['rows_in']}, out {result['rows_out']}, lost {result['lost_rows']}, "
              f"duplicated {result['duplicate_rows']}; pause p50 {result['pause_seconds']['p50']} s, p95 {result['pause_seconds']['p95']} s, "
              f"max {result['pause_seconds']['max']} s; faults: {len(result['faults'])}")
    return 0 if result["lost_rows"] == 0 and result["duplicate_rows"] == 0 else 1


def _cmd_load(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.load import format_table, run

    try:
        counts = [int(n) for n in args.queries.split(",")]
    except ValueError:
        return _fail(f"--queries: {args.queries!r} must be comma-separated whole numbers")
    if not counts or any(n < 1 or n > 1000 for n in counts):
        return _fail(f"--queries: {args.queries!r}: each count must be within 1..1000")
    result = run(sorted(counts), ticks=args.ticks, clients=args.clients, requests_per_client=args.requests_per_client)
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


def _cmd_sim_speed(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.sim_speed import (
        SimSpeedError,
        decision_fingerprint,
        instructions_per_tick,
        wall_per_tick,
    )
    from autoscaler.tools.sim.runner import SimulationError
    from autoscaler.tools.traces import TraceError, load_trace
    from policies import PolicyError, policy_class

    try:
        policy_class(args.policy)
        load_trace(args.trace)  # a bad trace is told before anything runs
        result = wall_per_tick(args.trace, policy=args.policy, days=args.days, repeats=args.repeats)
        if args.fingerprint:
            result["fingerprint"] = decision_fingerprint(args.trace, policy=args.policy, days=args.days)
        if args.instructions:
            counted = instructions_per_tick(args.trace, policy=args.policy, warm_days=args.warm_days, ticks=args.ticks)
            result.update({k: counted[k] for k in ("warm_days", "instructions_per_tick")})
            result["counted_ticks"] = counted["ticks"]
    except (PolicyError, TraceError, SimulationError, SimSpeedError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['policy']} on {result['trace']}, {result['days']:g} day(s) ({result['ticks']} ticks) x {result['repeats']}: "
        f"{result['us_per_tick_min']} us a tick (median {result['us_per_tick_median']}); "
        f"30 days at a 10-second tick: {result['projected_30_days_seconds']} s"
    )
    m = result["machine"]
    print(f"measured on {m['python']}, {m['cpu']}, {m['cores']} cores, L2 {_kib(m['l2_kib'])}, L3 {_kib(m['l3_kib'])}")
    if "instructions_per_tick" in result:
        print(f"instructions a tick: {result['instructions_per_tick']:,} ({result['counted_ticks']} ticks from day {result['warm_days']:g})")
    if "fingerprint" in result:
        print(f"decisions fingerprint: {result['fingerprint']}")
    return 0


def _kib(size: int | None) -> str:
    return "unknown" if size is None else f"{size // 1024} MiB" if size >= 1024 and size % 1024 == 0 else f"{size} KiB"


def _cmd_latencies(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.latencies import measure

    _exit_on_sigterm()
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    result = measure(args.repeats, log=log)
    if args.output:
        args.output.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    import time

    from autoscaler.tools.dashboard.prometheus import PrometheusError, PrometheusQueries
    from autoscaler.tools.dashboard.recording import Recording
    from autoscaler.tools.dashboard.render import DASHBOARD, render_dashboard, render_recording

    dashboard = args.dashboard or DASHBOARD
    if not dashboard.is_file():
        return _fail(f"--dashboard: {dashboard} not found (it ships with the package as autoscaler/ops/monitoring/); pass --dashboard PATH")
    if args.prometheus is None and args.since is not None:
        return _fail("--since goes with --prometheus (a recording is drawn whole)")
    try:
        if args.recording is not None:
            try:
                recording = Recording.load(args.recording)
            except (OSError, ValueError) as exc:
                return _fail(f"--recording: {exc}")
            render_recording(recording, args.output, dashboard=dashboard, title=args.title)
        else:
            end = time.time()
            since = args.since.total_seconds() if args.since is not None else 3600.0
            queries = PrometheusQueries(args.prometheus, end - since, end, args.step)
            render_dashboard(queries, args.output, dashboard=dashboard, title=args.title)
    except PrometheusError as exc:
        return _fail(str(exc))
    print(f"wrote {args.output}")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    import yaml

    from autoscaler.runtime.config import SettingsError
    from autoscaler.tools.sim import SimConfig
    from autoscaler.tools.sim.compare import compare_policies, format_table
    from autoscaler.tools.sim.runner import SimulationError, simulate
    from autoscaler.tools.traces import TraceError, load_trace
    from policies import PolicyError, policy_class

    try:
        trace = load_trace(args.trace)
    except TraceError as exc:
        return _fail(str(exc))
    days = trace.span_seconds / 86400
    if args.days is not None and args.days > days:
        # not an error (a caller may ask for "up to D days"), but not silent either
        print(f"spark-autoscaler: note: trace {trace.name!r} covers {days:.2f} days; simulating all of it, not {args.days:g}", file=sys.stderr)
    try:
        config = SimConfig().with_changes(dict(args.set))
    except ValueError as exc:
        return _fail(f"--set: {exc}")
    params = {k: yaml.safe_load(v) if v else v for k, v in args.param}
    options = dict(
        peak_executors=args.peak_executors,
        max_executors=args.max_executors,
        slo_lag_seconds=args.slo_lag_seconds,
        days=args.days,
        seed=args.seed,
        config=config,
        tick=args.tick,
        series=args.plot is not None,
    )
    if args.compare:
        # options that name one policy would be ignored by a run of every policy: refused
        for given, option in ((bool(args.param), "--param"), (args.policy is not None, "--policy")):
            if given:
                return _fail(f"{option} applies to one policy; it cannot be combined with --compare")
        try:
            with _progress_line(trace.name) as progress:
                results = compare_policies(trace, jobs=args.jobs or 1, progress=progress, **options)
        except (ValueError, SettingsError, SimulationError) as exc:
            return _fail(str(exc))
        if args.plot:
            from autoscaler.tools.sim.plot import plot_compare

            plot_compare(results, args.plot)
        if args.json:
            print(json.dumps({"trace": trace.name, "results": [r.to_json() for r in results]}, indent=2))
        else:
            print(format_table(results))
        return 0
    if args.jobs is not None:
        return _fail("--jobs runs the policies of --compare in parallel; one policy runs in one process")
    policy = args.policy if args.policy is not None else "default"
    try:
        policy_class(policy)
        with _progress_line(trace.name) as progress:
            one = None if progress is None else (lambda share: progress(policy, share))
            result = simulate(trace, policy=policy, params=params, progress=one, **options)
    except (PolicyError, SettingsError, ValueError, SimulationError) as exc:
        return _fail(str(exc))
    if args.plot:
        from autoscaler.tools.sim.plot import plot_run

        plot_run(result, args.plot)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_table([result]))
    return 0


@contextlib.contextmanager
def _progress_line(trace: str) -> Iterator[Callable[[str, float], None] | None]:
    """How far a simulation is, on one rewritten line of a terminal's stderr (long runs take
    minutes); None, and nothing written, when stderr is not a terminal (logs, pipes, tests)."""
    stream = sys.stderr
    if not stream.isatty():
        yield None
        return
    shown = [""]

    def show(policy: str, share: float) -> None:
        text = f"simulating {policy} on {trace}: {share:.0%}"
        stream.write("\r" + text.ljust(len(shown[0])))
        stream.flush()
        shown[0] = text

    try:
        yield show
    finally:
        if shown[0]:
            stream.write("\r" + " " * len(shown[0]) + "\r")  # leave the terminal as it was
            stream.flush()


def _namespaces(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r}: name at least one namespace")
    return names


def _cmd_operator(args: argparse.Namespace) -> int:
    from autoscaler.operator.settings import OperatorSettingsError, load_operator_settings
    from autoscaler.runtime.logs import configure_logging

    configure_logging(args.log_format, args.log_level)
    overrides = {
        "namespaces": args.namespaces,
        "leaderElection.enabled": args.leader_election,
        "leaderElection.leaseName": args.lease_name,
        "leaderElection.leaseNamespace": args.lease_namespace,
        "resyncInterval": args.resync_interval,
        "workers": args.workers,
        "metricsPort": args.metrics_port,
    }
    try:
        settings = load_operator_settings(args.config, overrides)
    except OperatorSettingsError as exc:
        return _fail(str(exc))
    from autoscaler.operator.main import run_operator

    try:
        return run_operator(settings, kubeconfig=args.kubeconfig, once=args.once)
    except Exception as exc:  # the client's config loaders raise their own types
        if type(exc).__name__ == "ConfigException":
            return _fail(f"cannot reach the Kubernetes API: {exc}")
        raise


def _cmd_policies(args: argparse.Namespace) -> int:
    from autoscaler.app.compose import load_policies
    from policies import policy_class, policy_names, resolve_name

    load_policies()
    for name in policy_names():
        cls = policy_class(name)
        real = resolve_name(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        alias = f" (alias of {real})" if real != name else ""
        print(f"{name}{alias}: {doc}")
    return 0


def _cmd_settings_doc(args: argparse.Namespace) -> int:
    from autoscaler.tools.settings_doc import render_settings_doc

    text = render_settings_doc()
    if args.output:
        args.output.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
