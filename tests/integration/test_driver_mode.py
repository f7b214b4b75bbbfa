"""Driver mode end to end: the CLI hosts pipelines, stops at batch boundaries on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoscaler.spark.checkpoint import read_checkpoint
from autoscaler.spark.pipelines import PipelineContext, load_pipelines
from tests.integration.conftest import assert_every_row_once, json_lines, wait_until

pytestmark = pytest.mark.spark

HERE = Path(__file__).parent


def daemon(args, env=None, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "autoscaler", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        **kw,
    )


def test_sigterm_stops_every_query_at_a_batch_boundary_and_bounded_pipelines_finish(spark_session_factory, tmp_path):
    start = time.time() + 20
    env = {"SAMPLE_START": repr(start), "SAMPLE_OUT": str(tmp_path / "out")}
    config = tmp_path / "autoscaler.yaml"
    config.write_text(
        "mode: active\n"
        "reconcile_interval: 1s\n"
        "resource_wait_timeout: 10s\n"
        "executors: {min: 1, max: 2}\n"
        f"pipelines: {{module: {HERE / 'sample_pipelines.py'}, checkpoint_root: {tmp_path / 'ckpt'}}}\n"
        "spark: {master: 'local-cluster[2,1,512]'}\n"
        "http: {port: 0}\n"
    )
    proc = daemon(["--config", str(config)], env=env)
    try:
        wait_until(lambda: len(list((tmp_path / "out" / "stream").glob("batch-*.json"))) >= 5, 180, "stream batches")
        wait_until(lambda: list((tmp_path / "out" / "bounded").glob("batch-*.json")), 30, "the bounded pipeline's output")
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = output.decode()
    assert proc.returncode == 0, text[-3000:]
    logged = json_lines(text)
    assert any(e.get("event") == "query_finished" and e.get("query") == "bounded" for e in logged)
    assert any(e.get("event") == "signal_received" and e.get("signal") == "SIGTERM" for e in logged)
    # the bounded pipeline committed everything it read
    assert read_checkpoint(tmp_path / "ckpt" / "bounded").clean
    bounded_rows = sum(json.loads(p.read_text())["rows"] for p in (tmp_path / "out" / "bounded").glob("batch-*.json"))
    assert bounded_rows == 1500
    # restart the stream from its checkpoint and drain it: the checkpoint is consistent
    os.environ.update(env)
    spec = next(s for s in load_pipelines(str(HERE / "sample_pipelines.py")) if s.name == "stream")
    spark = spark_session_factory("local[2]")
    ckpt = tmp_path / "ckpt" / "stream"
    writer = spec.build(spark, PipelineContext("stream", 2, str(ckpt)))
    q = writer.option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
    q.awaitTermination(180)
    info = read_checkpoint(ckpt)
    assert info.clean and info.last_commit is not None and info.last_commit >= 5
    # and across the SIGTERM and the restart every row came out once: no batch lost or cut short
    assert_every_row_once(tmp_path / "out" / "stream", ckpt)


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        pytest.param("executors: {min: 4, max: 2}\n", "executors: min (4) must not exceed max (2)", id="min-above-max"),
        pytest.param("mode: sometimes\n", "mode: Input should be 'auto', 'reactive' or 'active'", id="bad-mode"),
        pytest.param("pipelines: {module: /nonexistent/p.py}\n", "pipeline file '/nonexistent/p.py' does not exist", id="missing-module"),
        pytest.param("reconcile_intervall: 5s\n", "reconcile_intervall: unknown key", id="unknown-key"),
    ],
)
def test_invalid_configuration_exits_non_zero_naming_the_key(tmp_path, yaml_text, message):
    config = tmp_path / "bad.yaml"
    config.write_text(yaml_text)
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "run", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_a_pipeline_that_raises_starts_nothing_and_names_the_pipeline(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "run", "--pipelines", str(HERE / "broken_pipelines.py"), "--master", "local[1]", "--mode", "reactive", "--http-port", "0"],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "SPARK_AUTOSCALER_PIPELINES__CHECKPOINT_ROOT": str(tmp_path / "ckpt")},
    )
    assert result.returncode == 2
    assert "pipeline 'broken' raised while building: RuntimeError: cannot reach the Kafka cluster" in result.stderr
    assert "query_started" not in result.stdout
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())
    # on local[1] the driver runs the tasks: no executor will register, so none is waited for
    # (before, the start waited out the whole resource_wait_timeout, a minute, for nothing)
    events = [e.get("event") for e in json_lines(result.stdout + result.stderr)]
    assert "no_executors_to_wait_for" in events and "starting_with_fewer_executors" not in events, events


def test_pipeline_module_that_fails_to_import_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import does_not_exist_anywhere\n")
    result = subprocess.run([sys.executable, "-m", "autoscaler", "run", "--pipelines", str(bad), "--check"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"pipeline module '{bad}' failed to import: ModuleNotFoundError" in result.stderr


def test_check_validates_without_starting_spark():
    # with no Java to be found, starting Spark would fail: the check must not need it
    env = {**os.environ, "JAVA_HOME": "/nonexistent/java", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "autoscaler", "run", "--pipelines", str(HERE / "sample_pipelines.py"), "--check"],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "pipelines: stream, bounded" in result.stdout
