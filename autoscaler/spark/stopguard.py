"""A Python ``foreachBatch`` interrupted by the stop of its query ends as a stop, quietly.

What happens without this (Spark 4.3, PySpark's default pinned-thread mode): ``query.stop()``
marks the query terminated, cancels its jobs and interrupts its thread. A ``foreachBatch``
function waiting in a Py4J call (``df.collect()``, a write) gets a ``Py4JJavaError`` wrapping
``java.lang.InterruptedException``; py4j hands the Python traceback back to the JVM as a
``py4j.Py4JException`` whose message is that whole traceback, Java stack included (several
kilobytes). To tell a stop from a failure, ``StreamExecution.isInterruptionException`` matches
the message against ``PROXY_ERROR``, ``"...calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)"``:
``java.util.regex`` matches that repeated alternation by recursion, one level per character,
and throws ``StackOverflowError`` on a message this long. The error escapes the stream
thread, and the JVM prints it with its 1024 stack frames (and py4j logs the Python traceback
before that). The query has stopped all the same; the interrupted batch was never committed
and is replayed from the offset log at the next start.

The guard wraps PySpark's ``ForeachBatchFunction.call``: when the user's function raises while
its query is no longer active (the state ``isInterruptionException`` is consulted in), it
raises :class:`BatchInterruptedByStop` instead, with a short message that still matches
``PROXY_ERROR``: the regular expression sees a few dozen characters, Spark records a stop,
and nothing is printed. An error while the query is active is never touched: it fails the
query as before, with its own traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

QUERY_ID_KEY = "sql.streaming.queryId"  # StreamExecution.QUERY_ID_KEY, a local property of the query's thread
# The text StreamExecution.PROXY_ERROR recognizes as an interrupted Py4J call (kept short: see above)
INTERRUPTED = "py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: java.lang.InterruptedException"

log = logging.getLogger("autoscaler.spark.stopguard")


class BatchInterruptedByStop(Exception):
    """The query was stopped while its ``foreachBatch`` ran: the batch is replayed on restart."""

    def __init__(self, batch_id: int) -> None:
        super().__init__(f"batch {batch_id} interrupted by the stop of its query ({INTERRUPTED})")
        self.batch_id = batch_id


def install() -> None:
    """Wrap ``ForeachBatchFunction.call`` (once per process) and quiet py4j's report of the stop."""
    from pyspark.sql.utils import ForeachBatchFunction

    original = ForeachBatchFunction.call
    if getattr(original, "autoscaler_guard", False):
        return

    def call(self: Any, jdf: Any, batch_id: int) -> None:
        try:
            original(self, jdf, batch_id)
        except Exception:
            if not query_stopping(self.session):
                raise
            log.debug("batch %s interrupted by the stop of its query", batch_id)
            raise BatchInterruptedByStop(batch_id) from None  # no chained traceback: the message stays short

    call.autoscaler_guard = True  # type: ignore[attr-defined]
    ForeachBatchFunction.call = call  # type: ignore[method-assign]
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).addFilter(_drop_stop_reports)


def query_stopping(session: Any) -> bool:
    """Whether the query whose thread runs this ``foreachBatch`` is no longer active.

    With pinned threads, the Py4J calls of a ``foreachBatch`` run on the query's own JVM
    thread, which holds the query id as a local property. False when it cannot be told (the
    error is then reported as it is).
    """
    try:
        query_id = session.sparkContext.getLocalProperty(QUERY_ID_KEY)
        if not query_id:
            return False
        query = session._jsparkSession.streams().get(query_id)
        return query is None or not query.isActive()
    except Exception:  # the session is going away: report the error as it is
        return False


def quiet_interrupt_reports() -> None:
    """Drop py4j's report of a Ctrl-C or SIGTERM that lands while it waits for the JVM (once per
    process).

    The daemon's signal handler raises ``KeyboardInterrupt`` until there is something to stop
    gracefully: in the seconds the session takes to start, that is mostly inside a py4j call.
    py4j catches it to close its connection, logs ``KeyboardInterrupt while sending command.``
    at ERROR with the traceback through the root logger, and raises it again; the command then
    reports the interrupt in one line. Seen on a demo stopped by ``timeout`` while Spark
    started (2026-11-30): that traceback was all its console said besides "interrupted"."""
    root = logging.getLogger()
    if _drop_interrupt_reports not in root.filters:
        root.addFilter(_drop_interrupt_reports)


def _drop_interrupt_reports(record: logging.LogRecord) -> bool:
    from_py4j = Path(record.pathname).parent.name == "py4j"
    return not (from_py4j and record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


def _drop_stop_reports(record: logging.LogRecord) -> bool:
    """py4j logs every exception a Python callback raises, with its traceback; a batch
    interrupted by a stop is not a problem to report."""
    return not (record.exc_info and isinstance(record.exc_info[1], BatchInterruptedByStop))
