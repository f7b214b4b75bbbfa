"""A Python foreachBatch interrupted by its query's stop raises a short error Spark reads as a
stop; an error while the query is active reaches Spark unchanged."""

from __future__ import annotations

import logging
import sys
import traceback

import pytest

from autoscaler.spark import stopguard
from autoscaler.spark.stopguard import INTERRUPTED, QUERY_ID_KEY, BatchInterruptedByStop

pytest.importorskip("pyspark")


class FakeQuery:
    def __init__(self, active: bool) -> None:
        self.active = active

    def isActive(self) -> bool:
        return self.active


class FakeSession:
    """What the guard asks PySpark: the query id of the calling thread and that query's state."""

    def __init__(self, query_id: str | None, query: FakeQuery | None) -> None:
        self.sparkContext = self
        self._jsparkSession = self
        self.query_id, self.query = query_id, query

    def getLocalProperty(self, key: str) -> str | None:
        assert key == QUERY_ID_KEY
        return self.query_id

    def streams(self) -> "FakeSession":
        return self

    def get(self, query_id: str) -> FakeQuery | None:
        return self.query if query_id == self.query_id else None


def call_batch(session: FakeSession, error: Exception) -> BaseException:
    """Run a failing foreachBatch function through PySpark's (guarded) ForeachBatchFunction."""
    from pyspark.sql.utils import ForeachBatchFunction

    stopguard.install()
    function = ForeachBatchFunction.__new__(ForeachBatchFunction)
    function.session = session

    def fail(_df: object, _batch_id: int) -> None:
        raise error

    function.func = fail
    with pytest.raises(Exception) as raised:
        # the jdf: PySpark wraps it before calling the user's function; a stand-in that fails that way too
        function.call(FailingJdf(error), 7)
    return raised.value


class FailingJdf:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def sparkSession(self) -> object:
        raise self.error


@pytest.mark.parametrize(
    "session, stopped",
    [
        pytest.param(FakeSession("q1", FakeQuery(active=False)), True, id="query-stopped"),
        pytest.param(FakeSession("q1", None), True, id="query-gone"),
        pytest.param(FakeSession("q1", FakeQuery(active=True)), False, id="query-active: a real error"),
        pytest.param(FakeSession(None, None), False, id="no-query-id: reported as it is"),
    ],
)
def test_only_a_batch_of_a_stopped_query_becomes_an_interruption(session, stopped):
    error = RuntimeError("sink down")
    raised = call_batch(session, error)
    if stopped:
        assert isinstance(raised, BatchInterruptedByStop) and raised.batch_id == 7
    else:
        assert raised is error


def test_the_interruption_reaches_the_jvm_as_a_short_text_sparks_check_recognizes():
    # py4j sends the JVM traceback.format_exc() of the callback's error; Spark matches it with
    # "...calling((.|\r\n|\r|\n)*)(java.lang.InterruptedException|...)" (one recursion per
    # character after "calling": a few kilobytes overflowed the stack)
    raised = call_batch(FakeSession("q1", None), RuntimeError("x" * 20000))
    try:
        raise raised
    except BatchInterruptedByStop:
        text = traceback.format_exc()
    assert INTERRUPTED in text and "x" * 100 not in text  # the original error (and its chain) is not sent
    tail = text.split("An error occurred while calling", 1)[1]
    assert len(tail) < 200 and "java.lang.InterruptedException" in tail


def test_py4j_does_not_report_the_interruption_but_still_reports_real_errors():
    kept = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record.exc_info[1] if record.exc_info else None)

    stopguard.install()
    logger = logging.getLogger("py4j.clientserver")
    handler = Keep()
    logger.addHandler(handler)
    try:
        for error in (BatchInterruptedByStop(3), RuntimeError("sink down")):
            try:
                raise error
            except Exception:
                logger.exception("There was an exception while executing the Python Proxy on the Python Side.")
    finally:
        logger.removeHandler(handler)
    assert [type(e) for e in kept] == [RuntimeError]


def test_installing_twice_wraps_once():
    from pyspark.sql.utils import ForeachBatchFunction

    stopguard.install()
    first = ForeachBatchFunction.call
    stopguard.install()
    assert ForeachBatchFunction.call is first
    assert sys.modules["pyspark.sql.utils"].ForeachBatchFunction.call.autoscaler_guard


class _Interrupted:
    """A py4j connection whose JVM call is cut short by our signal handler's KeyboardInterrupt."""

    socket = None

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def send_command(self, command: str) -> str:
        raise self.error

    def close(self, reset: bool = False) -> None:
        pass


def _root_records_of_a_py4j_call_interrupted_by(error: BaseException) -> list[logging.LogRecord]:
    """What py4j's own ``GatewayClient.send_command`` logs through the root logger when the call
    is cut short by ``error`` (re-raised to the caller, as py4j does)."""
    from py4j.java_gateway import GatewayClient

    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    client = GatewayClient()
    client._get_connection = lambda: _Interrupted(error)  # type: ignore[method-assign]
    root, handler = logging.getLogger(), Keep()
    root.addHandler(handler)
    try:
        with pytest.raises(type(error)):
            client.send_command("c\nt\ngetSparkContext\ne\n")
    finally:
        root.removeHandler(handler)
    return [r for r in kept if r.levelno >= logging.ERROR]


def test_a_ctrl_c_while_py4j_waits_for_the_jvm_is_not_reported_as_an_error():
    root = logging.getLogger()
    root.removeFilter(stopguard._drop_interrupt_reports)
    try:
        # without the filter py4j reports our own interrupt at ERROR, with its traceback
        [before] = _root_records_of_a_py4j_call_interrupted_by(KeyboardInterrupt())
        assert before.getMessage() == "KeyboardInterrupt while sending command." and before.exc_info
        stopguard.quiet_interrupt_reports()
        stopguard.quiet_interrupt_reports()  # once per process
        assert root.filters.count(stopguard._drop_interrupt_reports) == 1
        assert _root_records_of_a_py4j_call_interrupted_by(KeyboardInterrupt()) == []
        # a record of ours with a KeyboardInterrupt is not py4j's: kept
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            record = logging.LogRecord("root", logging.ERROR, __file__, 1, "ours", None, sys.exc_info())
        assert root.filter(record)
    finally:
        root.removeFilter(stopguard._drop_interrupt_reports)
