"""The driver JVM's output, read by the daemon and logged as its own lines.

The driver JVM writes to a pipe the daemon reads (``session.py`` starts it so); each line is
turned into a log record of the logger ``spark.<class>`` (or ``spark.jvm``), rendered like every
other line of the daemon (JSON for ``run``, the console format for the demo):

* a log4j event (one JSON object, ``log4j2-driver.properties``): its level, logger and message;
  an exception as one field, ``ClassName: first line of its message``, with the number of stack
  frames left out (all of them at DEBUG);
* a Java stack trace printed outside log4j (an uncaught exception, ``printStackTrace``):
  one record naming the exception and the thread, its frames counted, not printed; the known
  ``StackOverflowError`` of Spark's interruption check gets its cause named (see ``stopguard``);
* a Python traceback of a process the JVM started (they share its stderr: the planner of a
  Python data source, ``python_streaming_source_runner.py``): one record naming the exception;
  at DEBUG when the process lost its connection to the JVM or was ended mid-traceback, which is
  how a stopped query ends its Python helpers (a failure that matters fails the query, and the
  daemon reports that);
* start-up notices printed outside log4j (the JVM's about incubator modules, Spark's about the
  shell's default log level): DEBUG;
* any other line: a WARNING with the line, so nothing the JVM says is lost.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import IO, Any

LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG}
JVM_LOGGER = "spark.jvm"
# printed by the JVM or by Spark itself, not through log4j: start-up notices, no problem to act on
NOTICES = (
    "WARNING: Using incubator modules:",  # the JVM: Spark 4 adds jdk.incubator.vector to every JVM
    'Setting default log level to "',  # Spark, for a shell (PySpark's gateway counts as one)
    "To adjust logging level use sc.setLogLevel(newLevel).",
    "Using Spark's default log4j profile:",  # when a user's own configuration is not found
)
MAX_MESSAGE_LINES = 200  # a trace header longer than this is not a header: its lines are logged one by one

_UNCAUGHT = re.compile(r'^Exception in thread "(?P<thread>.*)" (?P<error>[\w$.]+(?::.*)?)$')
_THROWABLE = re.compile(r"^(?P<error>(?:[a-z_$][\w$]*\.)+[\w$]*(?:Exception|Error|Throwable)(?::.*)?)$")
_FRAME = re.compile(r"^\s+(?:at |\.\.\. \d+ (?:more|common frames omitted))")
_CAUSE = re.compile(r"^\s*(?:Caused by|Suppressed): (?P<error>.*)$")
# a Python helper of the JVM ending this way was let go by the JVM (its query stopped)
LET_GO = ("ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError", "EOFError")
PYTHON_TRACEBACK = "Traceback (most recent call last):"
REGEX_OVERFLOW_CAUSE = (
    "Spark's check whether a stopped query's Python batch was interrupted overflowed the stack matching "
    "the Py4J error text (StreamExecution.isInterruptionException, java.util.regex); the query stopped, "
    "its batch is replayed on restart"
)


@dataclass(frozen=True)
class JvmRecord:
    level: int
    logger: str
    message: str


@dataclass
class _Trace:
    """A Java stack trace being read: its header (possibly several lines), then frames."""

    error: str
    thread: str | None
    message: list[str] = field(default_factory=list)
    frames: int = 0
    regex_frames: int = 0
    causes: list[str] = field(default_factory=list)

    def record(self) -> JvmRecord:
        where = f' in thread "{self.thread}"' if self.thread else ""
        text = f"uncaught {self.error}{where}" if self.thread else self.error
        if self.message:
            text += f" (+{len(self.message)} more line(s) of message)"
        if self.causes:
            text += f"; caused by {self.causes[-1]}"
        if self.frames:
            text += f" [{self.frames} stack frame(s) not shown]"
        if self.error.startswith("java.lang.StackOverflowError") and self.regex_frames:
            text += f": {REGEX_OVERFLOW_CAUSE}"
        return JvmRecord(logging.ERROR, JVM_LOGGER, text)


@dataclass
class _PythonTrace:
    """A Python traceback being read: frames, then the exception line."""

    frames: int = 0
    script: str | None = None

    def add(self, line: str) -> None:
        if line.startswith('  File "'):
            self.frames += 1
            name = line.split('"', 2)[1].rsplit("/", 1)[-1]
            if self.script is None and not name.startswith("<"):
                self.script = name

    def record(self, error: str | None) -> JvmRecord:
        where = f" ({self.script}, {self.frames} frame(s) not shown)" if self.script else f" ({self.frames} frame(s) not shown)"
        if error is None:
            return JvmRecord(logging.DEBUG, JVM_LOGGER, f"a Python process of the Spark driver was ended mid-traceback{where}")
        level = logging.DEBUG if error.startswith(LET_GO) else logging.WARNING
        return JvmRecord(level, JVM_LOGGER, f"a Python process of the Spark driver failed: {error}{where}")


# the lines that chain one Python exception to the next (they follow the first one's exception line)
PYTHON_CHAINED = ("During handling", "The above exception")


def _python_continues(line: str) -> bool:
    """A line inside a Python traceback: frames and code are indented; chained exceptions say so."""
    return not line.strip() or line[0].isspace() or line.startswith((PYTHON_TRACEBACK, *PYTHON_CHAINED))


class JvmLines:
    """Turns the JVM's output, line by line, into records (pure: no I/O, no threads)."""

    def __init__(self, *, full_stacks: bool = False) -> None:
        self.full_stacks = full_stacks
        self._trace: _Trace | None = None
        self._python: _PythonTrace | None = None

    def feed(self, line: str) -> list[JvmRecord]:
        line = line.rstrip("\r\n")
        python = self._python
        if python is not None:
            if _python_continues(line):
                python.add(line)
                return []
            self._python = None
            if not line.startswith("{"):  # the exception line ends it
                return [python.record(line)]
            return [python.record(None)] + self._start(line)
        trace = self._trace
        if trace is not None:
            if _FRAME.match(line):
                trace.frames += 1
                trace.regex_frames += "java.util.regex." in line
                return []
            if cause := _CAUSE.match(line):
                trace.causes.append(cause["error"])
                return []
            if not trace.frames and len(trace.message) < MAX_MESSAGE_LINES and not line.startswith("{"):
                trace.message.append(line)  # a message of several lines, before the frames
                return []
        done = self.close()
        return done + self._start(line)

    def close(self) -> list[JvmRecord]:
        """The record of a trace still being read (at the end of the output)."""
        trace, self._trace = self._trace, None
        python, self._python = self._python, None
        return ([trace.record()] if trace is not None else []) + ([python.record(None)] if python is not None else [])

    def _start(self, line: str) -> list[JvmRecord]:
        if not line.strip():
            return []
        if line.startswith("{"):
            event = _json(line)
            if event is not None and event.get("jvm_log"):
                return [self._event(event)]
        if line.startswith((PYTHON_TRACEBACK, *PYTHON_CHAINED)):
            # a chained exception's traceback comes after the first one's exception line ended it
            self._python = _PythonTrace()
            return []
        if uncaught := _UNCAUGHT.match(line):
            self._trace = _Trace(uncaught["error"], uncaught["thread"])
            return []
        if throwable := _THROWABLE.match(line):
            self._trace = _Trace(throwable["error"], None)
            return []
        if line.startswith(NOTICES):
            return [JvmRecord(logging.DEBUG, JVM_LOGGER, line)]
        return [JvmRecord(logging.WARNING, JVM_LOGGER, line)]

    def _event(self, event: dict[str, Any]) -> JvmRecord:
        name = str(event.get("logger") or "jvm")
        text = str(event.get("message") or "")
        if event.get("exception"):
            detail = str(event.get("exception_message") or "")
            first, _, rest = detail.partition("\n")
            text += f" | {event['exception']}" + (f": {first}" if first else "")
            if rest:
                text += f" (+{rest.count(chr(10)) + 1} more line(s) of message)"
            stack = str(event.get("stack_trace") or "")
            frames = sum(1 for line in stack.splitlines() if _FRAME.match(line))
            if self.full_stacks and stack:
                text += "\n" + stack.rstrip("\n")
            elif frames:
                text += f" [{frames} stack frame(s) not shown]"
        level = LEVELS.get(str(event.get("level") or "").upper(), logging.WARNING)
        return JvmRecord(level, "spark." + name.rsplit(".", 1)[-1], text)


def _json(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class JvmOutputReader:
    """Reads a JVM's output in a thread of its own and logs each record (stdlib logging: the
    daemon's handlers render it; without any, errors reach stderr through logging's last resort)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lines = JvmLines(full_stacks=logging.getLogger("spark").isEnabledFor(logging.DEBUG))
        self.thread = threading.Thread(target=self._run, name="jvm-output", daemon=True)

    def start(self) -> JvmOutputReader:
        self.thread.start()
        return self

    def _run(self) -> None:
        with self.stream:
            for raw in self.stream:
                for record in self.lines.feed(raw.decode("utf-8", errors="replace")):
                    emit(record)
        for record in self.lines.close():
            emit(record)


def emit(record: JvmRecord) -> None:
    logging.getLogger(record.logger).log(record.level, "%s", record.message)
