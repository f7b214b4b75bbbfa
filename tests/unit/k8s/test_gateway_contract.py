"""The gateway's HTTP calls through the official client, against ``pytest-httpserver`` answering
schema-valid Kubernetes JSON: each request's method, path, query and content type; watches
with bookmarks and 410; retries and what is never retried."""

from __future__ import annotations

import json
import threading

import pytest

from autoscaler.k8s.errors import Conflict, Forbidden, Gone, Invalid, NotFound
from autoscaler.operator.reconcile import EventRecorder
from autoscaler.operator.watch import AppWatch
from autoscaler.runtime.clock import FakeClock
from tests.kube import kube_api, status, validate_meta
from tests.unit.k8s.api_calls import CR, DAEMON_CALLS, NS, OPERATOR_CALLS, app, event
from tests.unit.operator.samples import ref_of, sample


@pytest.mark.parametrize("call", OPERATOR_CALLS + DAEMON_CALLS, ids=lambda c: c.id)
def test_each_call_sends_exactly_its_request(httpserver, call):
    answer = call.answer if isinstance(call.answer, str) else json.dumps(call.answer)
    httpserver.expect_ordered_request(call.path, method=call.method, query_string=call.query or None).respond_with_data(
        answer, status=call.status, content_type="application/json")
    call.invoke(kube_api(httpserver.url_for("/")))
    httpserver.check_assertions()
    [(request, _)] = httpserver.log
    if call.content_type is not None:
        assert request.headers["Content-Type"] == call.content_type
    if call.method == "PATCH" and call.content_type == "application/apply-patch+yaml":
        body = json.loads(request.get_data())
        assert body["kind"] in ("ConfigMap", "Service", "StatefulSet") and body["metadata"]["name"] in request.path  # the whole object, JSON
    assert dict(request.args) == call.query


def watch_lines(*events) -> str:
    return "".join(json.dumps(validate_meta(e, "watchevent")) + "\n" for e in events)


def bookmark(rv: str) -> dict:
    return {"type": "BOOKMARK", "object": {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingApp",
                                           "metadata": {"resourceVersion": rv}}}


def changed(rv: str, kind: str = "MODIFIED") -> dict:
    a = app()
    a["metadata"]["resourceVersion"] = rv
    return {"type": kind, "object": a}


