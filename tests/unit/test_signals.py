"""SIGINT and SIGTERM belong to the daemon: before there is anything to drain they interrupt at
once, after that they ask for a stop (once, however many arrive: `timeout` signals the process
and then its group)."""

from __future__ import annotations

import os
import signal

import pytest

from autoscaler.app.signals import SIGNALS, StopSignals


@pytest.fixture(autouse=True)
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_before_anything_runs_a_signal_interrupts_like_ctrl_c():
    StopSignals().install(graceful=False)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_once_running_a_signal_asks_for_the_stop_and_nothing_else(sig):
    stops = []
    signals = StopSignals(on_stop=lambda: stops.append(1))
    signals.install(graceful=True)
    os.kill(os.getpid(), sig)
    os.kill(os.getpid(), signal.SIGTERM)  # the group's copy of the same stop
    assert signals.requested.is_set() and len(stops) == 2  # request_stop is idempotent


def test_installing_again_takes_the_signals_back_from_a_handler_that_replaced_ours():
    # PySpark's SparkContext installs its own SIGINT handler (cancel every job, raise KeyboardInterrupt)
    signals = StopSignals()
    signals.install(graceful=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signals.install()
    os.kill(os.getpid(), signal.SIGINT)
    assert signals.requested.is_set()
