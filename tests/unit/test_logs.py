"""Log lines: one JSON object per line for daemons, Python's plain traceback on a console, and
never a traceback's local variables."""

from __future__ import annotations

import io
import json
import logging
import sys

from autoscaler.runtime.logs import configure_logging


def fail_with_a_secret_local() -> None:
    password = "hunter2-not-for-logs"  # noqa: F841 - a local variable a traceback must not show
    raise RuntimeError("the sink is down")


def log_failure(fmt: str) -> str:
    stream = io.StringIO()
    configure_logging(fmt, "INFO", stream=stream)
    try:
        fail_with_a_secret_local()
    except RuntimeError:
        logging.getLogger("py4j.clientserver").exception("There was an exception while executing the Python Proxy")
    return stream.getvalue()


def test_json_lines_keep_a_tracebacks_frames_but_not_its_local_variables(restore_logging):
    [line] = log_failure("json").splitlines()
    record = json.loads(line)
    assert record["exception"][0]["exc_value"] == "the sink is down"
    assert record["exception"][0]["frames"][-1]["name"] == "fail_with_a_secret_local"
    assert "hunter2" not in line


def test_the_console_shows_pythons_plain_traceback(restore_logging):
    text = log_failure("console")
    assert "Traceback (most recent call last):" in text and "RuntimeError: the sink is down" in text
    assert "hunter2" not in text and "╭" not in text


def test_py4js_report_of_a_lost_jvm_connection_is_one_line(restore_logging, tmp_path):
    # py4j logs a lost connection to the root logger with its own socket code's traceback: a
    # driver JVM that ran out of files while Spark started printed three of them (2026-12-01)
    import py4j.java_gateway
    from py4j.protocol import Py4JNetworkError

    stream = io.StringIO()
    configure_logging("console", "INFO", stream=stream)
    try:
        raise Py4JNetworkError("Answer from Java side is empty")
    except Py4JNetworkError:
        record = logging.LogRecord("root", logging.ERROR, py4j.java_gateway.__file__, 1060, "Exception while sending command.", (), sys.exc_info())
        logging.getLogger().handle(record)
    [line] = stream.getvalue().splitlines()
    assert line.endswith("Exception while sending command. | Py4JNetworkError: Answer from Java side is empty [root]"), line
    # a failure of the user's code that py4j reports keeps its traceback (the test above)
    assert "Traceback" in log_failure("console")
