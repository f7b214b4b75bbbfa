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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if isinstance(level, int) else level.upper())
    for noisy in ("py4j", "urllib3", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