GONE = {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 15 (40)")}


def test_a_watch_follows_bookmarks_resumes_from_the_last_version_and_relists_on_410(httpserver):
    listing = {"apiVersion": "streaming.sparkautoscaler.io/v1alpha1", "kind": "SparkStreamingAppList", "metadata": {"resourceVersion": "15"},
               "items": [app()]}
    watch = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
    httpserver.expect_ordered_request(CR, method="GET", query_string={}).respond_with_json(listing)
    httpserver.expect_ordered_request(CR, method="GET", query_string={**watch, "resourceVersion": "15"}).respond_with_data(
        watch_lines(changed("16"), bookmark("20")))  # then the server ends the watch
    httpserver.expect_ordered_request(CR, method="GET", query_string={**watch, "resourceVersion": "20"}).respond_with_data(watch_lines(GONE))
    httpserver.expect_ordered_request(CR, method="GET", query_string={}).respond_with_json({**listing, "metadata": {"resourceVersion": "41"}})
    seen, listed = [], []
    w = AppWatch(kube_api(httpserver.url_for("/")), NS, on_list=lambda ns, items: listed.append(len(items)),
                 on_event=lambda ns, e: seen.append((e.type, e.resource_version)), stop=threading.Event())
    w.run_once()  # list, then a watch the server ends
    assert (listed, seen, w.resource_version) == ([1], [("MODIFIED", "16")], "20")  # the bookmark moved the version, delivered nothing
    w.run_once()  # 410 in the stream
    assert w.resource_version is None
    w.resource_version = None
    w._list()
    assert listed == [1, 1] and w.resource_version == "41"
    httpserver.check_assertions()


def test_a_watch_refused_with_410_is_gone(httpserver):
    httpserver.expect_request(CR, method="GET").respond_with_json(status(410, "Expired", "too old resource version"), status=410)
    with pytest.raises(Gone):
        list(kube_api(httpserver.url_for("/")).watch_apps(NS, "3", 300))


def test_events_are_created_once_then_counted(httpserver):
    kube = kube_api(httpserver.url_for("/"))
    recorder = EventRecorder(kube, FakeClock(), repeat_interval=__import__("datetime").timedelta(0), instance="operator-0")
    ref = ref_of(sample())
    from autoscaler.operator.events import EventSpec, event_name

    name = event_name(ref, "ScaledUp", "executors 2 -> 4")
    path = f"/api/v1/namespaces/{NS}/events/{name}"
    httpserver.expect_ordered_request(path, method="GET").respond_with_json(status(404, "NotFound", f'events "{name}" not found'), status=404)
    httpserver.expect_ordered_request(f"/api/v1/namespaces/{NS}/events", method="POST").respond_with_json(event(), status=201)
    httpserver.expect_ordered_request(path, method="GET").respond_with_json(event(3))
    httpserver.expect_ordered_request(path, method="PATCH").respond_with_json(event(4))
    spec = EventSpec("Normal", "ScaledUp", "executors 2 -> 4 (ScaleUpForLoad) [audit 7]", "executors 2 -> 4")
    recorder.emit(ref, spec)
    recorder.emit(ref, spec)
    httpserver.check_assertions()
    created = json.loads(httpserver.log[1][0].get_data())
    assert created["metadata"]["name"] == name and created["count"] == 1 and created["involvedObject"]["uid"] == "uid-clicks"
    patch = json.loads(httpserver.log[3][0].get_data())
    assert patch["count"] == 4 and httpserver.log[3][0].headers["Content-Type"] == "application/merge-patch+json"


def test_throttling_is_retried_after_the_servers_retry_after_and_errors_with_back_off(httpserver):
    path = f"/api/v1/namespaces/{NS}/pods/clicks-0"
    httpserver.expect_ordered_request(path).respond_with_json(status(429, "TooManyRequests", "the server has received too many requests"), status=429,
                                                              headers={"Retry-After": "1"})
    httpserver.expect_ordered_request(path).respond_with_json(status(500, "InternalError", "etcdserver: request timed out"), status=500)
    httpserver.expect_ordered_request(path).respond_with_json(next(c for c in OPERATOR_CALLS if c.id == "get-pod").answer)
    sleeps, calls = [], []
    assert kube_api(httpserver.url_for("/"), sleeps, calls).get_pod(NS, "clicks-0")["metadata"]["name"] == "clicks-0"
    httpserver.check_assertions()
    assert sleeps[0] == 1.0 and 0.5 <= sleeps[1] <= 1.5  # Retry-After, then the back-off's first step (0.5 s + jitter)
    assert calls == [("get", "pods", 429), ("get", "pods", 500), ("get", "pods", 200)]


@pytest.mark.parametrize(
    "code, reason, error",
    [(403, "Forbidden", Forbidden), (422, "Invalid", Invalid), (409, "Conflict", Conflict), (404, "NotFound", NotFound)],
    ids=["forbidden", "invalid", "conflict", "not-found"],
)
def test_what_resending_cannot_fix_is_raised_at_once(httpserver, code, reason, error):
    path = f"/apis/apps/v1/namespaces/{NS}/statefulsets/clicks"
    httpserver.expect_request(path, method="PATCH").respond_with_json(status(code, reason, f"statefulsets.apps \"clicks\": {reason.lower()}"), status=code)
    from tests.unit.k8s.api_calls import children

    sleeps = []
    with pytest.raises(error) as info:
        kube_api(httpserver.url_for("/"), sleeps).apply(children()["StatefulSet"])
    assert len(httpserver.log) == 1 and sleeps == []
    assert f"apply statefulsets/clicks in {NS}: {code} {reason}" in str(info.value)


def test_no_answer_is_retried_then_raised(httpserver):
    url = httpserver.url_for("/")
    httpserver.stop()
    sleeps = []
    from autoscaler.k8s.errors import KubeError

    with pytest.raises(KubeError, match="no answer"):
        kube_api(url, sleeps).get_pod(NS, "clicks-0")
    assert len(sleeps) == 4  # five attempts
    httpserver.start()


def test_the_v37_client_sends_post_and_put_without_a_content_type_and_patch_with_ours(httpserver):
    """Pinned: the API server reads a body without Content-Type as JSON (its first media type);
    a PATCH without one would be refused (415), so the gateway always names its patch type."""
    kube = kube_api(httpserver.url_for("/"))
    for call in DAEMON_CALLS[1:3] + OPERATOR_CALLS[2:3]:
        httpserver.expect_ordered_request(call.path, method=call.method).respond_with_json(call.answer, status=call.status)
        call.invoke(kube)
    methods = {r.method: r.headers.get("Content-Type") for r, _ in httpserver.log}
    assert methods == {"POST": None, "PUT": None, "PATCH": "application/merge-patch+json"}
