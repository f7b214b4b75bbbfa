"""Every test session sees the policies loaded, as the daemon's composition root loads them;
every Spark JVM it starts compiles with C1 only; every test starts with structlog at its
defaults; and the fixture that gives a test's changes to the process's logging back."""

import logging
import os
from pathlib import Path

import pytest
import structlog

from autoscaler.app.compose import load_policies

load_policies()

# Every Spark JVM the suite starts, in this process or a command it runs, compiles with C1 only
# (spark-conf/spark-defaults.conf says why and what it saved); a value the caller set is kept
JIT_C1_ONLY = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).with_name("spark-conf")))
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", JIT_C1_ONLY)


@pytest.fixture
def restore_logging():
    """The process's logging as it was before the test: `run`, `operator` and configure_logging
    point it at a stream of the test's (pytest's captured stdout); later tests must not write to it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)  # structlog: reset after every test by the fixture below


@pytest.fixture(autouse=True)
def structlog_defaults_after_each_test():
    """structlog as it comes after every test: a command run in-process (`simulate` leaves a logger
    that drops INFO, `run` one that writes to the test's captured stream) configured it for the
    whole process, and a later test's ``capture_logs`` then missed lines (a full run missed the
    state store's ``state_saved``). The stdlib root logger is left to ``restore_logging``: pytest
    attaches its own capturing handlers to it for each phase of a test."""
    yield
    structlog.reset_defaults()
