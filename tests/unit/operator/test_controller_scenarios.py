"""The operator across passes: an in-memory fake of our gateway for Kubernetes, the real daemon
REST app (over the fake Spark cluster) for the daemon."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.core.model import QueryParams
from autoscaler.k8s.errors import Conflict, Invalid
from autoscaler.operator.watch import AppWatch
from autoscaler.ops.auth import ApiAuth
from autoscaler.runtime.net import free_port
from tests.harness import TOKEN, build, serve
from tests.unit.operator.samples import sample
from tests.unit.operator.scenario import OPERATOR, world

SCALING = {"mode": "active", "minExecutors": 1, "maxExecutors": 4, "policy": {"name": "target-utilization"}}


def app(**changes):
    """The clicks sample for this daemon (its policy, no query or log level unless given)."""
    obj = sample(**{"scaling": SCALING, "queries": [], **changes})
    if "logLevel" not in changes:
        del obj["spec"]["logLevel"]
    return obj


@pytest.fixture
def daemon():
    d = build()
    for served in serve(d, auth=ApiAuth({TOKEN: OPERATOR})):
        d.tick(400)  # ticked once: ready
        yield served


@pytest.fixture
def w(daemon, tmp_path):
    w = world(daemon.server.url, tmp_path)
    w.kube.put_app(app())
    return w


def nobody_listening() -> str:
    """The URL of a port on loopback no one listens on."""
    return f"http://127.0.0.1:{free_port()}"


def control(daemon):
    return daemon.client.get("/api/v1/control").json()["overrides"]


def operator_entries(daemon):
    return [e for e in daemon.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] if e["who"] == OPERATOR]


def test_a_new_app_gets_its_children_then_a_ready_daemon_takes_the_specs_control(w, daemon):
    w.sync()
    assert [o["kind"] for o in w.kube.of_kind("ConfigMap") + w.kube.of_kind("Service") + w.kube.of_kind("StatefulSet")] == [
        "ConfigMap", "ConfigMap", "Service", "StatefulSet"]
    assert w.status()["phase"] == "Pending" and w.condition("Ready")["status"] == "False"
    w.run_pod()
    w.sync()
    assert w.status()["phase"] == "Running"
    assert w.condition("Ready")["status"] == "True" and w.condition("DaemonReachable")["status"] == "True"
    assert control(daemon)["max_executors"] == 4 and control(daemon)["mode"] == "active"
    [entry] = operator_entries(daemon)
    assert entry["details"]["note"] == "SparkStreamingApp analytics/clicks generation 1"
    applied = w.condition("ControlApplied")
    assert applied["reason"] == "Applied" and "scaling.maxExecutors: unset -> 4" in applied["message"] and f"[audit {entry['id']}]" in applied["message"]
    assert [e["reason"] for e in w.events("ControlApplied")] == ["ControlApplied"]
    assert w.status()["control"]["managedFields"] == ["mode", "min_executors", "max_executors"]


def test_a_bound_change_is_taken_live_with_one_call_and_the_pod_is_not_touched(w, daemon):
    w.sync()
    w.run_pod()
    w.sync()
    sts_before = w.kube.get("StatefulSet", "analytics", "clicks")
    w.kube.put_app(app(scaling={**SCALING, "maxExecutors": 6}))
    w.sync()
    assert control(daemon)["max_executors"] == 6
    entries = operator_entries(daemon)
    assert len(entries) == 2 and entries[0]["details"]["note"] == "SparkStreamingApp analytics/clicks generation 2"
    assert entries[0]["details"]["changes"] == {"max_executors": {"from": 4, "to": 6}}
    assert w.kube.get("StatefulSet", "analytics", "clicks") == sts_before  # same template, same resourceVersion: no restart
    assert w.events("RolloutStarted") == []
    w.sync()
    assert len(operator_entries(daemon)) == 2  # in sync: nothing sent again


def test_an_image_change_rolls_the_pod_and_says_which_fields(w, daemon):
    w.sync()
    w.run_pod()
    w.sync()
    before = w.kube.get("StatefulSet", "analytics", "clicks")["spec"]["template"]["metadata"]["annotations"]["spark-autoscaler.io/restart-hash"]
    w.kube.put_app(app(scaling=SCALING, image="registry.example.com/analytics/clicks:1.5.0"))
    w.sync()
    sts = w.kube.get("StatefulSet", "analytics", "clicks")
    assert sts["spec"]["template"]["metadata"]["annotations"]["spark-autoscaler.io/restart-hash"] != before
    [rollout] = w.events("RolloutStarted")
    assert rollout["message"] == "image changed: the driver pod restarts and the queries resume from their checkpoints"
    w.roll_pending()
    w.sync()
    assert w.condition("RolloutComplete")["status"] == "False" and w.condition("Ready")["status"] == "False"


def test_a_change_the_daemon_refuses_is_reported_and_not_retried_at_the_same_generation(w, daemon):
    # the spec cannot tell: it leaves the maximum to the daemon (8 by default, within which 7
    # lies), and this daemon holds 6 (its configuration here; a user's PATCH on a live one)
    unbounded = {k: v for k, v in SCALING.items() if k != "maxExecutors"}
    w.kube.put_app(app(scaling={**unbounded, "manualExecutors": 7}))
    w.sync()
    w.run_pod()
    w.sync()
    rejected = w.condition("ControlApplied")
    assert rejected["status"] == "False" and rejected["reason"] == "Rejected"
    assert rejected["message"].startswith("generation 2: the daemon refused") and rejected["observedGeneration"] == 2
    [event] = w.events("ControlRejected")
    assert event["type"] == "Warning" and "manual_executors: 7 is outside the executor bounds [1, 6]" in event["message"], event["message"]
    calls = len(operator_entries(daemon))
    w.clock.advance(timedelta(hours=1))
    w.sync()
    w.sync()
    assert len(operator_entries(daemon)) == calls == 0 and len(w.events("ControlRejected")) == 1
    assert w.condition("ControlApplied")["status"] == "False"
    # a new generation asks afresh; the refusals of the old one are not kept for the app's life
    assert [g for g, _ in w.reconciler.memory["analytics/clicks"].rejected] == [2]
    w.kube.put_app(app(scaling={**unbounded, "manualExecutors": 3}))
    w.sync()
    assert w.condition("ControlApplied")["status"] == "True" and w.reconciler.memory["analytics/clicks"].rejected == {}


def test_an_invalid_spec_is_reported_and_the_app_keeps_its_last_good_spec(w, daemon):
    w.sync()
    w.run_pod()
    w.sync()
    sts = w.kube.get("StatefulSet", "analytics", "clicks")
    config = w.kube.get("ConfigMap", "analytics", "clicks-config")
    w.kube.put_app(app(scaling=SCALING, image="registry.example.com/analytics/clicks:2.0", settings={"normalize": {"dead_band": 3}}))
    w.sync()
    valid = w.condition("SpecValid")
    assert valid["status"] == "False" and "spec.settings.normalize.dead_band" in valid["message"]
    [event] = w.events("SpecInvalid")
    assert event["type"] == "Warning" and event["message"].startswith("generation 2: spec.settings.normalize.dead_band")
    assert w.kube.get("StatefulSet", "analytics", "clicks") == sts and w.kube.get("ConfigMap", "analytics", "clicks-config") == config
    daemon.client.patch("/api/v1/control", json={"max_executors": 6}, headers=daemon.auth_header)  # someone changes a managed field
    w.sync()
    assert control(daemon)["max_executors"] == 4  # the last good spec is still enforced
    assert w.status()["lastAppliedSpec"]["image"] == "registry.example.com/analytics/clicks:1.4.2"


def test_a_child_the_api_server_refuses_is_reported_and_the_spec_not_taken_as_applied(w, daemon):
    # the model let through what the API server refuses: the pass raised on every try, with only
    # a log line, a RolloutStarted for a rollout that never came, and the status still valid
    w.sync()
    w.run_pod()
    w.sync()
    w.kube.fail[("apply", "StatefulSet")] = [Invalid("patch statefulsets/clicks", 422, "Invalid", "spec.template.metadata.labels: Invalid value")]
    config = w.kube.get("ConfigMap", "analytics", "clicks-config")
    w.kube.put_app(app(scaling={**SCALING, "maxExecutors": 3}, image="registry.example.com/analytics/clicks:2.0",
                       settings={"normalize": {"dead_band": 0.2}}))
    w.sync()  # no exception
    # all or nothing: the daemon's configuration of the refused generation was not written either
    # (it was, before the children went as a dry run first, under the pod of the generation before)
    assert w.kube.get("ConfigMap", "analytics", "clicks-config") == config
    valid = w.condition("SpecValid")
    assert valid["status"] == "False" and "the API server refused StatefulSet clicks: spec.template.metadata.labels" in valid["message"]
    [event] = w.events("ApplyRefused")
    assert event["type"] == "Warning" and event["message"].startswith("generation 2: the API server refused StatefulSet clicks")
    assert w.events("RolloutStarted") == []
    assert w.status()["lastAppliedSpec"]["image"] == "registry.example.com/analytics/clicks:1.4.2"
    assert control(daemon)["max_executors"] == 4  # the refused generation's live changes are not sent
    w.sync()  # the API server takes it now: applied, rolled and valid again
    assert w.condition("SpecValid")["status"] == "True" and len(w.events("RolloutStarted")) == 1
    assert w.status()["lastAppliedSpec"]["image"] == "registry.example.com/analytics/clicks:2.0"


@pytest.mark.parametrize(
    "settings, name, problem",
    [
        # was a TypeError on every pass, retried for ever, the status still valid
        pytest.param({"pipelines": 5}, "clicks", "spec.settings: pipelines: must be a mapping of pipeline settings, got 5", id="pipelines-not-a-mapping"),
        # names the children cannot take: a Service is a DNS-1035 label, the revision label 63 characters
        pytest.param({}, "clicks.v2", "metadata.name: 'clicks.v2' cannot name the app's Service and StatefulSet", id="dotted-name"),
        pytest.param({}, "c" * 53, "at most 52 characters", id="long-name"),
    ],
)
def test_a_spec_the_operator_cannot_build_children_from_is_invalid_by_name(w, settings, name, problem):
    obj = app(settings=settings)
    obj["metadata"]["name"] = name
    w.kube.put_app(obj)
    w.sync(name)  # no exception
    valid = w.condition("SpecValid", name=name)
    assert valid["status"] == "False" and problem in valid["message"]
    assert w.kube.get("StatefulSet", "analytics", name) is None


def test_a_pod_whose_daemon_has_not_started_is_not_polled_nor_called_unreachable(tmp_path):
    # the pod has its address before the image is pulled and the init check has run: polled from
    # then on, a normal start raised DaemonUnreachable and Degraded within seconds
    w = world(nobody_listening(), tmp_path)  # nobody listens, as before the daemon starts
    w.kube.put_app(app())
    w.sync()
    pod = w.run_pod()
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "PodInitializing"}}
    w.kube.objects[("Pod", "analytics", "clicks-0")] = pod
    for _ in range(5):
        w.sync()
    assert w.events("DaemonUnreachable") == [] and w.status()["phase"] != "Degraded"
    assert (w.condition("DaemonReachable") or {}).get("status") != "False"
    w.run_pod()  # the daemon container runs, and nothing answers: now that is reported
    for _ in range(4):
        w.sync()
    assert len(w.events("DaemonUnreachable")) == 1


def assert_polls_back_off(w) -> None:
    """A new app's pod runs; the next four passes poll its daemon 2, 4, 8 and 16 s apart."""
    w.kube.put_app(app())
    w.sync()
    w.run_pod()
    waits = [w.sync().requeue_after for _ in range(4)]
    assert waits == [timedelta(seconds=2), timedelta(seconds=4), timedelta(seconds=8), timedelta(seconds=16)]


