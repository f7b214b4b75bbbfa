"""Create the Spark session the daemon drives (driver mode) with safe defaults for this daemon.

The driver JVM is started by us rather than by PySpark's session builder, for three reasons:

* **Its own session (``setsid``).** A signal to our process group (Ctrl-C in a terminal,
  ``timeout``, ``kill -- -PGID``) must reach the daemon only: the daemon then stops every query
  at a batch boundary and the session after them. When the JVM got the signal too it died
  first, and with it ``local-cluster`` workers and executors (``Failed to launch executor ...
  Shutdown hooks cannot be modified during shutdown``), and stopping the session ended in a
  ``ConnectionRefusedError``. The JVM still ends with us: PySpark's gateway exits when its
  stdin (a pipe from this process) closes.
* **Its output through our logging** (``jvm_output.py``), with a log4j2 configuration we ship
  (``log4j2-driver.properties``): errors only, one JSON object per event, re-logged as the
  daemon's own lines; ``--json`` output on stdout stays clean because nothing the JVM says
  reaches stdout.
* **Executors on this machine** (``local-cluster``, a standalone cluster on loopback) get the
  cluster configuration (``log4j2-cluster.properties``) for their log files.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from autoscaler.core.settings import SparkSettings
from autoscaler.spark.executors import java_error
from autoscaler.spark.kubernetes import kubernetes_driver_conf

# Facts measured on the project machines (docs/architecture.md): without SPARK_LOCAL_IP the
# driver binds to the first non-loopback interface; executors' Python workers must use this
# interpreter (pyarrow lives here); progress metrics stay cheap with these defaults.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.executor.memory": "512m",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.sql.adaptive.enabled": "false",  # not supported in streaming; silences a warning per query
    # a trigger that finds no new rows is reported (QueryIdleEvent) at most this often, the
    # first this long after the last batch: at Spark's 10 s a quiet stream kept its last batch's
    # rate and a growing lag for 10-12 s at the start of every quiet stretch (measured: the
    # on-off benchmark); at 1 s every such trigger of a query triggered 1 s or slower reports
    "spark.sql.streaming.noDataProgressEventInterval": "1s",
    # standalone (and local-cluster): the driver drops an executor whose connection closed only
    # after this long, waiting for the master's reason for the loss (Spark's default 5 s). An
    # executor the daemon removed was gone from the machine 0.2 s after the kill and from the
    # driver's list 5.2 s after; each removal held the count, and whatever waits for it to
    # settle, 5 s longer (measured: benchmark latencies). The wait lets the master's reason
    # (a worker lost, an exit code) come before the removal: Spark judges by it whether the
    # tasks that ran there failed by the application's fault. On a standalone cluster it comes
    # within milliseconds, so 1 s still lets it come first.
    "spark.standalone.executorRemoveDelayOnDisconnection": "1s",
}
# The settings above that make the daemon see the cluster in time, with Spark's own default and
# what a session left at it costs: a session the daemon does not build (attach mode) is told.
TIMELY_CONF: Mapping[str, tuple[str, str]] = {
    "spark.sql.streaming.noDataProgressEventInterval": (
        "10s",
        "a quiet stream keeps its last batch's rate and a growing lag until Spark reports it idle",
    ),
    "spark.standalone.executorRemoveDelayOnDisconnection": (
        "5s",
        # only removals: an executor whose process dies (spot loss) is reported by its worker at
        # once (measured on this machine: gone from the driver 0.1 s after a SIGKILL, at 5 s
        # and at 1 s alike), so the advice is worth having in active mode, where the daemon
        # removes, and after a switch to it
        "in active mode, an executor the daemon removed is still counted, and waited for, this long after its process "
        "has gone (one that is lost is not: its worker reports it at once)",
    ),
}
DRIVER_LOG_CONFIG = Path(__file__).with_name("log4j2-driver.properties")
CLUSTER_LOG_CONFIG = Path(__file__).with_name("log4j2-cluster.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions"
LOCAL_HOSTS = ("127.0.0.1", "localhost")


def prepare_environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Java 17 is required for Spark: install a JRE (e.g. apt-get install openjdk-17-jre-headless)")


def spark_conf(settings: SparkSettings, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The session's configuration as text: the daemon's defaults < ``spark.conf`` < ``extra``,
    with our log4j2 configurations in front of the JVM options (:func:`with_log_config`)."""
    conf = {**DEFAULT_CONF, **{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in settings.conf.items()}}
    conf.update({k: str(v) for k, v in (extra or {}).items()})
    return with_log_config(conf, settings.master)


def untimely_conf(values: Mapping[str, str | None], master: str, to_ms: Callable[[str], int]) -> list[str]:
    """What a session's ``values`` (None: not set, Spark's default applies) of :data:`TIMELY_CONF`
    cost against the daemon's own session, one line each: the key, its value, the daemon's, the
    effect. ``to_ms`` reads a Spark duration ("1s", "500ms"; the JVM's parser in the shell);
    the standalone setting only where the master is standalone."""
    standalone = master.startswith(("spark://", "local-cluster"))
    advice = []
    for key, (spark_default, cost) in TIMELY_CONF.items():
        if key.startswith("spark.standalone.") and not standalone:
            continue
        value = values.get(key) or spark_default
        if to_ms(value) > to_ms(DEFAULT_CONF[key]):
            advice.append(f"{key} is {value}, the daemon's own session sets {DEFAULT_CONF[key]}: {cost}")
    return advice


