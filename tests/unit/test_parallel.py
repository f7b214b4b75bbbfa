"""Simulations in worker processes (autoscaler.tools.parallel): every result, and a failure or an
interrupt stops the workers at once instead of waiting for what is queued."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autoscaler.tools.parallel import as_finished


def _square(n: int) -> int:
    return n * n


def test_every_item_comes_back_with_its_result():
    assert sorted(as_finished(_square, range(7), jobs=2)) == [(n, n * n) for n in range(7)]
    assert list(as_finished(_square, [], jobs=2)) == []


def _sleep_or_fail(job: tuple[str, Path]) -> int:
    what, pids = job
    if what == "sleep":
        (pids / str(os.getpid())).touch()  # one file per sleeper: a second one does not hide the first
        time.sleep(300)
        return 0
    while not any(pids.iterdir()):  # fail once another worker is busy
        time.sleep(0.05)
    raise ValueError(f"{what} failed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_failure_is_raised_and_stops_the_worker_still_running(tmp_path):
    started = time.monotonic()
    with pytest.raises(ValueError, match="run 2 failed"):
        for _ in as_finished(_sleep_or_fail, [("sleep", tmp_path), ("run 2", tmp_path), ("sleep", tmp_path)], jobs=2):
            pass
    # the sleepers were stopped, not waited for: a pool that waits takes 300 s for the first
    # and 300 s more for the queued one before the failure comes out
    assert time.monotonic() - started < 100
    sleepers = [int(p.name) for p in tmp_path.iterdir()]
    assert sleepers and not any(_alive(pid) for pid in sleepers)