def test_a_daemon_that_takes_no_change_is_reported_backed_off_and_still_mirrored(tmp_path):
    # the daemon's tokens do not hold the operator's (a Secret that differs): every write was a
    # 401, shown as "Starting, the daemon does not answer", polled every 5 s, no Event
    d = build()
    for served in serve(d, auth=ApiAuth({"someone-elses-token-123456": OPERATOR})):
        d.tick(400)
        w = world(served.server.url, tmp_path)
        assert_polls_back_off(w)
        applied = w.condition("ControlApplied")
        assert applied["status"] == "False" and applied["reason"] == "Refused" and ": 401: " in applied["message"], applied
        [event] = w.events("DaemonRefusesChanges")
        assert event["type"] == "Warning" and "took none of the operator's changes" in event["message"]
        assert w.condition("DaemonReachable")["status"] == "True" and w.status()["mode"]  # its status is still mirrored


def test_an_unreachable_daemon_backs_off_and_is_reported_after_three_polls(tmp_path):
    w = world(nobody_listening(), tmp_path)  # a port nobody listens on
    assert_polls_back_off(w)
    reachable = w.condition("DaemonReachable")
    assert reachable["status"] == "False" and reachable["message"].startswith("4 polls failed in a row")
    assert w.status()["phase"] == "Degraded"
    [event] = w.events("DaemonUnreachable")
    assert event["type"] == "Warning" and event["message"].startswith("3 polls failed in a row")


