"""Why requested executors wait on Kubernetes: the pod summary as a pure function, the listing
through the gateway's HTTP call, and the explanation reaching the reason, the status API and
the metrics."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from prometheus_client import generate_latest

from autoscaler.app.compose import assemble, configure, new_metrics
from autoscaler.core.model import ExecutorPods, Reason
from autoscaler.k8s.pods import ExecutorPodLister, executor_selector, summarize_executor_pods
from autoscaler.ops.api import create_app
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.server import HttpServer
from autoscaler.runtime.clock import FakeClock
from autoscaler.runtime.observe import WithExecutorPods
from tests.fakes import FakeCluster, LoadFeeder, query_view
from tests.kube import executor_pod, kube_api, pod_list

NO_CPU = "0/5 nodes are available: 5 Insufficient cpu. preemption: 0/5 nodes are available: 5 No preemption victims found."
NO_MEM = "0/5 nodes are available: 5 Insufficient memory."


@pytest.mark.parametrize(
    "pods, expected",
    [
        pytest.param([], ExecutorPods(0, 0, None), id="no-pods"),
        pytest.param([executor_pod("e-1", "Running"), executor_pod("e-2", "Running")], ExecutorPods(0, 0, None), id="all-running"),
        pytest.param([executor_pod("e-1", "Pending")], ExecutorPods(1, 0, None), id="pending-being-scheduled"),
        pytest.param(
            [executor_pod("e-1", "Running"), executor_pod("e-2", "Pending", unschedulable=NO_CPU), executor_pod("e-3", "Pending", unschedulable=NO_CPU)],
            ExecutorPods(2, 2, NO_CPU),
            id="two-unschedulable",
        ),
        pytest.param(
            [executor_pod("e-2", "Pending", unschedulable=NO_CPU, at="2026-11-20T10:01:00Z"),
             executor_pod("e-3", "Pending", unschedulable=NO_MEM, at="2026-11-20T10:02:00Z")],
            ExecutorPods(2, 2, NO_MEM),
            id="the-newest-message",
        ),
        pytest.param([executor_pod("e-1", "Pending", unschedulable=NO_CPU, deleting=True)], ExecutorPods(0, 0, None), id="being-deleted-is-not-wanted"),
        pytest.param([executor_pod("e-1", "Failed"), executor_pod("e-2", "Succeeded")], ExecutorPods(0, 0, None), id="finished-pods"),
    ],
)
def test_pending_and_unschedulable_pods_are_counted_with_the_schedulers_message(pods, expected):
    assert summarize_executor_pods(pods) == expected


def test_the_summary_reads_like_a_sentence():
    assert ExecutorPods(3, 3, NO_MEM).describe() == f"3 executor pods Pending, 3 Unschedulable: {NO_MEM}"
    assert ExecutorPods(1, 0, None).describe() == "1 executor pod Pending"


def test_the_lister_asks_for_this_applications_executor_pods_from_the_watch_cache(httpserver):
    httpserver.expect_ordered_request(
        "/api/v1/namespaces/analytics/pods",
        method="GET",
        query_string={"labelSelector": "spark-app-selector=spark-app-1,spark-role=executor", "resourceVersion": "0"},
    ).respond_with_json(pod_list([executor_pod("e-1", "Running"), executor_pod("e-2", "Pending", unschedulable=NO_CPU)]))
    lister = ExecutorPodLister(kube_api(httpserver.url_for("/")), "analytics", "spark-app-1")
    assert lister.executor_pods(FakeClock().now()) == ExecutorPods(1, 1, NO_CPU)
    httpserver.check_assertions()
    assert executor_selector("spark-app-1") == "spark-app-selector=spark-app-1,spark-role=executor"


class ListedPods:
    """The pods an API server would list: what the tests set (real-shaped Pod JSON)."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.fail: Exception | None = None

    def list_pods(self, namespace: str, label_selector: str) -> list[dict]:
        if self.fail is not None:
            raise self.fail
        return self.items


def test_a_request_kubernetes_cannot_place_is_not_granted_after_the_timeout_and_explained_everywhere():
    settings = configure(None, {"executors.min": 1, "executors.max": 4, "policy.name": "target-utilization", "mode": "active",
                                "request_timeout": "30s", "window.metrics_window": "30s"}, environ={})
    clock = FakeClock()
    cluster = FakeCluster(clock.now(), executors=1, grant=False)  # Spark on Kubernetes accepts, the pods stay Pending
    cluster.add_query(query_view("q", parallelism=8, max_parallelism=8))
    feeder = LoadFeeder(cluster, "q", clock.now())
    pods = ListedPods()
    metrics = new_metrics(settings, "clicks")
    daemon = assemble(settings, observer=WithExecutorPods(cluster, ExecutorPodLister(pods, "analytics", "app")), executors=cluster,
                      queries=cluster, clock=clock, metrics=metrics)
    pods.items = [executor_pod("e-1", "Running")]
    records = []
    for _ in range(6):
        clock.advance(timedelta(seconds=5))
        feeder.run_until(clock.now(), 2500)
        records.append(daemon.reconciler.tick())
    assert records[-1].executors_requested and records[-1].executors_requested > 1  # asked for more
    pods.items = [executor_pod("e-1", "Running"), *(executor_pod(f"e-{i}", "Pending", unschedulable=NO_CPU) for i in (2, 3, 4))]
    for _ in range(8):  # past request_timeout (30 s) with nothing registered
        clock.advance(timedelta(seconds=5))
        feeder.run_until(clock.now(), 2500)
        record = daemon.reconciler.tick()
    assert record.mode.reason == Reason.REQUEST_NOT_GRANTED and record.mode.fallback
    assert record.mode.message == (
        f"requested executors were not granted in time; running on those registered (3 executor pods Pending, 3 Unschedulable: {NO_CPU})"
    )
    exposed = generate_latest(metrics.registry).decode()
    assert 'spark_autoscaler_executor_pods_pending{application="clicks"} 3.0' in exposed
    assert 'spark_autoscaler_executor_pods_unschedulable{application="clicks"} 3.0' in exposed

    app = create_app(reconciler=daemon.reconciler, registry=metrics.registry, auth=ApiAuth.disabled(), clock=clock)
    with HttpServer(app, "127.0.0.1", 0) as server:
        body = httpx.get(f"{server.url}/api/v1/status").json()
    assert body["executors"]["pods"] == {"pending": 3, "unschedulable": 3, "message": NO_CPU}
    assert body["mode"]["reason"] == "RequestNotGranted" and "3 Unschedulable" in body["mode"]["message"]

    pods.fail = OSError("connection refused")  # the explanation fails: scaling goes on, the pods are unknown
    clock.advance(timedelta(seconds=5))
    record = daemon.reconciler.tick()
    assert record.executor_pods is None and record.mode.message.endswith("running on those registered")
    assert "spark_autoscaler_executor_pods_pending{" not in generate_latest(metrics.registry).decode()


def test_elsewhere_the_pod_gauges_are_absent_and_the_status_says_null():
    settings = configure(None, {}, environ={})
    clock = FakeClock()
    cluster = FakeCluster(clock.now(), executors=1)
    metrics = new_metrics(settings, "x")
    daemon = assemble(settings, observer=cluster, executors=cluster, queries=cluster, clock=clock, metrics=metrics)
    clock.advance(timedelta(seconds=5))
    assert daemon.reconciler.tick().executor_pods is None
    assert "executor_pods_pending{" not in generate_latest(metrics.registry).decode()
