"""The Spark adapter's executor bookkeeping, at its py4j boundary.

A driver whose cluster manager refuses requests cannot be had on demand from a real cluster in
a unit test (tests/integration/test_faults.py stops a real standalone master for that); here a
stand-in for the py4j handles answers ``requestTotalExecutors`` with False, as Spark does then.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from autoscaler.core.model import Mode
from autoscaler.core.plan import executor_position
from autoscaler.spark.executors import SparkExecutors

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class _Ids:
    def __init__(self, ids):
        self.ids = ids

    def size(self):
        return len(self.ids)

    def apply(self, i):
        return self.ids[i]


class _Driver:
    """``SparkContext._jsc.sc()`` of a driver with ``ids`` registered whose master answers ``grant``."""

    def __init__(self, ids, grant):
        self.ids, self.grant, self.requests = list(ids), grant, []

    def getExecutorIds(self):
        return _Ids(self.ids)

    def requestTotalExecutors(self, total, locality, hosts):
        self.requests.append(total)
        return self.grant


def spark_with(driver: _Driver) -> SimpleNamespace:
    utils = SimpleNamespace(toScalaMap=lambda m: m, toSeq=lambda s: s)
    jvm = SimpleNamespace(org=SimpleNamespace(apache=SimpleNamespace(spark=SimpleNamespace(api=SimpleNamespace(python=SimpleNamespace(PythonUtils=utils))))),
                          java=SimpleNamespace(util=SimpleNamespace(HashMap=dict)))
    conf = SimpleNamespace(getAll=lambda: [("spark.executor.cores", "1")])
    sc = SimpleNamespace(_jsc=SimpleNamespace(sc=lambda: driver), _jvm=jvm, getConf=lambda: conf, master="spark://127.0.0.1:7077",
                         uiWebUrl=None, applicationId="app-1")
    return SimpleNamespace(sparkContext=sc)


def test_a_refused_request_counts_as_not_granted_and_starts_the_fallback_clock():
    driver = _Driver(["0"], grant=False)
    executors = SparkExecutors(spark_with(driver))
    executors.observe(T0)
    assert executors.set_target(4, T0) is False and driver.requests == [4]
    view = executors.observe(T0 + timedelta(seconds=10))
    assert view.requested_total == 4 and view.pending_executors == 3 and view.waiting_since == T0
    executors.set_target(4, T0 + timedelta(seconds=30))  # re-asserted every tick: the clock keeps its start
    view = executors.observe(T0 + timedelta(seconds=61))
    assert view.waiting_since == T0
    assert executor_position(view, T0 + timedelta(seconds=61), timedelta(seconds=60), Mode.ACTIVE).not_granted


def test_a_granted_request_that_arrives_stops_the_clock():
    driver = _Driver(["0"], grant=True)
    executors = SparkExecutors(spark_with(driver))
    executors.observe(T0)
    assert executors.set_target(2, T0)
    driver.ids.append("1")
    view = executors.observe(T0 + timedelta(seconds=5))
    assert view.requested_total == 2 and view.waiting_since is None and view.pending_executors == 0


class _Unreachable(_Driver):
    def requestTotalExecutors(self, total, locality, hosts):
        self.requests.append(total)
        raise RuntimeError("An error occurred while calling o36.requestTotalExecutors.\n: org.apache.spark.SparkException: ...")


def test_a_request_the_cluster_manager_cannot_take_is_an_error_that_also_starts_the_fallback_clock():
    import pytest

    from autoscaler.spark.executors import ExecutorRequestError

    driver = _Unreachable(["0"], grant=False)
    executors = SparkExecutors(spark_with(driver))
    executors.observe(T0)
    with pytest.raises(ExecutorRequestError, match=r"did not take the request for 3 executor\(s\): RuntimeError: An error occurred while calling"):
        executors.set_target(3, T0)
    view = executors.observe(T0 + timedelta(seconds=5))
    assert view.requested_total == 3 and view.waiting_since == T0  # a request not granted, timed as such


def test_only_local_masters_run_their_tasks_in_the_driver():
    from autoscaler.spark.executors import driver_runs_tasks

    assert [m for m in ("local", "local[1]", "local[*]", "local[4, 2]", " local[2]") if not driver_runs_tasks(m)] == []
    assert [m for m in ("local-cluster[2,1,512]", "spark://127.0.0.1:7077", "k8s://https://api:6443", "yarn") if driver_runs_tasks(m)] == []


def test_the_rest_api_failing_once_is_covered_quietly_and_failing_on_is_said_once(httpserver):
    """A driver too busy to answer its UI's REST API in time (seen once a run on a loaded 2-core
    machine) is covered by the context's executor ids without a warning; one that keeps
    failing (a broken UI, an HTML page from a proxy) is warned about once, and again only after
    it has answered in between."""
    import structlog

    url = "/api/v1/applications/app-1/executors"
    driver = _Driver(["0", "1"], grant=True)
    spark = spark_with(driver)
    spark.sparkContext.uiWebUrl = httpserver.url_for("").rstrip("/")
    executors = SparkExecutors(spark)
    answers = ["html", 500, 500, "json", 500, 500, 500, 500]
    for answer in answers:
        if answer == "json":
            httpserver.expect_oneshot_request(url).respond_with_json([{"id": "driver"}, {"id": "0", "totalCores": 1}, {"id": "1", "totalCores": 1}])
        elif answer == "html":
            httpserver.expect_oneshot_request(url).respond_with_data("<html>proxy</html>", content_type="text/html")
        else:
            httpserver.expect_oneshot_request(url).respond_with_data("busy", status=500)
    with structlog.testing.capture_logs() as logs:
        seen = [tuple(e.id for e in executors.observe(T0).alive) for _ in answers]
    assert seen == [("0", "1")] * len(answers)  # the context's ids stood in each time
    failures = [(e["log_level"], e["failures_in_a_row"]) for e in logs if e["event"] == "executor_rest_failed"]
    assert failures == [("debug", 1), ("debug", 2), ("warning", 3), ("debug", 1), ("debug", 2), ("warning", 3), ("debug", 4)]
