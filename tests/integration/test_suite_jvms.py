"""The suite's Spark JVMs compile with C1 only (``tests/spark-conf/spark-defaults.conf``): the
driver and its executors get the option through Spark's ``*.defaultJavaOptions``, in front of
the log4j2 configuration the daemon's session adds as ``*.extraJavaOptions``, so both apply."""

from __future__ import annotations

import psutil
import pytest

from tests.conftest import JIT_C1_ONLY

pytestmark = pytest.mark.spark


def executor_command_lines(app_id: str) -> list[list[str]]:
    """The command lines of this machine's executor JVMs of application ``app_id``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):  # a process that ends meanwhile has None
        words = process.info["cmdline"] or []
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in words and app_id in words:
            found.append(words)
    return found


def test_the_driver_and_its_executors_compile_with_c1_only_and_keep_the_daemons_log_configuration(spark_session_factory):
    spark = spark_session_factory("local-cluster[1,1,512]")
    driver = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert JIT_C1_ONLY in driver
    assert any(a.startswith("-Dlog4j2.configurationFile=") and a.endswith("log4j2-driver.properties") for a in driver), driver
    executors = executor_command_lines(spark.sparkContext.applicationId)
    assert executors, "no executor JVM of the application found"
    for words in executors:
        assert JIT_C1_ONLY in words, words
        assert any(a.startswith("-Dlog4j2.configurationFile=") and a.endswith("log4j2-cluster.properties") for a in words), words
