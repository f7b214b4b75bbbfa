"""Create the Spark session the daemon drives (driver mode) with safe defaults for this daemon."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from typing import Any, Mapping

from autoscaler.core.settings import SparkSettings
from autoscaler.spark.kubernetes import kubernetes_driver_conf

# Facts measured on the project machines (docs/architecture.md): without SPARK_LOCAL_IP the
# driver binds to the first non-loopback interface; executors' Python workers must use this
# interpreter (pyarrow lives here); progress metrics stay cheap with these defaults.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.executor.memory": "512m",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.sql.adaptive.enabled": "false",  # not supported in streaming; silences a warning per query
}


def prepare_environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Java 17 is required for Spark: install a JRE (e.g. apt-get install openjdk-17-jre-headless)")


def spark_conf(settings: SparkSettings, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The session's configuration as text: the daemon's defaults < ``spark.conf`` < ``extra``."""
    conf = {**DEFAULT_CONF, **{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in settings.conf.items()}}
    conf.update({k: str(v) for k, v in (extra or {}).items()})
    return conf


def build_session(settings: SparkSettings, extra: Mapping[str, Any] | None = None) -> Any:
    conf = spark_conf(settings, extra)
    # a k8s:// master: the driver's pod address and identity (refused when it is loopback)
    add_conf, add_env = kubernetes_driver_conf(settings.master, conf, os.environ)
    conf.update(add_conf)
    os.environ.update(add_env)
    prepare_environment()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except BaseException:
        # interrupted (Ctrl-C, SIGTERM) or failed while PySpark launched the driver JVM: nothing
        # holds the session to stop, and that JVM outlives us (measured: it ignores its closed stdin)
        _kill_gateway_jvms()
        raise
    spark.sparkContext.setLogLevel(conf.get("spark.log.level", "ERROR"))
    return spark


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