def test_decisions_become_events_once(w, daemon):
    w.sync()
    w.run_pod()
    w.sync()
    daemon.run_for(60, rate=2500)  # load: the daemon scales up
    w.sync()
    ups = w.events("ScaledUp")
    assert ups and all(e["message"].startswith("executors ") and "[audit " in e["message"] for e in ups)
    count = sum(e["count"] for e in w.events())
    w.sync()
    assert sum(e["count"] for e in w.events()) == count  # the cursor holds: nothing repeated


def test_query_settings_and_the_log_level_go_to_the_daemon(w, daemon):
    w.kube.put_app(app(scaling=SCALING, queries=[{"name": "q", "maxRowsPerBatch": 500, "triggerInterval": "4s"}, {"name": "later"}],
                          logLevel="DEBUG"))
    w.sync()
    w.run_pod()
    w.sync()
    pending = daemon.client.get("/api/v1/queries/q").json()["pending_request"]
    assert pending["max_rows_per_batch"] == 500 and pending["trigger_interval_seconds"] == 4.0
    assert any("DEBUG" in e["what"] for e in operator_entries(daemon))  # the log level, set by the operator
    assert w.status()["control"]["logLevel"] == {"podUID": "pod-1", "level": "DEBUG"}
    assert w.status()["missingQueries"] == ["later"]
    calls = len(operator_entries(daemon))
    w.sync()
    assert len(operator_entries(daemon)) == calls  # requested already, level set for this pod


