"""Every test session sees the policies loaded, as the daemon's composition root loads them; and
the fixture that gives a test's changes to the process's logging back."""

import logging

import pytest
import structlog

from autoscaler.app.compose import load_policies

load_policies()


@pytest.fixture
def restore_logging():
    """The process's logging as it was before the test: `run`, `operator` and configure_logging
    point it at a stream of the test's (pytest's captured stdout); later tests must not write to it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
