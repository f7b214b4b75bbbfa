"""Logging: structlog JSON lines for daemons (stdlib loggers routed through the same
formatter), or a readable console format for the demo."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

_SHARED: list[structlog.types.Processor] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def get_logger(name: str) -> Any:
    """The structlog logger ``name``, its stdlib logger made now rather than at its first line:
    ``PUT /api/v1/log-level`` sets the level of a logger that exists, and a quiet module's (the
    one someone wants DEBUG from) did not exist until it had logged."""
    logging.getLogger(name)
    return structlog.get_logger(name)


def _one_line_jvm_connection_errors(record: logging.LogRecord) -> bool:
    """py4j's report of a lost connection to the JVM, in one line: it logs it to the root logger
    with the traceback of its own socket code, chained three deep (a driver JVM that ran out of
    files while Spark started printed three such tracebacks before our one-line error,
    2026-12-01). A failure of the user's code that py4j reports (a ``foreachBatch`` that
    raised) keeps its traceback: those frames are the user's."""
    if record.exc_info and record.exc_info[1] is not None and "py4j" in record.pathname:
        exc = record.exc_info[1]
        # by name: only the Spark adapter imports py4j (the layer contracts)
        if isinstance(exc, ConnectionError) or type(exc).__name__ == "Py4JNetworkError":
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            record.msg = f"{record.getMessage()} | {type(exc).__name__}" + (f": {first}" if first else "")
            record.args, record.exc_info, record.exc_text = (), None, None
    return True


def configure_logging(fmt: str = "json", level: str | int = "INFO", stream: TextIO | None = None) -> None:
    """``fmt`` is ``json`` (one object per line) or ``console``."""
    renderer: structlog.types.Processor
    final: list[structlog.types.Processor]
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
        # a traceback's frames without their local variables: a log line is no place for a
        # pipeline's data or credentials, and py4j's report of a failed batch had dozens
        tracebacks = structlog.processors.ExceptionRenderer(structlog.tracebacks.ExceptionDictTransformer(show_locals=False))
        final = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, tracebacks, renderer]
    else:
        # Python's own traceback format (rich's boxes, when rich is installed, took 80 columns and
        # 180 lines for one failed batch)
        renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
        final = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer]
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(foreign_pre_chain=_SHARED, processors=final))
    handler.addFilter(_one_line_jvm_connection_errors)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if isinstance(level, int) else level.upper())
    for noisy in ("py4j", "urllib3", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
