"""Command line: ``spark-autoscaler run | operator | demo | benchmark | simulate | dashboard | policies | settings-doc``."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import signal
import sys
import tempfile
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from autoscaler._version import __version__
from autoscaler.tools.demo.params import DEMO_MAX_EXECUTORS, PEAK_RATE_MAX, PEAK_RATE_PER_CORE, WARMUP_SECONDS, default_peak_rate, usable_cores

INTERRUPTED = 130  # exit code after Ctrl-C or SIGTERM cut a command short (128 + SIGINT, as shells report it)
READER_GONE = 141  # exit code when stdout's reader went away (`| head -1`): 128 + SIGPIPE, as shells report `yes | head -1`


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


def _hours_window(text: str) -> tuple[float, float]:
    """An argparse type: ``FROM:TO`` hours since the start of a run, FROM < TO (to seconds)."""
    start, sep, end = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not FROM:TO (hours since the start, e.g. 47.5:48.5)")
    lo, hi = _non_negative_float(start), _positive_float(end)
    if lo >= hi:
        raise argparse.ArgumentTypeError(f"{text!r}: the window must end after it starts")
    return lo * 3600.0, hi * 3600.0


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


def _dir_path(text: str) -> Path:
    """A directory path; an empty one is refused (it read as the working directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: name a directory")
    return Path(text)


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


def _quantile(text: str) -> float:
    value = _finite_float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be within (0, 1]")
    return value


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


def _key_yaml(text: str) -> tuple[str, Any]:
    """An argparse type: ``NAME=VALUE`` (``--param``, ``--setting``), the value read as YAML (a number,
    a duration such as 7d, a list) by the configuration file's loader."""
    import yaml

    from autoscaler.runtime.config import UniqueKeyLoader

    key, value = _key_value(text)
    if not value:
        return key, value
    try:
        return key, yaml.load(value, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects
    except yaml.YAMLError as exc:
        # the problem alone ("expected ',' or ']'"): its position is that of a one-line text
        problem = getattr(exc, "problem", None) or str(exc)
        raise argparse.ArgumentTypeError(f"{text!r}: the value cannot be read as YAML ({problem})") from None


# daemon settings a simulation takes from its own options: a --setting of them was silently
# ignored (reconcile_interval: the simulator steps by --tick) or bounded the policies but not the
# oracles they are judged against (executors.max)
SIMULATION_FLAGS = {
    "reconcile_interval": "the simulation steps by --tick",
    "executors.max": "set it with --max-executors (it bounds the oracles too)",
    "slo.target_lag": "set it with --slo-lag-seconds (it judges the oracles too)",
    "executors.initial": "the simulation starts with the executors its first load needs",
    "executors.cores": "set it with --set cores_per_executor (the simulated executors' cores)",
}
# benchmark traces runs every policy at the same tick, SLO, ceilings and executors, which it has no option for
TRACES_FLAGS = {
    "reconcile_interval": "every run of the benchmark steps by the same tick",
    "executors.max": "every run's ceiling is twice what its --scales peak needs",
    "slo.target_lag": "every run is judged at the same SLO, the oracles too",
    "executors.initial": "every run starts with the executors its first load needs",
    "executors.cores": "every run's executors have the simulator's default cores",
}
# the effectful shell: a simulation runs no Spark, pipeline, HTTP server, state store or audit file
NOT_SIMULATED = ("spark", "pipelines", "http", "state", "audit")


def _given_twice(args: argparse.Namespace) -> str | None:
    """A ``--param``, ``--set`` or ``--setting`` key given twice, or None: the last won silently,
    where a configuration file refuses a key given twice."""
    for option in ("param", "set", "setting"):
        keys = [key for key, _ in getattr(args, option, None) or ()]
        if twice := sorted({key for key in keys if keys.count(key) > 1}):
            return f"--{option} {twice[0]} is given twice"
    return None


def _setting_keys(settings: dict[str, Any]) -> list[str]:
    """The dotted keys ``--setting`` values set (``executors={max: 3}`` sets ``executors.max``)."""

    def keys(prefix: str, value: Any) -> list[str]:
        if isinstance(value, dict) and value:
            return [k for name, inner in value.items() for k in keys(f"{prefix}.{name}", inner)]
        return [prefix]

    return sorted(k for key, value in settings.items() for k in keys(key, value))


def _settings_problem(settings: dict[str, Any], max_executors: int, flags: dict[str, str] = SIMULATION_FLAGS) -> str | None:
    """What is wrong with ``--setting`` values for a simulation whose policies are bounded by
    ``max_executors``, or None: each must be a daemon setting with a valid value that the
    simulation uses and takes from no option of its own (``flags``: setting -> why not); the
    policy is chosen by --policy/--policies and --param."""
    from autoscaler.runtime.config import SettingsError, load_settings

    keys = _setting_keys(settings)
    if chosen := [k for k in keys if k == "policy" or k.startswith("policy.")]:
        return f"--setting {chosen[0]}: choose the policy with --policy/--policies and its parameters with --param"
    for key in keys:
        if key in flags:
            return f"--setting {key}: {flags[key]}"
        if key.split(".")[0] in NOT_SIMULATED:
            return f"--setting {key}: not used by a simulation (it runs no Spark, pipeline, HTTP server, state store or audit file)"
    try:  # within the simulation's bounds, not the daemon's default maximum (8)
        # last: a dotted key merges into an `executors` mapping given before it (it is not among them)
        load_settings(None, {**settings, "executors.max": max_executors}, environ={})
    except SettingsError as exc:
        return f"--setting: {exc}"
    return None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _master_url(text: str) -> str:
    """A Spark master URL as the daemon's settings take it (``spark.master``)."""
    from pydantic import ValidationError

    from autoscaler.core.settings import SparkSettings

    try:
        SparkSettings(master=text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return text


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
        raise argparse.ArgumentTypeError(f"{text!r} must be within 0..65535")  # what 0 means is the flag's: its help says
    return value


class _HelpFormatter(argparse.HelpFormatter):
    """Help that reads as a man page: paragraphs wrapped to the terminal, examples and lists
    (a paragraph whose later lines are indented) kept as written, and each option's default at
    the end of its text (unless the text names it already, or there is none)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in text.split("\n\n"):
            lines = paragraph.splitlines()
            if len(lines) > 1 and all(line.startswith(" ") for line in lines[1:]):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False))
        return "\n\n".join(out)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def _command(sub: Any, name: str, summary: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """A subcommand: ``summary`` in the list of commands, ``description``, ``epilog`` (examples) and
    the exit codes in its own help."""
    if "exit codes:" not in epilog:
        epilog = f"{epilog}\n\n{EXIT_CODES}"
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description, epilog=epilog, formatter_class=_HelpFormatter)
    return parser


@functools.cache
def _configured_default(key: str) -> Any:
    """The built-in default of a configuration key (``executors.max``), from the one place it is declared."""
    from autoscaler.core.settings import Settings

    value: Any = Settings()
    for part in key.split("."):
        value = getattr(value, part)
    return getattr(value, "value", value)  # an enum by its value


def _from_config(key: str) -> str:
    """How ``run`` documents an option left to the configuration: its key and built-in default."""
    return f"{key}; default: the configuration's, else {_configured_default(key)}"


def _address(text: str) -> str:
    """An argparse type: an address to bind to, checked as ``http.host`` is."""
    from autoscaler.core.settings import listen_address

    try:
        return listen_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_http_flags(parser: argparse.ArgumentParser, defaults: bool) -> None:
    # `run` leaves them unset so the configuration file and environment decide; `demo` has no file
    host = "" if defaults else f" ({_from_config('http.host')})"
    parser.add_argument("--http-host", type=_address, default="127.0.0.1" if defaults else None, metavar="ADDRESS",
                        help=f"address to serve /metrics, /healthz, /readyz and the REST API on{host}")
    port = "" if defaults else f" ({_from_config('http.port')})"
    parser.add_argument("--http-port", type=_port, default=8090 if defaults else None, metavar="PORT",
                        help=f"port of the same, 0 for any free port{port}")


EXIT_CODES = """exit codes:
  0    done (run: stopped by SIGTERM or Ctrl-C after every query stopped at a batch boundary)
  1    the command ran and found a failure (demo: a row lost or duplicated, a rescale not explained)
  2    invalid arguments, configuration or pipelines; nothing was started
  130  interrupted by Ctrl-C or SIGTERM before it was done (demo, benchmarks: no result)
  141  the reader of the output went away (a pipe into head, say)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-autoscaler",
        description="Elastic scaling for Apache Spark Structured Streaming: the daemon watches the executors and "
        "the streaming queries of an application, requests or releases executors through Spark's own API (active "
        "mode) or adapts to the executors there are (reactive mode), and rescales queries from their checkpoint.",
        epilog="Start with `spark-autoscaler demo` (a local Spark cluster, a replayed day of NYC taxi rides), "
        "then `spark-autoscaler run --pipelines FILE.py`. `spark-autoscaler COMMAND --help` describes a command.\n\n"
        "examples:\n  spark-autoscaler demo\n  spark-autoscaler run --pipelines pipelines.py --master spark://host:7077\n\n"
        + EXIT_CODES,
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    _run_parser(sub)
    _demo_parser(sub)
    _benchmark_parser(sub)
    _dashboard_parser(sub)
    _simulate_parser(sub)
    _operator_parser(sub)
    _command(sub, "policies", "list the registered scaling policies",
             "List the scaling policies: the built-in ones and those installed through the "
             "`spark_autoscaler.policies` entry point, with the first line of each one's description.",
             "example:\n  spark-autoscaler policies")
    doc = _command(sub, "settings-doc", "print the settings reference (Markdown)",
                   "Print the reference of every configuration key (YAML key, environment variable, type, default, "
                   "meaning) as Markdown: docs/settings.md is generated by it.",
                   "example:\n  spark-autoscaler settings-doc --output docs/settings.md")
    doc.add_argument("--output", type=_output_file(), metavar="FILE", help="write it to FILE instead of stdout")
    return parser


def _run_parser(sub: Any) -> None:
    run = _command(
        sub, "run", "driver mode: host the pipelines of a module and scale them",
        "Driver mode: create the Spark session, start every @pipeline of a module and scale them until stopped. "
        "Logs go to stdout, one JSON object per line (--log-format console for a terminal); /metrics, health "
        "checks and the REST API are served on --http-host:--http-port.\n\n"
        "SIGTERM or Ctrl-C (to the process or its whole process group) stops every query at a batch boundary, "
        "logs one `query_stopped` line per query, then stops Spark; the Spark JVMs run in a session of their own, "
        "so the signal reaches the daemon first. Settings: a YAML file (--config), environment variables "
        "(SPARK_AUTOSCALER_EXECUTORS__MAX=10, see `settings-doc`), then these options, each overriding the last.",
        "examples:\n"
        "  spark-autoscaler run --pipelines pipelines.py --master 'local-cluster[3,1,1024]'\n"
        "  spark-autoscaler run --config autoscaler.yaml --check        # validate only, start nothing\n"
        "  spark-autoscaler run --config autoscaler.yaml --state-file state.json --mode reactive\n\n" + EXIT_CODES,
    )
    run.add_argument("--config", "-c", type=Path, metavar="FILE", help="YAML configuration file (default: none; built-in defaults)")
    run.add_argument("--pipelines", metavar="MODULE", help="pipeline module, a .py file or a dotted name (pipelines.module; default: the configuration's)")
    run.add_argument("--mode", choices=["auto", "reactive", "active"],
                     help="auto: active where the cluster manager grants executor requests, else reactive; active: "
                     f"request and release executors; reactive: adapt to the executors there are ({_from_config('mode')})")
    run.add_argument("--policy", metavar="NAME", help=f"scaling policy, see `spark-autoscaler policies` ({_from_config('policy.name')})")
    run.add_argument("--min-executors", type=int, metavar="N", help=f"fewest executors ({_from_config('executors.min')})")
    run.add_argument("--max-executors", type=int, metavar="N", help=f"most executors ({_from_config('executors.max')})")
    run.add_argument("--master", metavar="URL", help=f"Spark master URL ({_from_config('spark.master')})")
    run.add_argument("--dry-run", action="store_true", default=None, help="decide and report, never act (dry_run; default: the configuration's, else off)")
    run.add_argument("--check", action="store_true", help="validate the configuration, the state file and the pipelines, then exit")
    run.add_argument("--log-format", choices=["json", "console"], default="json", help="json: one object per line; console: for a person")
    run.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO", help="lowest level logged")
    run.add_argument("--state-file", type=Path, metavar="FILE",
                     help="keep the scaling history and operator overrides in FILE across restarts (state.path; default: in memory only)")
    _add_http_flags(run, defaults=False)


def _demo_parser(sub: Any) -> None:
    demo = _command(
        sub, "demo", "run the embedded demo on a local Spark cluster",
        "Start a standalone Spark master and workers on 127.0.0.1, replay a compressed day of a trace (NYC taxi "
        "rides by default) through a streaming query with 1 ms of work per row, and let the daemon scale it. "
        "One line per reconcile tick shows the load, the rates, the lag, the executors and what the daemon does "
        "and why; at the end every row is checked to have come out exactly once, and a summary lists each "
        "rescale with its audit entry. docs/first-hour.md explains how to read it.\n\n"
        "active mode: spare workers exist and the daemon requests and releases executors. reactive mode: the "
        "demo adds and kills workers on a schedule, as spot capacity would, and the daemon restarts the query "
        "from its checkpoint so its partitions fit the cores. Ctrl-C or SIGTERM stops the query at a batch "
        "boundary and everything the demo started (exit code 130).",
        "examples:\n"
        "  spark-autoscaler demo\n"
        "  spark-autoscaler demo --mode reactive --duration 300\n"
        "  spark-autoscaler demo --record run.jsonl && spark-autoscaler dashboard render --recording run.jsonl --output d.png\n\n"
        "while it runs:\n"
        "  curl -s localhost:8090/api/v1/status\n"
        "  curl -s 'localhost:8090/api/v1/decisions?kind=decision&limit=5'",
    )
    demo.add_argument("--mode", choices=["active", "reactive"], default="active",
                      help="active: the daemon requests and releases executors; reactive: workers come and go on a schedule")
    demo.add_argument("--duration", type=_positive_float, default=180.0, metavar="SECONDS", help="seconds of replayed load")
    demo.add_argument("--summary-json", type=_output_file(), metavar="FILE", help="also write the summary as JSON to FILE")
    demo.add_argument("--trace", type=Path, metavar="CSV",
                      help="trace with a 'timestamp,value' header (default: ../shared/traces/nyc_taxi.csv, else the bundled copy)")
    demo.add_argument("--seconds-per-day", type=_positive_float, default=150.0, metavar="SECONDS",
                      help="how long one day of the trace lasts in the demo (--duration may hold at most 10,000 of the trace's steps)")
    demo.add_argument("--peak-rate", type=_positive_float, metavar="ROWS",
                      help=f"rows per second at the trace's busiest moment (default: {PEAK_RATE_PER_CORE:g} for each core the demo "
                      f"can use, this machine's or its executors' where they are fewer, at most {PEAK_RATE_MAX:g}: "
                      f"{default_peak_rate(DEMO_MAX_EXECUTORS):g} here with {DEMO_MAX_EXECUTORS} executors on {usable_cores()} "
                      "cores; every Spark JVM of the demo shares them)")
    demo.add_argument("--max-executors", type=_positive_int, default=DEMO_MAX_EXECUTORS, metavar="N",
                      help="most executors (and, in active mode, the workers started); each is a worker and an executor JVM "
                      "on this machine, so at most what its available memory has room for (about 0.75 GiB each)")
    demo.add_argument("--warmup", type=_non_negative_float, default=WARMUP_SECONDS, metavar="SECONDS",
                      help="seconds at the trace's first rate before the trace starts (the first batches are slow)")
    demo.add_argument("--workdir", type=Path, metavar="DIR", help="keep checkpoints, output and the logs of the Spark master, workers and executors in DIR (the driver's reach the console) (default: a temporary directory, removed)")
    demo.add_argument("--record", type=_output_file(), metavar="FILE",
                      help="write every tick's metrics to FILE, JSON lines, for `dashboard render`")
    demo.add_argument("--no-http", action="store_true", help="do not serve /metrics and the REST API")
    _add_http_flags(demo, defaults=True)


def _real_spark_flags(parser: argparse.ArgumentParser, runs: bool) -> None:
    """The flags every real-Spark comparison takes: --json, --runs (when it has several runs), --output, --workdir."""
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout instead of a summary")
    if runs:
        parser.add_argument("--runs", default="autoscaler,spark-dra,static-max", metavar="LIST", help="comma-separated subset of the runs")
    parser.add_argument("--output", type=_output_file(), metavar="FILE", help="also write the JSON result to FILE")
    parser.add_argument("--workdir", type=Path, metavar="DIR", help="keep checkpoints, sink records and tick logs in DIR (default: a temporary directory, removed)")


def _warmup_flag(parser: argparse.ArgumentParser, rate: str) -> None:
    parser.add_argument("--warmup", type=_non_negative_float, default=WARMUP_SECONDS, metavar="SECONDS",
                        help=f"seconds at {rate} before the measured phases: the JVMs' first batches are slow (default: {WARMUP_SECONDS:g})")


def _benchmark_parser(sub: Any) -> None:
    bench = _command(sub, "benchmark", "benchmarks on real Spark, and of the simulator's speed",
                     "Measure the daemon: against Spark's dynamic allocation on a real local cluster (step-load, on-off), "
                     "the simulator against the same load on that cluster (sim-to-real), the latencies of its actions "
                     "(latencies), the reconcile tick and the API under load (load), many rescales under faults (soak), and the "
                     "simulator's speed (sim-speed). "
                     "docs/benchmarks.md holds the results.",
                     "examples:\n  spark-autoscaler benchmark step-load --help\n  spark-autoscaler benchmark latencies --json")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True, title="benchmarks", metavar="BENCHMARK")
    step = _command(
        bench_sub, "step-load", "our daemon vs Spark dynamic allocation vs static maximum",
        "Replay a 400 -> 2500 -> 400 rows/s step on local-cluster[6,1,512] three ways (this daemon, Spark's "
        "dynamic allocation, a static maximum) and print the executor-seconds, the executors and the peak lag "
        "of each phase. Progress goes to stderr.",
        "examples:\n  spark-autoscaler benchmark step-load\n  spark-autoscaler benchmark step-load --runs autoscaler --phases 60,60,60 --json | jq .runs",
    )
    _real_spark_flags(step, runs=True)
    step.add_argument("--phases", default="120,180,180", metavar="S1,S2,S3", help="seconds of the low, high and low phases")
    _warmup_flag(step, "the low rate")

    onoff = _command(
        bench_sub, "on-off", "a compressed bursty trace: our daemon vs Spark dynamic allocation vs static maximum",
        "Replay a compressed stretch of a bursty shared trace (Twitter CVS: bursts, then nothing) on a local "
        "cluster three ways and print the executor-seconds and how many executors each run held while the "
        "input was quiet. Progress goes to stderr.",
        "example:\n  spark-autoscaler benchmark on-off --json --output on-off.json",
    )
    _real_spark_flags(onoff, runs=True)
    onoff.add_argument("--trace", type=Path, metavar="CSV", help="trace to compress (default: ../shared/traces/Twitter_volume_CVS.csv, else the bundled five hours of it the default replay takes)")
    _warmup_flag(onoff, "100 rows/s")

    s2r = _command(
        bench_sub, "sim-to-real", "the step load on the local cluster and in the simulator set up with what that run measured",
        "Run the step load with this daemon on the local cluster, then the same load in the simulator set up with "
        "the latencies and batch costs that run measured, and print both with the simulator's error.",
        "example:\n  spark-autoscaler benchmark sim-to-real --json",
    )
    _real_spark_flags(s2r, runs=False)

    speed = _command(
        bench_sub, "sim-speed", "the simulator's time and instructions per tick, and a fingerprint of its decisions",
        "Time the simulator (the real reconciler against a simulated application) per tick, optionally count "
        "instructions under valgrind, and hash every decision of a run: equal fingerprints before and after a "
        "change mean no decision moved.",
        "example:\n  spark-autoscaler benchmark sim-speed --trace ../shared/traces/nyc_taxi.csv --fingerprint --json",
    )
    speed.add_argument("--trace", type=Path, required=True, metavar="CSV", help="trace with a 'timestamp,value' header (NAB format)")
    speed.add_argument("--policy", default="default", metavar="NAME", help="policy to simulate")
    speed.add_argument("--days", type=_positive_float, default=0.5, help="days simulated per timed run")
    speed.add_argument("--repeats", type=_positive_int, default=3, metavar="N", help="timed runs")
    speed.add_argument("--instructions", action="store_true", help="also count instructions per tick under valgrind's callgrind")
    speed.add_argument("--warm-days", type=_positive_float, default=1.05, metavar="DAYS", help="with --instructions: days simulated before counting")
    speed.add_argument("--ticks", type=_positive_int, default=400, metavar="N", help="with --instructions: ticks counted")
    speed.add_argument("--fingerprint", action="store_true",
                       help="also print a hash of every decision of a --days run (equal before and after a change: no decision moved)")
    speed.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout")

    traces = _command(
        bench_sub, "traces", "every policy on every trace, whole, at two scales; the default policy judged against the targets",
        "Simulate each policy on each trace, whole, at each scale (peak: the peak needs 32 executors; p99: the 99th "
        "percentile needs 16), one result file per run in --results (a run whose file is there is not run again: stop "
        "and resume at will), then print the default policy's figures against the targets of docs/benchmarks.md: at "
        "most 1.2x the rescale-budget bound, SLO violations at most 0.5 %, fewer than 24 rescales a day, overshoot at "
        "most 5 %, no baseline both cheaper and with fewer SLO violations.",
        "examples:\n  spark-autoscaler benchmark traces --results docs/results/traces --jobs 2\n"
        "  spark-autoscaler benchmark traces --results docs/results/traces --policies default --scales p99\n"
        "  spark-autoscaler benchmark traces --results docs/results/traces --report-only --json\n"
        "  spark-autoscaler benchmark traces --results /tmp/change --policies default --jobs 2 --compare-to docs/results/traces\n"
        "  spark-autoscaler benchmark traces --results /tmp/week --policies default --days 7 --jobs 2   # a screening",
    )
    traces.add_argument("--traces", type=Path, nargs="+", metavar="CSV|DIR",
                        help="trace files, or directories of *.csv traces (default: ../shared/traces)")
    traces.add_argument("--results", type=_dir_path, required=True, metavar="DIR", help="one JSON result per run: DIR/SCALE/POLICY-TRACE.json")
    traces.add_argument("--policies", metavar="LIST", help="comma-separated policies to run (default: every registered policy); the report judges 'default' from its results, run now or before")
    traces.add_argument("--scales", default="peak,p99", metavar="LIST", help="comma-separated scales: peak, p99 (default: both)")
    traces.add_argument("--jobs", type=_positive_int, default=1, metavar="N", help="runs simulated in parallel, one process each")
    traces.add_argument("--param", type=_key_yaml, action="append", default=[], metavar="NAME=VALUE",
                        help="a parameter of the one policy run, e.g. --policies default --param hindsight=7d; repeatable; "
                        "kept in each result, and a result run with other parameters is refused")
    traces.add_argument("--setting", type=_key_yaml, action="append", default=[], metavar="KEY=VALUE",
                        help="a daemon setting for every run (dotted key, as in docs/settings.md), e.g. "
                        "normalize.scale_down_delay=0s; repeatable; kept and checked on resume like --param")
    traces.add_argument("--days", type=_positive_float, metavar="D",
                        help="simulate only the first D days of each trace (a screening in minutes; each result keeps its days, "
                        "and results of other days are refused); default: the whole traces")
    traces.add_argument("--report-only", action="store_true", help="run nothing; report the results there are")
    traces.add_argument("--compare-to", type=Path, metavar="DIR",
                        help="also print each policy's results beside those in DIR (another --results directory): before -> "
                        "after on each trace and scale, and on how many runs each figure went lower, stayed even or went higher")
    traces.add_argument("--json", action="store_true", help="print the report as one JSON document on stdout (progress goes to stderr)")

    load = _command(
        bench_sub, "load", "the reconcile tick with many queries, and the REST API under concurrent clients (no Spark)",
        "CPU time a reconcile tick takes with N queries (an application simulated in memory, the real reconciler, the "
        "default policy, metrics and audit trail) and how it grows with N; the CPU of one hindsight price (the default "
        "policy's rescale price over 1 and 7 days of remembered spiky load); then the real HTTP server under concurrent "
        "clients while the daemon ticks: server errors, latency p50 and p99. Loopback only, bounded in count and time.",
        "example:\n  spark-autoscaler benchmark load --queries 1,10,50,100 --clients 50 --json",
    )
    load.add_argument("--queries", default="1,10,50,100", metavar="N[,N...]", help="comma-separated query counts to time")
    load.add_argument("--ticks", type=_positive_int, default=60, metavar="N", help="ticks timed per query count, after 30 of warm-up")
    load.add_argument("--clients", type=_positive_int, default=50, metavar="N", help="concurrent API clients (at most 1000)")
    load.add_argument("--requests-per-client", type=_positive_int, default=40, metavar="N", help="requests each client sends")
    load.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout")

    soak = _command(
        bench_sub, "soak", "many rescales from the checkpoint on a local cluster, some under injected faults: nothing lost or duplicated",
        "Drive rescales from the checkpoint of a stateless and a stateful (RocksDB) query on a local Spark cluster, with "
        "executor changes in between and every N-th rescale under an injected fault (an executor killed, a start that "
        "fails once, a stop mid-batch); then drain and check every row came out once (docs/reliability.md). Exit code 1 "
        "when a row was lost or duplicated.",
        "example:\n  spark-autoscaler benchmark soak --rescales 100 --json > soak.json",
    )
    soak.add_argument("--rescales", type=_positive_int, default=20, metavar="N", help="rescales to drive")
    soak.add_argument("--master", type=_master_url, default="local-cluster[3,1,512]", metavar="URL", help="Spark master")
    soak.add_argument("--fault-every", type=_positive_int, default=5, metavar="N", help="inject a fault into every N-th rescale")
    soak.add_argument("--workdir", type=Path, metavar="DIR", help="keep checkpoints and output here (default: a temp dir)")
    soak.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout (progress goes to stderr)")

    lat = _command(
        bench_sub, "latencies", "executor add/remove and query rescale latencies",
        "Measure on local-cluster[4,1,512] how long adding and removing an executor takes, and a query rescale "
        "from its checkpoint (the decision to the first batch at the new scale, and the pause without batches).",
        "example:\n  spark-autoscaler benchmark latencies --repeats 5 --json",
    )
    lat.add_argument("--repeats", type=_positive_int, default=3, metavar="N", help="measurements of each action")
    lat.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout")
    lat.add_argument("--output", type=_output_file(), metavar="FILE", help="also write the JSON result to FILE")


def _dashboard_parser(sub: Any) -> None:
    dash = _command(sub, "dashboard", "the Grafana dashboard, drawn without Grafana",
                    "Draw the shipped Grafana dashboard's panels into an image, each panel's PromQL answered by a real Prometheus.",
                    "example:\n  spark-autoscaler dashboard render --recording run.jsonl --output dashboard.png")
    dash_sub = dash.add_subparsers(dest="dashboard", required=True, title="actions", metavar="ACTION")
    render = _command(
        dash_sub, "render", "draw the dashboard's panels into a PNG, each panel's queries answered by a real Prometheus",
        "Draw the Grafana dashboard's panels into a PNG. Each panel's PromQL is answered by a real "
        "Prometheus: a recording (`demo --record`) is backfilled into a throwaway server (needs `prometheus` "
        "and `promtool`, Debian package `prometheus`), or --prometheus asks a running one.",
        "examples:\n"
        "  spark-autoscaler dashboard render --recording run.jsonl --output dashboard.png\n"
        "  spark-autoscaler dashboard render --prometheus http://localhost:9090 --since 6h --output dashboard.png",
    )
    source = render.add_mutually_exclusive_group(required=True)
    source.add_argument("--recording", type=Path, metavar="FILE", help="JSON lines written by `demo --record`")
    source.add_argument("--prometheus", type=_http_url, metavar="URL", help="a running Prometheus that scrapes the daemon, e.g. http://localhost:9090")
    render.add_argument("--since", type=_duration_arg, default=None, metavar="DURATION", help="with --prometheus: how far back to draw, e.g. 30m (default: 1h)")
    render.add_argument("--step", type=_positive_float, default=None, metavar="SECONDS",
                        help="with --prometheus: seconds between points (default: 15, or what keeps --since within Prometheus's 11,000 points)")
    render.add_argument("--output", type=_output_file(*_IMAGE), required=True, metavar="FILE", help="image to write (.png, .svg or .pdf)")
    render.add_argument("--dashboard", type=Path, metavar="FILE", help="dashboard JSON (default: the one the package ships)")
    render.add_argument("--title", help="figure title (default: the dashboard's)")


def _operator_parser(sub: Any) -> None:
    op = _command(
        sub, "operator", "run the SparkStreamingApp operator (Kubernetes)",
        "Run the SparkStreamingApp operator: each app becomes a daemon that is its Spark driver (a StatefulSet), "
        "changes the daemon can take live go to its REST API, the rest rolls its pod (docs/kubernetes.md). "
        "Flags override the --config file, which the Helm chart renders.",
        "examples:\n"
        "  spark-autoscaler operator --config /etc/spark-autoscaler-operator/operator.yaml\n"
        "  spark-autoscaler operator --namespaces analytics --kubeconfig ~/.kube/config --once",
    )
    op.add_argument("--config", "-c", type=Path, metavar="FILE", help="the operator's YAML configuration (the chart's ConfigMap)")
    op.add_argument("--namespaces", type=_namespaces, metavar="NS[,NS...]", help="comma-separated namespaces whose apps to run (a Role in each)")
    op.add_argument("--leader-election", action=argparse.BooleanOptionalAction, default=None,
                    help="hold a Lease so that one of several replicas acts (default: on)")
    op.add_argument("--lease-name", metavar="NAME", help="the Lease (default: spark-autoscaler-operator)")
    op.add_argument("--lease-namespace", metavar="NS", help="the Lease's namespace (default: the operator pod's)")
    op.add_argument("--resync-interval", metavar="DURATION", help="reconcile every app (and poll its daemon) this often, e.g. 30s (default: 30s)")
    op.add_argument("--workers", type=_positive_int, metavar="N", help="apps reconciled at once (default: 4)")
    op.add_argument("--metrics-port", type=_port, metavar="PORT", help="port of /metrics, /healthz, /readyz (default: 8080; 0: none)")
    op.add_argument("--kubeconfig", metavar="FILE", help="a kubeconfig (default: the pod's service account, else $KUBECONFIG)")
    op.add_argument("--once", action="store_true", help="reconcile every app once, then exit (no election)")
    op.add_argument("--log-format", choices=["json", "console"], default="json", help="one JSON object per line, or a console format")
    op.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO", help="the lowest level logged")


def _plot_window_problem(args: argparse.Namespace, days: float) -> str | None:
    """Why ``--plot-hours`` cannot be drawn (checked before simulating), or None."""
    if args.plot_hours is None:
        return None
    if args.plot is None or args.compare:
        return "--plot-hours draws part of one policy's --plot; give --plot, without --compare"
    start = args.plot_hours[0]
    if start >= days * 86400:
        return f"--plot-hours starts at hour {start / 3600:g}, after the simulated {days * 24:g} hours"
    return None


def _simulate_parser(sub: Any) -> None:
    sim = _command(
        sub, "simulate", "replay a workload trace through the real reconciler against a simulated Spark application",
        "Simulate a policy (the real reconciler, a simulated cluster) on a timestamp,value trace "
        "and score it against an oracle with perfect foresight: cost (executor-seconds), SLO violations, lag "
        "and rescales. On a terminal, stderr shows how far it is.",
        "examples:\n"
        "  spark-autoscaler simulate --trace ../shared/traces/nyc_taxi.csv --compare\n"
        "  spark-autoscaler simulate --trace ../shared/traces/nyc_taxi.csv --policy target-utilization --days 2 --json\n"
        "  spark-autoscaler simulate --trace ../shared/traces/nyc_taxi.csv --param target_utilization=0.7 --plot run.png",
    )
    sim.add_argument("--trace", type=Path, required=True, metavar="CSV", help="trace with a 'timestamp,value' header (NAB format)")
    sim.add_argument("--policy", metavar="NAME", help="policy to simulate (default: the recommended policy, 'default')")
    sim.add_argument("--compare", action="store_true", help="run every registered policy and print a table")
    sim.add_argument("--json", action="store_true", help="print the result as one JSON document on stdout")
    sim.add_argument("--plot", type=_output_file(*_IMAGE), metavar="FILE", help="also draw input rate, capacity, executors and lag into FILE")
    sim.add_argument("--plot-hours", type=_hours_window, metavar="FROM:TO",
                     help="with --plot (one policy): draw only these hours since the start of the run, e.g. 47.5:48.5 (the "
                     "figures in the title stay the whole run's)")
    sim.add_argument("--ticks", type=_output_file(), metavar="FILE",
                     help="also write every tick as a JSON line to FILE: the seconds since the start ('t'), the simulated "
                     "lag then ('true_lag_seconds'), whether it acted (a rescale, as counted) and the tick as the daemon's tick "
                     "log has it (inputs, proposal, decision, plan); one policy, not with --compare")
    sim.add_argument("--peak-executors", type=_positive_int, default=32, metavar="N", help="executors the trace's peak needs")
    sim.add_argument("--scale-quantile", type=_quantile, default=1.0, metavar="Q",
                     help="the quantile of the trace's values that needs --peak-executors (default: 1, the peak; 0.99: spikes beyond the ceiling count against every policy)")
    sim.add_argument("--max-executors", type=_positive_int, metavar="N", help="upper bound for the policies (default: 2 x --peak-executors)")
    sim.add_argument("--slo-lag-seconds", type=_positive_float, default=60.0, metavar="SECONDS", help="the lag every query should stay under")
    sim.add_argument("--days", type=_positive_float, help="simulate only the first DAYS days (default: the whole trace)")
    sim.add_argument("--seed", type=_non_negative_int, default=0, metavar="N", help="seed of the simulated measurement noise")
    sim.add_argument("--tick", type=_positive_float, default=10.0, metavar="SECONDS", help="reconcile interval")
    sim.add_argument("--param", type=_key_yaml, action="append", default=[], metavar="NAME=VALUE",
                     help="a policy parameter, e.g. target_utilization=0.7; repeatable (default: the policy's defaults)")
    sim.add_argument("--set", type=_key_value, action="append", default=[], metavar="NAME=VALUE",
                     help="a simulator parameter (see docs/benchmarks.md); repeatable (default: the simulator's defaults)")
    sim.add_argument("--setting", type=_key_yaml, action="append", default=[], metavar="KEY=VALUE",
                     help="a daemon setting (dotted key, as in docs/settings.md), e.g. normalize.scale_down_delay=0s; repeatable "
                     "(default: the daemon's defaults, after the policy's own profile)")
    sim.add_argument("--jobs", type=_positive_int, metavar="N", help="policies simulated in parallel with --compare (default: 1)")


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
    if args.command != "run":  # `run` logs to stdout, as JSON by default; every other command's stdout is its result
        _log_to_stderr()
    try:
        with _plain_trace_warnings():
            code = handler(args)
            sys.stdout.flush()  # a reader gone is told here, not at exit
            return code
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM where a command handles it so (_exit_on_sigterm)
        print("spark-autoscaler: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        _discard_stdout()
        return READER_GONE
    except Exception as exc:  # (after the clauses above: a re-raise here skips them)
        from autoscaler.spark.session import SparkStartError  # (imported only once something failed)

        if isinstance(exc, SparkStartError):  # any command that starts Spark: one line, not py4j's tracebacks
            return _fail(str(exc), code=1)
        raise


def _discard_stdout() -> None:
    """Python's recipe for a reader of stdout gone (the signal module's note on SIGPIPE): the rest
    of stdout, flushed at exit, goes to /dev/null, or the flush raises BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _write_output(path: Path | None, text: str, option: str) -> str | None:
    """Write a command's result to ``path`` (``--output``, ``--summary-json``) whole: a reader sees
    the old file or the new one, never a part (``write_whole``). The problem, naming the option and
    the file, or None. A device or a pipe (``/dev/stdout``) is written in place: a rename would
    replace it."""
    from autoscaler.runtime.files import write_whole

    if path is None:
        return None
    try:
        if path.exists() and not path.is_file():
            with path.open("w", encoding="utf-8") as out:
                out.write(text)
        else:
            write_whole(path, text)
    except OSError as exc:
        return f"{option} {str(path)!r}: cannot be written: {exc.strerror or exc}"
    return None


def _log_to_stderr() -> None:
    """Warnings and errors to stderr, info dropped (as the simulator does, ``quiet_logs``):
    unconfigured, structlog prints every line to stdout, where the daemon a benchmark runs put
    its info lines before `benchmark step-load --json`'s JSON. Only structlog's default output
    changes (the stream is looked up at each line, as a test's captured stream changes): the
    stdlib's last resort writes to stderr already, and a caller's own logging setup stays."""
    import logging

    import structlog

    if not structlog.is_configured():
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
            logger_factory=lambda *_args: structlog.PrintLogger(sys.stderr),
        )


# what each extra brings (pyproject.toml): the demo's data source hands Spark Arrow batches
_EXTRAS = {"demo": "pyarrow", "plots": "matplotlib"}


def _missing_extra(args: argparse.Namespace) -> str | None:
    """What a command needs beyond the daemon's own dependencies, when it is not installed."""
    needs = []
    if args.command == "demo" or (args.command == "benchmark" and args.benchmark in ("step-load", "latencies", "on-off", "sim-to-real", "soak")):
        needs.append("demo")
    if args.command == "dashboard" or (args.command == "simulate" and args.plot):
        needs.append("plots")
    import importlib.util

    for extra in needs:
        if importlib.util.find_spec(_EXTRAS[extra]) is None:
            return f"`{args.command}` needs the {extra} extra ({_EXTRAS[extra]} is not installed): pip install 'spark-autoscaler[{extra}]'"
    return None


@contextlib.contextmanager
def _plain_trace_warnings() -> Iterator[None]:
    """While a command runs, a trace read by a rule (merged by order, a gap skipped) is told in one plain line
    (``spark-autoscaler: warning: ...``), not in Python's warning format with a line of our source."""
    import warnings

    shown = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        from autoscaler.tools.traces import TraceWarning  # only once a warning comes, not at every start-up

        if issubclass(category, TraceWarning):
            print(f"spark-autoscaler: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


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
        specs = load_pipelines(settings.pipelines.module, checkpoint_root=settings.pipelines.checkpoint_root)
    except (SettingsError, PipelineError) as exc:
        return _fail(str(exc))
    from autoscaler.app.compose import open_store
    from autoscaler.runtime.reconciler import unfit_overrides
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
        unfit: dict[str, str] = {}
        if state:
            unfit = unfit_overrides(restore_state(state, str(store)).control, settings)
        if store is not None:
            store.check_writable()  # the ticks save: a store that cannot be written is found now
    except StateStoreError as exc:
        return _fail(str(exc))
    if args.check:
        saved = f"; {store} restorable" if state else ""
        if unfit:  # what the start-up will drop, loudly, told before it
            saved += ", but start-up drops its overrides that no longer fit the configuration: " + "; ".join(f"{k}: {v}" for k, v in unfit.items())
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
    from autoscaler.app.signals import StopSignals
    from autoscaler.runtime.net import listen_problem
    from autoscaler.tools.demo.run import DemoOptions, demo_profile, executors_room_problem, peak_rate_problem, run_demo
    from autoscaler.tools.traces import TraceError

    if problem := executors_room_problem(args.max_executors):  # told before a JVM starts
        return _fail(problem)
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
    if problem := peak_rate_problem(options.peak(), options.max_executors, options.cost_seconds):
        return _fail(problem)
    try:
        profile = demo_profile(options)  # a trace, or a compression of it, the demo cannot replay is told before Spark starts
    except TraceError as exc:
        return _fail(str(exc))
    # the HTTP server starts after the Spark cluster: a port in use, or a host not of this machine
    # (with any port: --http-port 0 skipped the check, and Spark started before the refusal), is told before that
    if options.http and (problem := listen_problem(options.http_host, options.http_port)):
        hint = "" if options.http_port == 0 else " (another demo or daemon? --http-port picks another, --no-http serves nothing)"
        return _fail(f"{problem}{hint}")
    # created last: a demo refused leaves no directory behind
    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    signals = StopSignals()  # Ctrl-C and SIGTERM interrupt the start-up, then stop at a batch boundary
    signals.install(graceful=False)
    from autoscaler.ops.server import HttpServerError

    try:
        summary = run_demo(options, signals=signals, profile=profile)
    except (TraceError, HttpServerError) as exc:
        return _fail(str(exc))
    if summary is None:
        return INTERRUPTED
    if problem := _write_output(args.summary_json, json.dumps(summary, indent=2) + "\n", "--summary-json"):
        return _fail(problem)
    ok = summary["lost_rows"] == 0 and summary["duplicate_rows"] == 0 and summary["all_rescales_explained"]
    return 0 if ok else 1


def _cmd_benchmark(args: argparse.Namespace) -> int:
    if args.benchmark == "latencies":
        return _cmd_latencies(args)
    if args.benchmark == "sim-speed":
        return _cmd_sim_speed(args)
    if args.benchmark == "sim-to-real":
        return _cmd_sim_to_real(args)
    if args.benchmark == "load":
        return _cmd_load(args)
    if args.benchmark == "soak":
        return _cmd_soak(args)
    if args.benchmark == "traces":
        return _cmd_traces(args)
    from autoscaler.tools.bench.step_load import (
        ALL_RUNS,
        BUNDLED_CVS_TRACE,
        CVS_TRACE,
        OnOffProfile,
        StepProfile,
        format_table,
        run_benchmark,
    )

    runs = tuple(r.strip() for r in args.runs.split(",") if r.strip())
    unknown = [r for r in runs if r not in ALL_RUNS]
    if unknown or not runs:
        return _fail(f"--runs: unknown run(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(ALL_RUNS)}")
    profile: Any
    if args.benchmark == "on-off":
        from autoscaler.tools.traces import TraceError

        trace = args.trace or _shared_trace(CVS_TRACE) or BUNDLED_CVS_TRACE
        profile = OnOffProfile(trace=trace, warmup=args.warmup)
        try:  # the trace is read before Spark starts (it was read by the first run, after its cluster)
            profile.rate_profile()
        except (TraceError, ValueError) as exc:
            return _fail(str(exc))
    else:
        try:
            phases = tuple(float(p) for p in args.phases.split(","))
        except ValueError:
            return _fail(f"--phases: {args.phases!r} must be three numbers of seconds")
        if len(phases) != 3 or not all(math.isfinite(p) and p > 0 for p in phases):
            return _fail(f"--phases: {args.phases!r} must be three positive numbers of seconds")
        profile = StepProfile(phases=phases, warmup=args.warmup)
    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    _exit_on_sigterm()
    log = lambda m: print(m, file=sys.stderr)
    result = _with_code(run_benchmark(runs, profile, workdir=args.workdir, log=log))
    problem = _write_output(args.output, json.dumps(result, indent=2) + "\n", "--output")
    print(json.dumps(result, indent=2) if args.json else format_table(result))  # the result is shown even so
    return _fail(problem) if problem else 0


def _with_code(result: dict[str, Any]) -> dict[str, Any]:
    """A benchmark's result with the code that ran it: results in docs/results outlive commits."""
    from autoscaler.tools.provenance import code_version

    return {**result, "code": code_version()}


def _shared_traces() -> Path | None:
    """``../shared/traces`` beside the working directory or beside the checkout, if there."""
    for base in (Path.cwd().parent, Path(__file__).resolve().parents[2].parent):
        if (base / "shared" / "traces").is_dir():
            return base / "shared" / "traces"
    return None


def _shared_trace(name: str) -> Path | None:
    shared = _shared_traces()
    return shared / name if shared is not None and (shared / name).is_file() else None


def _cmd_sim_to_real(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.sim_to_real import run_sim_to_real

    if args.workdir is not None and (problem := _writable_dir(args.workdir, "--workdir")):
        return _fail(problem)
    _exit_on_sigterm()
    result = _with_code(run_sim_to_real(workdir=args.workdir, log=lambda m: print(m, file=sys.stderr)))
    problem = _write_output(args.output, json.dumps(result, indent=2) + "\n", "--output")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        real, sim = result["real"], result["simulated"]
        print(f"real: {real['executor_seconds']} executor-seconds, p95 lag {real['p95_lag_seconds']} s ({real['batches']} batches)")
        print(f"simulated: {sim['executor_seconds']} executor-seconds, p95 lag {sim['p95_lag_seconds']} s ({sim['batches']} batches)")
        print(f"executor_seconds_error {result['executor_seconds_error']}, p95_lag_ratio {result['p95_lag_ratio']}")
    return _fail(problem) if problem else 0


def _cmd_soak(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.soak import SoakError, run_soak

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


MAX_LOAD_CLIENTS = 1000  # `benchmark load --clients`


def _cmd_load(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.load import format_table, run

    try:
        counts = [int(n) for n in args.queries.split(",")]
    except ValueError:
        return _fail(f"--queries: {args.queries!r} must be comma-separated whole numbers")
    if not counts or any(n < 1 or n > 1000 for n in counts):
        return _fail(f"--queries: {args.queries!r}: each count must be within 1..1000")
    if args.clients > MAX_LOAD_CLIENTS:  # a thread each, on this machine: 100,000 ran on, each refused request printed
        return _fail(f"--clients: {args.clients}: at most {MAX_LOAD_CLIENTS} (each is a thread on this machine)")
    result = run(sorted(counts), ticks=args.ticks, clients=args.clients, requests_per_client=args.requests_per_client)
    print(json.dumps(result, indent=2) if args.json else format_table(result))
    return 0


def _cmd_traces(args: argparse.Namespace) -> int:
    from autoscaler.tools.bench.traces import SCALES, compare, format_comparison, format_report, plan_runs, report, run_all
    from autoscaler.tools.sim.compare import compared_policies
    from autoscaler.tools.sim.runner import SimulationError, policy_ceiling

    scales = list(dict.fromkeys(s.strip() for s in args.scales.split(",") if s.strip()))
    if not scales or any(s not in SCALES for s in scales):
        return _fail(f"--scales: {args.scales!r}: choose from {', '.join(SCALES)}")
    policies = list(dict.fromkeys(p.strip() for p in args.policies.split(",") if p.strip())) if args.policies is not None else compared_policies()
    if not policies:  # "," ran nothing and exited 0
        return _fail(f"--policies: {args.policies!r}: name at least one policy (spark-autoscaler policies lists them)")
    if problem := _given_twice(args):
        return _fail(problem)
    params = dict(args.param)
    if params and len(policies) != 1:
        return _fail("--param applies to one policy: name it alone with --policies")
    settings = dict(args.setting)
    if problem := _settings_problem(settings, min(policy_ceiling(SCALES[s].peak_executors) for s in scales), TRACES_FLAGS):  # the lowest
        return _fail(problem)
    traces, problem = _trace_files(args.traces)
    if problem:
        return _fail(problem)
    if problem := _runs_problem(policies, params, [] if args.report_only else traces):
        return _fail(problem)
    if problem := _comparison_problem(args.compare_to, args.results):
        return _fail(problem)
    # created last: a command refused leaves no directory behind
    if not args.report_only and (problem := _writable_dir(args.results, "--results")):
        return _fail(problem)
    log = lambda m: print(m, file=sys.stderr)
    try:
        if not args.report_only:
            _exit_on_sigterm()
            run_all(plan_runs(traces, scales, policies, params, settings, args.days), args.results, jobs=args.jobs, log=log)
        # the default policy is judged from its results, run now or before
        rep = report(plan_runs(traces, scales, ["default", *(p for p in policies if p != "default")], days=args.days), args.results)
        if args.compare_to:
            rep["compared"] = compare(plan_runs(traces, scales, policies, days=args.days), args.compare_to, args.results)
    except (SimulationError, ValueError) as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(format_report(rep) + (f"\n{format_comparison(rep['compared'])}" if "compared" in rep else ""), end="")
    return 0


def _runs_problem(policies: list[str], params: dict[str, Any], traces: list[Path]) -> str | None:
    """A policy or parameter unknown, or a trace that cannot be read: told before any run (and
    before --results is created), not hours into them."""
    from autoscaler.tools.traces import TraceError, load_trace
    from policies import PolicyError, create_policy, policy_class

    try:
        for name in policies:
            policy_class(name)
        if params:
            create_policy(policies[0], params)
        for trace in traces:
            load_trace(trace)
    except (PolicyError, TraceError, ValueError) as exc:
        return str(exc)
    return None


def _comparison_problem(before: Path | None, results: Path) -> str | None:
    if before is None:
        return None
    if not before.is_dir():
        return f"--compare-to: {str(before)!r} is not a directory of results"
    if before.resolve() == results.resolve():
        return f"--compare-to: {str(before)!r} is the --results directory itself; name the results of before the change"
    return None


def _trace_files(given: list[Path] | None) -> tuple[list[Path], str | None]:
    """The trace files named (a directory stands for its *.csv), or the problem with them."""
    if not given:
        shared = _shared_traces()
        if shared is None:
            return [], "--traces: ../shared/traces not found; name trace files or directories"
        given = [shared]
    files: list[Path] = []
    for path in given:
        if path.is_dir():
            found = sorted(path.glob("*.csv"))
            if not found:
                return [], f"--traces: {str(path)!r} holds no *.csv trace"
            files += found
        elif path.is_file():
            files.append(path)
        else:
            return [], f"--traces: {str(path)!r} does not exist"
    files = list(dict.fromkeys(f.resolve() for f in files))
    stems = [f.stem for f in files]
    if twice := sorted({s for s in stems if stems.count(s) > 1}):
        return [], f"--traces: two traces named {', '.join(twice)}; their results would share a file"
    return files, None


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
        trace = load_trace(args.trace)  # a bad trace is told before anything runs
        if args.instructions and args.warm_days * 86400 >= trace.span_seconds:  # counted 0 instructions, or ran on for ever
            return _fail(f"--warm-days {args.warm_days:g}: trace {trace.name!r} covers {trace.span_seconds / 86400:.3g} days; count ticks within it")
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
    result = _with_code(measure(args.repeats, log=log))
    problem = _write_output(args.output, json.dumps(result, indent=2) + "\n", "--output")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return _fail(problem) if problem else 0


def _step_problem(since: float, step: float) -> str | None:
    """Why a Prometheus refuses ``--step`` over ``--since``, in the flags' words (it said "try
    decreasing the query resolution (?step=XX)"; a step under a millisecond was taken as one)."""
    from autoscaler.tools.dashboard.prometheus import MAX_POINTS, RESOLUTION, least_step

    if step >= (least := least_step(since)):
        return None
    if step < RESOLUTION:
        return f"--step {step:g}: a Prometheus's timestamps are whole milliseconds; give at least {RESOLUTION:g}"
    return (f"--step {step:g} over --since {since:g} s is {since / step:,.0f} points a series; a Prometheus answers at most "
            f"{MAX_POINTS:,}: give --step {least:g} or more, or leave it out")


def _cmd_dashboard(args: argparse.Namespace) -> int:
    import time

    from autoscaler.runtime.config import file_problem
    from autoscaler.tools.dashboard.prometheus import PrometheusError, PrometheusQueries, fitting_step
    from autoscaler.tools.dashboard.recording import Recording
    from autoscaler.tools.dashboard.render import DASHBOARD, DashboardError, read_dashboard, render_dashboard, render_recording

    path = args.dashboard or DASHBOARD
    if problem := file_problem(path):
        shipped = "" if args.dashboard else " (it ships with the package as autoscaler/ops/monitoring/); pass --dashboard PATH"
        return _fail(f"--dashboard: {path} {problem}{shipped}")
    try:
        dashboard = read_dashboard(path)  # before a Prometheus starts
    except DashboardError as exc:
        return _fail(f"--dashboard: {exc}")
    if args.prometheus is None and (args.since is not None or args.step is not None):
        return _fail(f"{'--since' if args.since is not None else '--step'} goes with --prometheus (a recording is drawn whole, its step taken from its scrapes)")
    since = args.since.total_seconds() if args.since is not None else 3600.0
    if args.step is not None and (problem := _step_problem(since, args.step)):
        return _fail(problem)
    _exit_on_sigterm()  # as Ctrl-C: the throwaway Prometheus and its directory go too (exit 130, not 143)
    try:
        if args.recording is not None:
            try:
                recording = Recording.load(args.recording)
            except (OSError, ValueError) as exc:
                return _fail(f"--recording: {exc}")
            render_recording(recording, args.output, dashboard=dashboard, title=args.title)
        else:
            end = time.time()
            queries = PrometheusQueries(args.prometheus, end - since, end, args.step or fitting_step(since, 15.0))
            render_dashboard(queries, args.output, dashboard=dashboard, title=args.title)
    except PrometheusError as exc:
        return _fail(str(exc))
    print(f"wrote {args.output}")
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from autoscaler.core.settings import MAX_EXECUTORS
    from autoscaler.runtime.config import SettingsError
    from autoscaler.tools.sim import SimConfig
    from autoscaler.tools.sim.compare import compare_policies, format_table
    from autoscaler.tools.sim.runner import SimulationError, policy_ceiling, simulate
    from autoscaler.tools.traces import TraceError, load_trace
    from policies import PolicyError, policy_class

    try:
        trace = load_trace(args.trace)
    except TraceError as exc:
        return _fail(str(exc))
    days = trace.span_seconds / 86400
    if problem := _plot_window_problem(args, min(days, args.days or days)):
        return _fail(problem)
    if args.days is not None and args.days > days:
        # not an error (a caller may ask for "up to D days"), but not silent either
        print(f"spark-autoscaler: note: trace {trace.name!r} covers {days:.2f} days; simulating all of it, not {args.days:g}", file=sys.stderr)
    if problem := _given_twice(args):
        return _fail(problem)
    try:
        config = SimConfig().with_changes(dict(args.set))
    except ValueError as exc:
        return _fail(f"--set: {exc}")
    params = dict(args.param)
    settings = dict(args.setting)
    # the runner's ceiling (one beyond any cluster is refused by the runner, naming --max-executors)
    if problem := _settings_problem(settings, min(MAX_EXECUTORS, policy_ceiling(args.peak_executors, args.max_executors))):
        return _fail(problem)
    # as Ctrl-C: "interrupted", exit 130, and --compare's workers stopped too (they ran on, at 99 % CPU each)
    _exit_on_sigterm()
    options = dict(
        settings=settings,
        peak_executors=args.peak_executors,
        scale_quantile=args.scale_quantile,
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
        for given, option in ((bool(args.param), "--param"), (args.policy is not None, "--policy"), (args.ticks is not None, "--ticks")):
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
            record = _run_record({}, settings, dict(args.set))
            print(json.dumps({"trace": trace.name, "results": [r.to_json() for r in results], **record}, indent=2))
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
            with _tick_log(args.ticks) as on_tick:
                result = simulate(trace, policy=policy, params=params, progress=one, on_tick=on_tick, **options)
    except (PolicyError, SettingsError, ValueError, SimulationError) as exc:
        return _fail(str(exc))
    if args.plot:
        from autoscaler.tools.sim.plot import plot_run

        plot_run(result, args.plot, window=args.plot_hours)
    if args.json:
        print(json.dumps({**result.to_json(), **_run_record(params, settings, dict(args.set))}, indent=2))
    else:
        print(format_table([result]))
    return 0


@contextlib.contextmanager
def _tick_log(path: Path | None) -> Iterator[Callable[[Any, Any], None] | None]:
    """A simulation's ticks written to ``path`` as JSON lines while it runs (None: not asked)."""
    if path is None:
        yield None
        return
    from autoscaler.runtime.views import tick_json

    with path.open("w") as out:

        def write(record: Any, cluster: Any) -> None:
            line = {"t": round(cluster.t, 3), "true_lag_seconds": round(cluster.lag_now(), 3), "acted": record.acted, **tick_json(record)}
            out.write(json.dumps(line) + "\n")

        yield write


def _run_record(params: dict[str, Any], settings: dict[str, Any], simulator: dict[str, Any]) -> dict[str, Any]:
    """What a simulation ran with besides the trace and the options its result already names, kept
    as `benchmark traces` keeps it: the policy parameters given, the daemon settings and simulator
    parameters given (when any), and the code (:func:`~autoscaler.tools.provenance.code_version`).
    A result passed around without its command line still says how to make it again."""
    from autoscaler.tools.provenance import code_version

    return {
        "policy_params": params,
        **({"settings": settings} if settings else {}),
        **({"simulator": simulator} if simulator else {}),
        "code": code_version(),
    }


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


def _http_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host (urllib refused anything else deep in a render)."""
    from urllib.parse import urlsplit

    try:
        url = urlsplit(text)
        ok = url.scheme in ("http", "https") and bool(url.hostname) and (url.port is None or url.port > 0)
    except ValueError:  # a bad port or IPv6 address
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL with a host, e.g. http://localhost:9090")
    return text


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
    from autoscaler.k8s.client import KubeconfigError
    from autoscaler.operator.main import run_operator

    try:
        return run_operator(settings, kubeconfig=args.kubeconfig, once=args.once)
    except KubeconfigError as exc:
        return _fail(f"cannot reach the Kubernetes API: {exc}")


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
        return _fail(problem) if (problem := _write_output(args.output, text, "--output")) else 0
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
