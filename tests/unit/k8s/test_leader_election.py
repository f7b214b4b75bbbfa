"""Leader election with the official client's ``LeaderElection`` and ``LeaseLock``, in real time
(a 3 s lease), against ``pytest-httpserver`` answering scripted, schema-valid Lease JSON."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone

import pytest
from werkzeug import Request, Response

from autoscaler.k8s.leader import LeaderElector, LeaseTimings
from tests.kube import kube_api, status, validate

LEASE = "/apis/coordination.k8s.io/v1/namespaces/spark-system/leases/spark-autoscaler-operator"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/spark-system/leases"
FAST = LeaseTimings(lease_duration=3, renew_deadline=2, retry_period=1)


def lease(holder: str, rv: str = "7") -> dict:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return validate({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "spark-autoscaler-operator", "namespace": "spark-system", "resourceVersion": rv, "uid": "lease-uid",
                                  "creationTimestamp": "2026-11-20T10:00:00Z"},
                     "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3, "acquireTime": now, "renewTime": now}})


class Script:
    """Answers in turn; the last answer of a method repeats."""

    def __init__(self, answers: dict[str, list[tuple[int, dict]]]) -> None:
        self.answers = answers
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        with self.lock:
            self.seen.append(request.method)
            queue = self.answers[request.method]
            code, body = queue.pop(0) if len(queue) > 1 else queue[0]
        return Response(json.dumps(body), status=code, content_type="application/json")


def elect(httpserver, script: Script, identity: str = "operator-0") -> tuple[LeaderElector, dict]:
    httpserver.expect_request(LEASE).respond_with_handler(script)
    httpserver.expect_request(LEASES, method="POST").respond_with_handler(script)
    calls = {"started": threading.Event(), "stopped": threading.Event()}
    elector = LeaderElector(kube_api(httpserver.url_for("/")).api_client, namespace="spark-system", name="spark-autoscaler-operator",
                            identity=identity, timings=FAST, on_started=calls["started"].set, on_stopped=calls["stopped"].set)
    return elector, calls


def test_it_creates_the_lease_leads_renews_and_stops_when_a_renewal_conflicts(httpserver):
    conflict = status(409, "Conflict", 'Operation cannot be fulfilled on leases.coordination.k8s.io "spark-autoscaler-operator"')
    script = Script({
        "GET": [(404, status(404, "NotFound", 'leases.coordination.k8s.io "spark-autoscaler-operator" not found')),
                (200, lease("operator-0")), (200, lease("operator-0"))],
        "POST": [(201, lease("operator-0"))],
        "PUT": [(200, lease("operator-0", "8")), (409, conflict)],
    })
    elector, calls = elect(httpserver, script)
    thread = threading.Thread(target=elector.run, daemon=True)
    started = time.monotonic()
    thread.start()
    assert calls["started"].wait(5)
    thread.join(15)
    assert not thread.is_alive() and calls["stopped"].is_set()  # run() returned after on_stopped: the process exits non-zero
    assert script.seen[:2] == ["GET", "POST"] and "PUT" in script.seen
    assert time.monotonic() - started >= FAST.renew_deadline  # it tried to renew for the whole renew deadline


def test_a_lease_another_replica_holds_is_not_taken_before_it_expires(httpserver):
    script = Script({"GET": [(200, lease("operator-1"))], "POST": [(201, lease("operator-0"))], "PUT": [(200, lease("operator-0"))]})
    elector, calls = elect(httpserver, script)
    thread = threading.Thread(target=elector.run, daemon=True)
    thread.start()
    time.sleep(2.2)
    assert not calls["started"].is_set() and set(script.seen) == {"GET"}  # follower: only reads
    # let it end: the holder vanished, this replica takes the Lease, then loses it
    with script.lock:
        script.answers["GET"] = [(404, status(404, "NotFound", "not found"))]
        script.answers["POST"] = [(201, lease("operator-0")), (409, status(409, "AlreadyExists", "leases \"spark-autoscaler-operator\" already exists"))]
    assert calls["started"].wait(5)
    thread.join(15)
    assert calls["stopped"].is_set()


@pytest.mark.parametrize(
    "timings, problem",
    [
        pytest.param(LeaseTimings(15, 15, 2), "lease_duration (15s) must exceed renew_deadline (15s)", id="lease-not-longer"),
        pytest.param(LeaseTimings(15, 2, 2), "renew_deadline (2s) must exceed 1.2 x retry_period (2s)", id="deadline-too-short"),
        pytest.param(LeaseTimings(15, 10, 0), "retry_period must be at least 1 second, got 0", id="no-retry-period"),
    ],
)
def test_bad_timings_are_named_instead_of_the_clients_sys_exit(timings, problem):
    with pytest.raises(ValueError, match="leader election: .*" + problem.replace("(", r"\(").replace(")", r"\)")):
        LeaderElector(kube_api("http://127.0.0.1:1").api_client, namespace="n", name="l", identity="i", timings=timings,
                      on_started=lambda: None, on_stopped=lambda: None)
