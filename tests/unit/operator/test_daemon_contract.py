"""The operator's daemon client against the real daemon REST app (``autoscaler/ops/api.py``, the
schemathesis-tested API), served on loopback over the fake Spark cluster: where the operator's
parsing meets the daemon's answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.operator.control import CONTROL_FIELDS, apply_patch, control_diff
from autoscaler.operator.daemon_client import Applied, DaemonClient, DaemonUnavailable, Rejected, token_from_file
from autoscaler.operator.events import classify_entry, decision_events
from autoscaler.operator.status import Observed, condition, status_from
from autoscaler.ops.api import create_app
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.server import HttpServer
from autoscaler.runtime.clock import FakeClock
from tests.harness import TOKEN, build, serve

OPERATOR = "k8s-operator"


@pytest.fixture
def daemon(tmp_path: Path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{OPERATOR} {TOKEN}\nalice alice-token-1234567890\n")
    d = build()
    for served in serve(d, auth=ApiAuth.from_settings(None, "UNUSED", environ={}, token_files=[tokens])):
        d.tick(400)
        yield served


@pytest.fixture
def client(daemon, tmp_path):
    return DaemonClient(daemon.server.url, token=token_from_file(tmp_path / "tokens", OPERATOR), sleep=lambda s: None)


def test_the_operators_change_is_taken_and_audited_under_its_name(daemon, client):
    overrides = client.control()["overrides"]
    diff = control_diff({**{f: None for _, f in CONTROL_FIELDS}, "max_executors": 5, "paused": True}, overrides, ())
    result = client.patch_control(diff.patch, "SparkStreamingApp analytics/clicks generation 3")
    assert isinstance(result, Applied) and result.changes == {"max_executors": {"from": None, "to": 5}, "paused": {"from": False, "to": True}}
    now = client.control()["overrides"]
    assert now == apply_patch(overrides, diff.patch)  # the operator's model of the daemon's answer
    entry = daemon.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"][0]
    assert (entry["id"], entry["who"], entry["details"]["note"]) == (result.audit_id, OPERATOR, "SparkStreamingApp analytics/clicks generation 3")


@pytest.mark.parametrize(
    "patch, problem",
    [
        pytest.param({"min_executors": 9}, "min_executors: min_executors (9) must not exceed max_executors (6)", id="bounds"),
        pytest.param({"manual_executors": 9}, "manual_executors: 9 is outside the executor bounds [1, 6]", id="manual-outside-bounds"),
        pytest.param({"policy_params": {"target_utilisation": 0.5}}, "policy_params: policy 'target-utilization': params.target_utilisation: unknown parameter", id="unknown-policy-param"),
    ],
)
def test_a_change_the_daemon_refuses_comes_back_naming_the_field(client, patch, problem):
    result = client.patch_control(patch, "generation 2")
    assert isinstance(result, Rejected) and result.status == 422
    assert any(p.startswith(problem) for p in result.problems), result.problems


def test_query_requests_and_the_log_level(daemon, client):
    assert isinstance(client.patch_query("q", {"max_rows_per_batch": 500}, "generation 4"), Applied)
    assert client.queries()[0]["pending_request"]["max_rows_per_batch"] == 500
    missing = client.patch_query("nope", {"max_rows_per_batch": 5}, "generation 4")
    assert isinstance(missing, Rejected) and missing.status == 404 and missing.problems == ("name: unknown query 'nope'; known: q",)
    assert isinstance(client.put_log_level("DEBUG", "generation 4"), Applied)


def test_the_status_the_operator_writes_is_built_from_the_real_answers(daemon, client):
    daemon.run_for(60, rate=2500)
    ready, why = client.ready()
    pod = {"metadata": {"name": "clicks-0", "uid": "pod-1"}, "status": {"phase": "Running", "podIP": "10.0.0.7"}}
    sts = {"metadata": {"generation": 1}, "spec": {"replicas": 1},
           "status": {"observedGeneration": 1, "readyReplicas": 1, "currentRevision": "r", "updateRevision": "r"}}
    status = status_from({}, Observed(1, statefulset=sts, pod=pod, daemon=client.status(), daemon_ready=ready, daemon_not_ready_reason=why),
                         FakeClock().now())
    assert ready and status["phase"] == "Running" and condition(status, "Ready")["status"] == "True"
    assert status["executors"]["alive"] >= 1 and status["executors"]["max"] == 6
    assert status["mode"]["effective"] == "active" and status["queries"][0]["name"] == "q"
    events, cursor = decision_events(client.decisions(), None, "pod-1")
    assert events and cursor["decisionId"] >= 1
    assert {e.reason for e in events} <= {"ScaledUp", "ScaledDown", "ScalingHeld", "QueryRescaled", "ExecutorsLost", "QueryFailed"}
    assert all(classify_entry(e) is not None for e in client.decisions() if e["kind"] == "decision")


def test_a_wrong_token_is_retried_later_and_a_daemon_without_tokens_refuses(daemon, tmp_path):
    wrong = DaemonClient(daemon.server.url, token=lambda: "not-the-token", sleep=lambda s: None)
    with pytest.raises(DaemonUnavailable, match="401"):
        wrong.patch_control({"paused": True}, "x")
    closed = build()
    for served in serve(closed, auth=ApiAuth.disabled()):
        result = DaemonClient(served.server.url, token=lambda: TOKEN).patch_control({"paused": True}, "x")
        assert isinstance(result, Rejected) and result.status == 403 and "control API disabled" in result.message


def test_a_starting_daemon_is_unavailable_not_an_error(tmp_path):
    d = build()
    app = create_app(reconciler=lambda: None, registry=d.registry, auth=ApiAuth({TOKEN: OPERATOR}), clock=d.clock)
    with HttpServer(app, "127.0.0.1", 0) as server:
        client = DaemonClient(server.url, token=lambda: TOKEN, sleep=lambda s: None)
        assert client.ready() == (False, "starting: the reconciler is not running yet")
        with pytest.raises(DaemonUnavailable, match="503"):
            client.status()
        with pytest.raises(DaemonUnavailable, match="503"):
            client.patch_control({"paused": True}, "x")
