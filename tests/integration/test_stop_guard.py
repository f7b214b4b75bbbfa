"""A stop that interrupts a Python foreachBatch ends as a stop, with nothing on the console.

Without the guard (``autoscaler/spark/stopguard.py``) Spark's interruption check matched the
Py4J error text, kilobytes long, with a regular expression that recurses once per character:
``java.lang.StackOverflowError`` and 1024 stack frames on the console (the demo printed 4448
lines of them in one run), after py4j's own traceback of the interrupted call.
"""

from __future__ import annotations

import logging
import time
import traceback

import pytest

from autoscaler.spark.checkpoint import read_checkpoint
from autoscaler.spark.stopguard import BatchInterruptedByStop
from tests.integration.conftest import wait_until

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(spark_session_factory):
    return spark_session_factory("local[1]")


def py4j_error_text(error: BaseException) -> str:
    """The exception message the JVM gets when a Python callback raises (py4j, not propagating Java exceptions)."""
    try:
        raise error
    except BaseException:
        return "An exception was raised by the Python Proxy. Return Message: " + traceback.format_exc()


def interrupted_by_stop(spark, text: str):
    jvm = spark._jvm
    check = jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution.isInterruptionException
    return check(jvm.py4j.Py4JException(text), spark.sparkContext._jsc.sc())


def test_sparks_interruption_check_reads_the_guards_error_as_a_stop_and_overflows_on_the_original(spark):
    from py4j.protocol import Py4JJavaError

    assert interrupted_by_stop(spark, py4j_error_text(BatchInterruptedByStop(7))) is True
    assert interrupted_by_stop(spark, py4j_error_text(RuntimeError("the sink is down"))) is False
    # what a foreachBatch interrupted in a Py4J call sent before (a Java stack inside a Python traceback)
    original = (
        "Traceback (most recent call last):\npy4j.protocol.Py4JJavaError: An error occurred while calling o1.collectToPython.\n"
        ": java.lang.InterruptedException\n" + "\tat org.apache.spark.rdd.RDD.collect(RDD.scala:1122)\n" * 150
    )
    with pytest.raises(Py4JJavaError, match="java.lang.StackOverflowError"):
        interrupted_by_stop(spark, "An exception was raised by the Python Proxy. Return Message: " + original)


def test_a_query_stopped_during_its_python_batch_stops_quietly_and_replays_the_batch(spark, tmp_path, caplog):
    from pyspark.sql import functions as F

    slow = F.udf(lambda v: (time.sleep(0.2), v)[1], "long")
    started = tmp_path / "started"

    def sink(df, batch_id):
        if batch_id >= 1:
            started.write_text(str(batch_id))
        df.select(slow("value").alias("v")).agg(F.count("v")).collect()  # a Py4J call the stop interrupts

    ckpt = tmp_path / "ckpt"
    caplog.set_level(logging.DEBUG, logger="autoscaler.spark.stopguard")
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt)).trigger(processingTime="1 second").start()
    )
    try:
        batch = int(wait_until(lambda: started.exists() and started.read_text(), 120, "a batch in its foreachBatch"))
        time.sleep(0.5)  # inside the collect of its ~10 rows x 0.2 s
    finally:
        query.stop()
    assert query.exception() is None
    assert any("interrupted by the stop of its query" in r.getMessage() for r in caplog.records)
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(("spark", "py4j"))]
    assert problems == [], [r.getMessage()[:300] for r in problems]
    info = read_checkpoint(ckpt)
    assert (info.last_offset, info.last_commit) == (batch, batch - 1)  # planned, not committed: replayed at the next start
