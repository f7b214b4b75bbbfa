"""The operator command: its flags, its configuration errors, its metrics endpoint, a one-off pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from autoscaler.operator.main import _once, http_app
from autoscaler.operator.metrics import OperatorMetrics
from autoscaler.operator.settings import OperatorSettingsError, load_operator_settings
from autoscaler.ops.server import HttpServer
from autoscaler.tools.dashboard.prometheus import tool
from tests.http_checks import assert_head_answers_as_get
from tests.unit.operator.samples import sample
from tests.unit.operator.scenario import world

ROOT = Path(__file__).resolve().parents[3]


def test_operator_help_lists_its_flags():
    done = subprocess.run([sys.executable, "-m", "autoscaler", "operator", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0
    for flag in ("--namespaces", "--lease-name", "--leader-election", "--no-leader-election", "--resync-interval", "--workers", "--once"):
        assert flag in done.stdout


@pytest.mark.parametrize(
    "text, problem",
    [
        pytest.param("workers: 0\n", "workers: Input should be greater than or equal to 1", id="no-workers"),
        # which namespace was not said
        pytest.param("namespaces: [ok, Bad_NS]\n", "namespaces.1: String should match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', got 'Bad_NS'", id="bad-namespace"),
        pytest.param("workers: 99\n", "workers: Input should be less than or equal to 32, got 99", id="too-many-workers"),
        pytest.param("leaderElection: {leaseDuration: 10, renewDeadline: 10}\n", "leaderElection: lease_duration (10s) must exceed renew_deadline (10s)",
                     id="lease-timings"),
        pytest.param("resyncInterval: soon\n", "resyncInterval: Value error, expected a duration", id="bad-duration"),
        pytest.param("wokers: 2\n", "wokers: unknown key", id="typo"),
        pytest.param("leaderElection: {leaseDuration: 1000000}\n", "leaderElection.leaseDuration: Input should be less than or equal to 3600",
                     id="lease-beyond-an-hour"),
        pytest.param("resyncInterval: 0s\n", "resyncInterval: must be more than 0, got 0s", id="spinning-resync"),
        pytest.param("daemon: {timeout: 0s}\n", "daemon.timeout: must be more than 0, got 0s", id="no-daemon-timeout"),
        pytest.param("resyncInterval: 0.01ms\n", "resyncInterval: must be at least 1s (less spins the resync loop), got 0.00001s", id="resync-of-microseconds"),
        pytest.param("daemon: {timeout: 0.5ms}\n", "daemon.timeout: must be at least 0.1s", id="daemon-timeout-under-100ms"),
        pytest.param("appDefaults: {requestTimeout: 0s}\n", "appDefaults.requestTimeout: must be more than 0, got 0s", id="no-request-timeout"),
        # the watch takes whole seconds: under 1 s it was sent as 0, the API server's own default
        pytest.param("watchTimeout: 500ms\n", "watchTimeout: must be at least 1s", id="watch-under-a-second"),
        pytest.param("watchTimeout: 0s\n", "watchTimeout: must be at least 1s", id="no-watch-timeout"),
    ],
)
def test_a_bad_configuration_is_named(tmp_path, text, problem):
    path = tmp_path / "operator.yaml"
    path.write_text(text)
    with pytest.raises(OperatorSettingsError) as info:
        load_operator_settings(path)
    assert problem.replace("Value error, ", "") in str(info.value)


def test_the_command_refuses_a_bad_configuration_before_it_connects(tmp_path):
    path = tmp_path / "operator.yaml"
    path.write_text("workers: 99\n")
    done = subprocess.run([sys.executable, "-m", "autoscaler", "operator", "--config", str(path)], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "workers: Input should be less than or equal to 32" in done.stderr


def test_timings_of_a_disabled_election_are_checked_only_when_a_flag_turns_it_on(tmp_path):
    path = tmp_path / "operator.yaml"
    path.write_text("leaderElection: {enabled: false, leaseDuration: 5, renewDeadline: 10}\n")
    assert load_operator_settings(path).leader_election.enabled is False
    with pytest.raises(OperatorSettingsError) as info:
        load_operator_settings(path, {"leaderElection.enabled": True})
    assert "leaderElection: lease_duration (5s) must exceed renew_deadline (10s)" in str(info.value)


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "operator.yaml"
    path.write_text("namespaces: [a]\nworkers: 2\nleaderElection: {leaseName: from-file}\n")
    s = load_operator_settings(path, {"workers": 6, "leaderElection.leaseName": "from-flag", "namespaces": ["b", "c"]})
    assert (s.workers, s.leader_election.lease_name, s.namespaces) == (6, "from-flag", ["b", "c"])


def test_the_metrics_pass_promtool_and_health_answers(tmp_path):
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.kube_call("patch", "statefulsets", 200)
    metrics.kube_call("get", "pods", None)
    metrics.daemon_call("/api/v1/queries/{name}", 422)
    metrics.pass_done(0.2, None)
    metrics.count_apps([{"status": {"phase": "Running"}}, {}])
    with HttpServer(http_app(metrics.registry, lambda: (True, None)), "127.0.0.1", 0) as server:
        exposition = httpx.get(f"{server.url}/metrics").text
        assert httpx.get(f"{server.url}/healthz").status_code == 200 and httpx.get(f"{server.url}/readyz").json()["status"] == "ready"
        with httpx.Client(base_url=server.url) as client:
            assert_head_answers_as_get(client, {"/healthz": 200, "/readyz": 200, "/metrics": 200})
    done = subprocess.run([tool("promtool"), "check", "metrics"], input=exposition, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'spark_autoscaler_operator_apps{phase="Running"} 1.0' in exposition
    assert 'spark_autoscaler_operator_apps{phase="Pending"} 1.0' in exposition
    assert 'spark_autoscaler_operator_kube_api_requests_total{code="none",resource="pods",verb="get"} 1.0' in exposition


def test_once_reconciles_every_app_one_time(tmp_path):
    w = world("http://127.0.0.1:1", tmp_path)
    w.kube.put_app(sample())
    assert _once(w.controller, w.reconciler.settings) == 0
    assert w.kube.get("StatefulSet", "analytics", "clicks") is not None
