"""`spark-autoscaler run` stopped the way a terminal or `timeout` stops it: SIGTERM to its whole
process group. The daemon owns the order: every query stops at a batch boundary, one line says
so per query, then Spark stops, and the exit code is 0.

Before, the driver JVM was in the daemon's process group and died of the same signal first:
local-cluster's workers logged ~20 `Failed to launch executor ... Shutdown hooks cannot be
modified during shutdown`, stopping the session ended in a `ConnectionRefusedError` traceback,
and no batch boundary was reached. A pipeline that fails for real still says so, on the console
and in the status API.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from autoscaler.spark.checkpoint import read_checkpoint
from tests.integration.conftest import json_lines, wait_until

pytestmark = pytest.mark.spark

HERE = Path(__file__).parent
STACK_FRAME = re.compile(r"^\s+at ")


def test_sigterm_to_the_process_group_stops_every_query_at_a_batch_boundary_and_real_errors_still_show(tmp_path):
    config = tmp_path / "autoscaler.yaml"
    config.write_text(
        "reconcile_interval: 1s\n"
        "resource_wait_timeout: 20s\n"
        "executors: {min: 1, max: 2}\n"
        "pipelines: {restart_backoff_max: 2s}\n"
        "spark: {conf: {spark.sql.shuffle.partitions: 2}}\n"
    )
    out = tmp_path / "out"
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "wb") as so, open(stderr, "wb") as se:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "autoscaler", "run", "--config", str(config), "--pipelines", str(HERE / "stop_pipelines.py"),
             "--master", "local-cluster[2,1,512]", "--mode", "active", "--http-port", "0"],
            stdout=so, stderr=se, start_new_session=True,  # its own process group, as a shell's job
            env={**os.environ, "STOP_OUT": str(out), "SPARK_AUTOSCALER_PIPELINES__CHECKPOINT_ROOT": str(tmp_path / "ckpt")},
        )
    try:
        url = wait_until(lambda: next((e["url"] for e in json_lines(stdout.read_text()) if e.get("event") == "http_listening"), None), 120, "the HTTP server")
        wait_until(lambda: len(list((out / "counts").glob("batch-*.json"))) >= 5, 240, "batches of the grouped count")

        def failing_error():
            with urllib.request.urlopen(f"{url}/api/v1/queries/failing", timeout=5) as resp:
                return "the warehouse rejected batch" in json.dumps(json.load(resp))

        wait_until(failing_error, 120, "the failing pipeline's error in the status API")
        os.killpg(daemon.pid, signal.SIGTERM)  # the whole group: daemon, driver JVM (if it were there), everything
        assert daemon.wait(timeout=180) == 0
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
    text = stdout.read_text() + stderr.read_text()
    events = json_lines(stdout.read_text())
    # the real error reached the console
    assert any(e.get("event") == "query_failed" and "the warehouse rejected batch" in e.get("error", "") for e in events)
    # the stop: signal, one line per query, no traceback, no stack frames, no JVM that died first
    assert [e["signal"] for e in events if e.get("event") == "signal_received"] == ["SIGTERM"]
    stopped = {e["query"]: e for e in events if e.get("event") == "query_stopped"}
    assert set(stopped) == {"counts", "failing"}, text[-3000:]
    for bad in ("Failed to launch executor", "ConnectionRefusedError", "Shutdown hooks cannot be modified"):
        assert bad not in text, text[-3000:]
    # (the failing pipeline's traceback is inside its JSON lines, as it should be; none printed raw)
    assert not [line for line in text.splitlines() if line.startswith("Traceback") or STACK_FRAME.match(line)], text[-3000:]
    # the grouped count stopped at a batch boundary: its last planned batch is committed
    info = read_checkpoint(tmp_path / "ckpt" / "counts")
    assert info.clean and stopped["counts"]["replayed_batch"] is None
    assert stopped["counts"]["last_committed_batch"] == info.last_commit >= 4
