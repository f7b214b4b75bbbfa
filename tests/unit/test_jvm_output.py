"""The driver JVM's output becomes the daemon's own log lines: one per log4j event, one per
stack trace printed outside log4j, start-up notices at DEBUG, and nothing lost."""

from __future__ import annotations

import json
import logging
import os

import pytest

from autoscaler.spark.jvm_output import JVM_LOGGER, REGEX_OVERFLOW_CAUSE, JvmLines, JvmOutputReader


def event(level="ERROR", logger="org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution", message="Query taxi terminated with error", **extra):
    return json.dumps({"jvm_log": True, "level": level, "logger": logger, "thread": "stream", "message": message, **extra})


# what the planner of a Python data source printed when its query stopped as it connected
PY_TRACEBACK = (
    'Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "/x/pyspark.zip/pyspark/sql/streaming/python_streaming_source_runner.py", line 313, in <module>'
)
STACK = "java.lang.RuntimeException: boom\n\tat a.B.c(B.java:1)\n\tat a.B.d(B.java:2)\n"


def feed_all(lines, **kw):
    parser = JvmLines(**kw)
    out = []
    for line in "\n".join(lines).splitlines():
        out += parser.feed(line + "\n")
    return out + parser.close()


@pytest.mark.parametrize(
    "lines, expected",
    [
        pytest.param(
            [event(exception="java.lang.RuntimeException", exception_message="boom", stack_trace=STACK)],
            [(logging.ERROR, "spark.MicroBatchExecution", "Query taxi terminated with error | java.lang.RuntimeException: boom [2 stack frame(s) not shown]")],
            id="log4j-event-with-exception",
        ),
        pytest.param(
            [event(exception="py4j.Py4JException", exception_message="An exception was raised by the Python Proxy.\nTraceback:\n  File x\nRuntimeError: sink down")],
            [(logging.ERROR, "spark.MicroBatchExecution", "Query taxi terminated with error | py4j.Py4JException: An exception was raised by the Python Proxy. (+3 more line(s) of message)")],
            id="log4j-event-with-a-long-exception-message",
        ),
        pytest.param(
            [event(level="WARN", logger="org.apache.spark.util.Utils", message="Service 'SparkUI' could not bind")],
            [(logging.WARNING, "spark.Utils", "Service 'SparkUI' could not bind")],
            id="log4j-warning",
        ),
        pytest.param(
            ["WARNING: Using incubator modules: jdk.incubator.vector", 'Setting default log level to "WARN".',
             "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel)."],
            [(logging.DEBUG, JVM_LOGGER, "WARNING: Using incubator modules: jdk.incubator.vector"),
             (logging.DEBUG, JVM_LOGGER, 'Setting default log level to "WARN".'),
             (logging.DEBUG, JVM_LOGGER, "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).")],
            id="start-up-notices",
        ),
        pytest.param(
            ["something the JVM printed"],
            [(logging.WARNING, JVM_LOGGER, "something the JVM printed")],
            id="any-other-line-is-kept",
        ),
        pytest.param(
            ['Exception in thread "worker-1" java.lang.IllegalStateException: bad state', "\tat a.B.c(B.java:1)",
             "Caused by: java.io.IOException: disk", "\tat a.B.d(B.java:2)", "\t... 3 more", "after"],
            [(logging.ERROR, JVM_LOGGER, 'uncaught java.lang.IllegalStateException: bad state in thread "worker-1"; caused by java.io.IOException: disk [3 stack frame(s) not shown]'),
             (logging.WARNING, JVM_LOGGER, "after")],
            id="uncaught-exception-is-one-line",
        ),
        pytest.param(
            ["java.lang.RuntimeException: first line", "second line of the message", "\tat a.B.c(B.java:1)", event(level="ERROR", message="next")],
            [(logging.ERROR, JVM_LOGGER, "java.lang.RuntimeException: first line (+1 more line(s) of message) [1 stack frame(s) not shown]"),
             (logging.ERROR, "spark.MicroBatchExecution", "next")],
            id="printed-stack-trace-then-an-event",
        ),
        pytest.param(
            [PY_TRACEBACK, '  File "/x/pyspark.zip/pyspark/worker_util.py", line 246, in get_sock_file_to_executor',
             "    sock = local_connect_and_auth(port, secret)", "ConnectionRefusedError: [Errno 111] Connection refused"],
            [(logging.DEBUG, JVM_LOGGER, "a Python process of the Spark driver failed: ConnectionRefusedError: [Errno 111] Connection refused "
              "(python_streaming_source_runner.py, 3 frame(s) not shown)")],
            id="python-helper-let-go-by-the-jvm",
        ),
        pytest.param(
            [PY_TRACEBACK, "ValueError: the source's offset is not a number", event(message="next")],
            [(logging.WARNING, JVM_LOGGER, "a Python process of the Spark driver failed: ValueError: the source's offset is not a number "
              "(python_streaming_source_runner.py, 2 frame(s) not shown)"),
             (logging.ERROR, "spark.MicroBatchExecution", "next")],
            id="python-helper-failure-is-a-warning",
        ),
        pytest.param(
            [PY_TRACEBACK, "ConnectionRefusedError: [Errno 111] Connection refused", "",
             "During handling of the above exception, another exception occurred:", "", PY_TRACEBACK, "RuntimeError: gave up"],
            [(logging.DEBUG, JVM_LOGGER, "a Python process of the Spark driver failed: ConnectionRefusedError: [Errno 111] Connection refused "
              "(python_streaming_source_runner.py, 2 frame(s) not shown)"),
             (logging.WARNING, JVM_LOGGER, "a Python process of the Spark driver failed: RuntimeError: gave up "
              "(python_streaming_source_runner.py, 2 frame(s) not shown)")],
            id="python-chained-exceptions-are-one-line-each",
        ),
        pytest.param(
            [PY_TRACEBACK, event(message="next")],
            [(logging.DEBUG, JVM_LOGGER, "a Python process of the Spark driver was ended mid-traceback (python_streaming_source_runner.py, 2 frame(s) not shown)"),
             (logging.ERROR, "spark.MicroBatchExecution", "next")],
            id="python-helper-ended-mid-traceback",
        ),
    ],
)
def test_jvm_lines_become_records(lines, expected):
    assert [(r.level, r.logger, r.message) for r in feed_all(lines)] == expected


