"""Stopping the demo with SIGTERM (``kill``, ``timeout``, a pod stopping) or Ctrl-C leaves no JVM
behind, and stops its query at a batch boundary.

The demo starts a real standalone cluster (master and worker JVMs it owns) and a driver JVM.
Before, SIGTERM ended Python at once and the master and worker kept running; ending it by
SystemExit instead left the driver JVM running, and so did any interrupt while PySpark was
still launching that JVM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from autoscaler.runtime.net import free_port
from autoscaler.spark.checkpoint import read_checkpoint
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


def _served_while_it_runs(port: int) -> None:
    """The demo's HTTP side while its query runs: health, the decisions and the metrics."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        assert client.get("/healthz").status_code == 200
        decisions = client.get("/api/v1/decisions")
        assert decisions.status_code == 200 and isinstance(decisions.json()["entries"], list)
        assert "spark_autoscaler_build_info{" in client.get("/metrics").text


# SIGTERM (kill, timeout, a pod stopping) while Spark starts; Ctrl-C (SIGINT to the whole process
# group, as a terminal sends it) while the query runs, with the HTTP side served and a recording
@pytest.mark.parametrize("when", ["sigterm-while-spark-starts", "ctrl-c-while-queries-run"])
def test_a_signal_stops_the_demo_at_a_batch_boundary_and_every_jvm_it_started(tmp_path, when):
    ctrl_c = when == "ctrl-c-while-queries-run"
    port = free_port()
    http = ["--http-port", str(port), "--record", str(tmp_path / "run.jsonl")] if ctrl_c else ["--no-http"]
    with open(tmp_path / "out", "wb") as out:
        demo = subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "demo", "--workdir", str(tmp_path / "work"), "--duration", "600", *http],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,  # a process group of its own, as in a terminal
        )
    family: list[int] = []
    try:
        # the master, a worker and the driver
        wait_until(lambda: len([p for p in _descendants(demo.pid) if _is_java(p)]) >= 3, 240, "the demo's JVMs")
        if ctrl_c:
            wait_until(lambda: any((tmp_path / "work" / "checkpoints").glob("*/commits/*")), 240, "the demo's first batch")
            _served_while_it_runs(port)
        family = _descendants(demo.pid)
        if ctrl_c:
            os.killpg(demo.pid, signal.SIGINT)
        else:
            demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=180) == 130
        try:
            wait_until(lambda: not any(_running(p) for p in family), 60, "every process the demo started to end")
        except AssertionError:
            left = {p: _command(p) for p in family if _running(p)}
            raise AssertionError(f"still running: {left}") from None
    finally:
        # a failed test must not leave JVMs to the next: the family is found before the demo is
        # killed (after, its master and workers belong to init), also when a check failed first
        for pid in [demo.pid, *(family or _descendants(demo.pid))]:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
    output = (tmp_path / "out").read_text()
    assert "Traceback" not in output, output[-3000:]
    if ctrl_c:
        # the query stopped at a batch boundary: its line says so, and its checkpoint holds no
        # batch planned and not committed
        [checkpoint] = (tmp_path / "work" / "checkpoints").iterdir()
        assert re.search(rf"query {checkpoint.name} stopped at a batch boundary \(batch \d+ committed", output), output[-3000:]
        assert read_checkpoint(checkpoint).clean
        assert "stopped early: no summary" in output
        records = (tmp_path / "run.jsonl").read_text().splitlines()
        assert records and all(json.loads(line) for line in records)
