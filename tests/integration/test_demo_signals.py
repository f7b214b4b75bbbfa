"""Stopping the demo with SIGTERM (``kill``, ``timeout``, a pod stopping) leaves no JVM behind.

The demo starts a real standalone cluster (master and worker JVMs it owns) and a driver JVM.
Before, SIGTERM ended Python at once and the master and worker kept running; ending it by
SystemExit instead left the driver JVM running, and so did any interrupt while PySpark was
still launching that JVM.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import wait_until

pytestmark = pytest.mark.spark


def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int) -> list[int]:
    children, found, todo = _parents(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[-160:].decode(errors="replace")
    except OSError:
        return "(gone)"


def _is_java(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@pytest.mark.parametrize("when", ["while-spark-starts", "while-queries-run"])
def test_sigterm_stops_the_demo_and_every_jvm_it_started(tmp_path, when):
    demo = subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "demo", "--workdir", str(tmp_path), "--no-http", "--duration", "600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    family: list[int] = []
    try:
        # the master, a worker and the driver
        wait_until(lambda: len([p for p in _descendants(demo.pid) if _is_java(p)]) >= 3, 240, "the demo's JVMs")
        if when == "while-queries-run":
            wait_until(lambda: any((tmp_path / "checkpoints").glob("*/offsets/*")), 240, "the demo's first batch")
        family = _descendants(demo.pid)
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=180) == 130  # as after Ctrl-C
        try:
            wait_until(lambda: not any(_running(p) for p in family), 60, "every process the demo started to end")
        except AssertionError:
            left = {p: _command(p) for p in family if _running(p)}
            raise AssertionError(f"still running: {left}") from None
    finally:
        for pid in [demo.pid, *family]:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)  # a failed test must not leave JVMs to the next