def untimely_session_conf(spark: Any) -> list[str]:
    """:func:`untimely_conf` of a live session, durations read by Spark's own parser."""
    parse = spark.sparkContext._jvm.org.apache.spark.network.util.JavaUtils.timeStringAsMs
    values = {key: spark.conf.get(key, None) for key in TIMELY_CONF}
    return untimely_conf(values, spark.sparkContext.master, lambda text: int(parse(text)))


def log_config_option(path: Path) -> str:
    """The JVM option that makes log4j2 read ``path``."""
    return f"-Dlog4j2.configurationFile={path.as_uri()}"


def executors_on_this_machine(master: str) -> bool:
    """Executors that read this machine's files: ``local-cluster`` and standalone on loopback."""
    if master.startswith("local-cluster"):
        return True
    host = master.removeprefix("spark://").split(":", 1)[0]
    return master.startswith("spark://") and host in LOCAL_HOSTS


def with_log_config(conf: Mapping[str, str], master: str) -> dict[str, str]:
    """``conf`` with our log4j2 configurations in front of the JVM options a user set (a later
    ``-D`` wins, so a user's own ``-Dlog4j2.configurationFile`` still applies)."""
    out = dict(conf)
    wanted = [(DRIVER_JAVA_OPTIONS, DRIVER_LOG_CONFIG)]
    if executors_on_this_machine(master):
        wanted.append((EXECUTOR_JAVA_OPTIONS, CLUSTER_LOG_CONFIG))
    for key, path in wanted:
        out[key] = f"{log_config_option(path)} {out.get(key, '')}".strip()
    return out


class SparkStartError(RuntimeError):
    """Spark's driver did not start (its JVM failed or went away while the session was created):
    the reason in one line, for the console; the JVM's own errors reach it through its log."""


def _start_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark failing to start rather than a bug of ours or a signal: py4j's
    errors (the JVM answered with an error, or stopped answering), a refused or reset connection
    to it, or PySpark's own report that the gateway exited."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkRuntimeError

    return isinstance(exc, (Py4JError, ConnectionError, PySparkRuntimeError))


def build_session(settings: SparkSettings, extra: Mapping[str, Any] | None = None) -> Any:
    conf = spark_conf(settings, extra)
    # a k8s:// master: the driver's pod address and identity (refused when it is loopback)
    add_conf, add_env = kubernetes_driver_conf(settings.master, conf, os.environ)
    conf.update(add_conf)
    os.environ.update(add_env)
    prepare_environment()
    from pyspark.sql import SparkSession

    from autoscaler.spark import stopguard

    stopguard.quiet_interrupt_reports()

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        launch_driver_jvm({**conf, "spark.master": settings.master, "spark.app.name": settings.app_name})
        spark = builder.getOrCreate()
    except BaseException as exc:
        # interrupted (Ctrl-C, SIGTERM) or failed while the driver JVM started: nothing holds
        # the session to stop, and that JVM outlives us (measured: it ignores its closed stdin
        # until its gateway is up)
        _kill_gateway_jvms()
        if _start_failure(exc):
            # not py4j's chained tracebacks: `run --master 'local-cluster[100000,1,512]'` ran the
            # JVM out of files and printed three of them (2026-12-01)
            raise SparkStartError(
                f"Spark did not start on master {settings.master}: {java_error(exc)} (the JVM's own errors, if any, are above)"
            ) from None
        raise
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "ERROR"))
    stopguard.install()
    return spark


def launch_driver_jvm(conf: Mapping[str, str]) -> None:
    """Start PySpark's gateway (the driver JVM) in a session of its own, its output read by
    :class:`~autoscaler.spark.jvm_output.JvmOutputReader`; nothing when this process has one."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    from autoscaler.spark.jvm_output import JvmOutputReader

    if SparkContext._gateway is not None:
        return  # one JVM per process: a later session (a test's second one) reuses it
    read, write = os.pipe()
    JvmOutputReader(os.fdopen(read, "rb")).start()  # reading before the JVM writes: a full pipe would block it
    try:
        gateway = launch_gateway(
            SparkConf().setAll(list(conf.items())),
            popen_kwargs={"start_new_session": True, "stdout": write, "stderr": write},
        )
    finally:
        os.close(write)  # the JVM holds its copy; the reader ends when the JVM does
    SparkContext._ensure_initialized(gateway=gateway)


def _kill_gateway_jvms() -> None:
    """Kill the driver JVMs PySpark launched as children of this process (``pyspark-shell``).

    Linux only (``/proc``); elsewhere nothing is done.
    """
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if ppid == me and b"pyspark-shell" in cmdline:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass  # it ended meanwhile: nothing left to stop


def stop_session(spark: Any) -> None:
    """Stop active queries first, then the context (avoids an NPE in the stream thread)."""
    try:
        for q in spark.streams.active:
            try:
                q.stop()
            except Exception:
                pass
    finally:
        spark.stop()