def test_the_stack_overflow_of_sparks_interruption_check_is_one_line_naming_its_cause():
    # what the JVM printed 1024 frames of (demo, 4448 lines in one run): the regex of
    # StreamExecution.isInterruptionException recursing over a long Py4J error text
    frames = ["\tat java.base/java.util.regex.Pattern$Loop.match(Pattern.java:4898)",
              "\tat java.base/java.util.regex.Pattern$GroupTail.match(Pattern.java:4820)"] * 512
    header = 'Exception in thread "stream execution thread for taxi [id = 1, runId = 2]" java.lang.StackOverflowError'
    [record] = feed_all([header, *frames])
    assert record.level == logging.ERROR
    assert record.message == (
        'uncaught java.lang.StackOverflowError in thread "stream execution thread for taxi [id = 1, runId = 2]" '
        f"[1024 stack frame(s) not shown]: {REGEX_OVERFLOW_CAUSE}"
    )


def test_every_stack_frame_is_kept_when_the_spark_logger_is_at_debug():
    [record] = feed_all([event(exception="java.lang.RuntimeException", exception_message="boom", stack_trace=STACK)], full_stacks=True)
    assert record.message.endswith("| java.lang.RuntimeException: boom\n" + STACK.rstrip("\n"))


def test_the_reader_logs_what_the_jvm_writes_to_its_pipe(caplog):
    read, write = os.pipe()
    reader = JvmOutputReader(os.fdopen(read, "rb")).start()
    with caplog.at_level(logging.DEBUG, logger="spark"):
        with os.fdopen(write, "wb") as pipe:
            pipe.write((event(message="first") + "\nplain line\n").encode())
        reader.thread.join(10)  # the write end is closed: the reader ends
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("spark")] == [
        ("spark.MicroBatchExecution", logging.ERROR, "first"),
        (JVM_LOGGER, logging.WARNING, "plain line"),
    ]
