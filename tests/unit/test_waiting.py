"""The one polling helper the local cluster, the benchmarks and the tests wait with."""

import time

import pytest

from autoscaler.runtime.waiting import poll
from tests.waiting import wait_until


def test_poll_returns_the_first_true_value_it_is_given():
    answers = iter([0, None, "", "ready", "later"])
    assert poll(lambda: next(answers), timeout=5, interval=0.001) == "ready"


def test_poll_asks_once_more_at_the_deadline_and_then_gives_none():
    asked = []
    started = time.monotonic()
    assert poll(lambda: asked.append(time.monotonic()), timeout=0.05, interval=0.01) is None
    assert len(asked) >= 2 and asked[-1] - started >= 0.05


def test_a_test_that_waits_in_vain_fails_naming_what_it_waited_for():
    with pytest.raises(AssertionError, match="timed out after 0s waiting for the moon"):
        wait_until(lambda: False, 0.01, "the moon", interval=0.001)
    assert wait_until(lambda: 7, 1, "a number") == 7
