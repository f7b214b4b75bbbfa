"""Stopping the demo with SIGTERM (``kill``, ``timeout``, a pod stopping) or Ctrl-C leaves no JVM
behind, and stops its query at a batch boundary.

The demo starts a real standalone cluster (master and worker JVMs it owns) and a driver JVM.
Before, SIGTERM ended Python at once and the master and worker kept running; ending it by
SystemExit instead left the driver JVM running, and so did any interrupt while PySpark was
still launching that JVM.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys

import httpx
import psutil
import pytest

from autoscaler.runtime.net import free_port
from autoscaler.spark.checkpoint import read_checkpoint
from tests.integration.conftest import wait_until
from tests.processes import below, command, named, running

pytestmark = pytest.mark.spark


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
    family: list[psutil.Process] = []
    try:
        # the master, a worker and the driver
        wait_until(lambda: len(named(below(demo.pid), "java")) >= 3, 240, "the demo's JVMs")
        if ctrl_c:
            wait_until(lambda: any((tmp_path / "work" / "checkpoints").glob("*/commits/*")), 240, "the demo's first batch")
            _served_while_it_runs(port)
        family = below(demo.pid)
        if ctrl_c:
            os.killpg(demo.pid, signal.SIGINT)
        else:
            demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=180) == 130
        try:
            wait_until(lambda: not any(running(p) for p in family), 60, "every process the demo started to end")
        except AssertionError:
            left = {p.pid: command(p) for p in family if running(p)}
            raise AssertionError(f"still running: {left}") from None
    finally:
        # a failed test must not leave JVMs to the next: the family is found before the demo is
        # killed (after, its master and workers belong to init), also when a check failed first
        left = family or below(demo.pid)
        if demo.poll() is None:
            demo.kill()
        for process in left:
            with contextlib.suppress(psutil.NoSuchProcess):  # ended meanwhile
                process.kill()
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