def test_query_settings_the_spec_gives_up_go_back_to_what_the_pipeline_declares(w, daemon):
    # before: the daemon kept the rate limit and trigger last sent, the spec's no longer set anywhere
    cluster = daemon.cluster
    cluster.queries["q"] = replace(cluster.queries["q"], declared=QueryParams(parallelism=8, trigger_interval=timedelta(seconds=2)))
    w.kube.put_app(app(scaling=SCALING, queries=[{"name": "q", "maxRowsPerBatch": 500, "triggerInterval": "4s"}]))
    w.sync()
    w.run_pod()
    w.sync()
    assert w.status()["control"]["managedQueryFields"] == {"q": ["max_rows_per_batch", "trigger_interval_seconds"]}
    daemon.run_for(10)  # the daemon restarts the query with them
    assert (cluster.queries["q"].params.max_rows_per_batch, cluster.queries["q"].params.trigger_interval) == (500, timedelta(seconds=4))

    w.kube.put_app(app(scaling=SCALING, queries=[{"name": "q", "triggerInterval": "4s"}]))  # the rate limit given up
    w.sync()
    assert daemon.client.get("/api/v1/queries/q").json()["pending_request"]["max_rows_per_batch"] is None
    assert w.status()["control"]["managedQueryFields"] == {"q": ["trigger_interval_seconds"]}
    w.kube.put_app(app(scaling=SCALING))  # and the trigger: the query left out of the spec
    w.sync()
    daemon.run_for(10)
    assert (cluster.queries["q"].params.max_rows_per_batch, cluster.queries["q"].params.trigger_interval) == (None, timedelta(seconds=2))
    assert w.status()["control"]["managedQueryFields"] == {}
    requested = [e["what"] for e in operator_entries(daemon) if e["what"].startswith("query")]
    assert len(requested) == 3, requested

    # given back once: a change made through the REST API afterwards stays (the spec no longer sets the field)
    daemon.client.patch("/api/v1/queries/q", json={"max_rows_per_batch": 900}, headers=daemon.auth_header)
    w.sync()
    assert daemon.client.get("/api/v1/queries/q").json()["pending_request"]["max_rows_per_batch"] == 900


def test_a_query_setting_the_daemon_refuses_is_a_false_condition_until_the_spec_changes(w, daemon):
    # before: only a Warning Event said so; ControlApplied stayed True ("the daemon holds what the spec sets")
    cluster = daemon.cluster
    cluster.queries["q"] = replace(cluster.queries["q"], rescalable=False)  # attached: the daemon cannot restart it
    daemon.tick(400)  # the daemon sees it so
    w.kube.put_app(app(scaling=SCALING, queries=[{"name": "q", "maxRowsPerBatch": 500}]))
    w.sync()
    w.run_pod()
    w.sync()
    refused = w.condition("ControlApplied")
    assert (refused["status"], refused["reason"]) == ("False", "Rejected")
    assert refused["message"].startswith("generation 2: the daemon refused query q: max_rows_per_batch 500: "), refused["message"]
    w.clock.advance(timedelta(hours=1))
    w.sync()  # not resent at this generation, and still said
    assert w.condition("ControlApplied") == refused and len(w.events("ControlRejected")) == 1

    w.kube.put_app(app(scaling=SCALING))  # the setting withdrawn
    w.sync()
    assert (w.condition("ControlApplied")["status"], w.condition("ControlApplied")["reason"]) == ("True", "InSync")


def test_a_log_level_the_spec_gives_up_goes_back_to_the_daemons_own(w, daemon, restore_logging):
    # before: the level stayed DEBUG for as long as the pod lived once the spec had set it
    w.kube.put_app(app(scaling=SCALING, logLevel="DEBUG"))
    w.sync()
    w.run_pod()
    w.sync()
    assert logging.getLogger().level == logging.DEBUG
    w.kube.put_app(app(scaling=SCALING))
    w.sync()
    assert logging.getLogger().level == logging.INFO
    assert "log_level.root: DEBUG -> INFO" in [e["what"] for e in operator_entries(daemon)]
    assert w.status()["control"].get("logLevel") is None
    calls = len(operator_entries(daemon))
    w.sync()
    assert len(operator_entries(daemon)) == calls  # sent once


def test_suspend_scales_the_statefulset_to_zero(w, daemon):
    w.kube.put_app(app(scaling=SCALING, suspend=True))
    w.sync()
    assert w.kube.get("StatefulSet", "analytics", "clicks")["spec"]["replicas"] == 0
    assert w.status()["phase"] == "Suspended" and w.condition("Ready")["reason"] == "Suspended"


def test_a_410_relists_and_a_second_pass_changes_nothing(w, daemon):
    watch = AppWatch(w.kube, "analytics", on_list=w.controller.on_list, on_event=w.controller.on_event, stop=threading.Event())
    watch.run_once()
    w.drain()
    w.run_pod()
    w.controller.process("analytics/clicks")
    w.controller.process("analytics/clicks")  # the daemon's status now shows what the first pass sent
    snapshot = {k: v for k, v in w.kube.objects.items() if k[0] != "SparkStreamingApp"}
    status = w.status()
    w.kube.expire()
    watch.run_once()  # 410 Gone: back to a list
    assert watch.lists == 1 and watch.resource_version is None
    watch.run_once()
    assert watch.lists == 2
    assert w.drain() == 1
    assert {k: v for k, v in w.kube.objects.items() if k[0] != "SparkStreamingApp"} == snapshot  # no new writes, no new events
    assert w.status() == status


def test_status_writes_do_not_queue_another_pass(w, daemon):
    watch = AppWatch(w.kube, "analytics", on_list=w.controller.on_list, on_event=w.controller.on_event, stop=threading.Event())
    watch.run_once()
    assert w.controller.queue.due() == ["analytics/clicks"]
    key = w.controller.queue.get(timeout=0)
    w.controller.process(key)
    w.controller.queue.done(key)
    watch.run_once()  # the status write comes back as MODIFIED, same generation
    assert w.controller.queue.due() == []
    w.kube.put_app(app(scaling={**SCALING, "maxExecutors": 3}))  # a spec change: generation 2
    watch.run_once()
    assert w.controller.queue.due() == ["analytics/clicks"]


def test_deleting_the_app_deletes_nothing_the_garbage_collector_does(w, daemon):
    watch = AppWatch(w.kube, "analytics", on_list=w.controller.on_list, on_event=w.controller.on_event, stop=threading.Event())
    watch.run_once()
    w.drain()
    children = {k for k in w.kube.objects if k[0] != "SparkStreamingApp"}
    w.kube.delete_app("analytics", "clicks")
    watch.run_once()
    assert "analytics/clicks" not in w.controller.cache and w.controller.queue.due() == []
    assert {k for k in w.kube.objects if k[0] != "SparkStreamingApp"} == children  # owner references: the API server's GC deletes them
    assert not any(verb == "delete" for verb, _, _ in w.kube.calls)


def test_a_failing_pass_is_retried_with_backoff_and_does_not_stop_others(w, daemon):
    w.kube.put_app({**app(), "metadata": {**app()["metadata"], "name": "other", "uid": "uid-other"}})
    w.kube.fail[("apply", "ConfigMap")] = [Conflict("apply configmaps/clicks-config", 409, "Conflict", "boom")]
    w.controller.on_list("analytics", w.kube.list_apps("analytics").items)
    for key in w.controller.queue.due():
        key = w.controller.queue.get(timeout=0)
        w.controller.process(key)
        w.controller.queue.done(key)
    assert w.kube.get("StatefulSet", "analytics", "other") is not None  # the other app went on
    assert w.kube.get("StatefulSet", "analytics", "clicks") is None
    assert w.controller._failures == {"analytics/clicks": 1}


def test_the_controllers_threads_stop_when_leadership_is_lost(w, daemon):
    w.controller.start()
    try:
        assert w.controller.running
    finally:
        w.controller.stop()
    assert not w.controller.running and not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("operator-"))
