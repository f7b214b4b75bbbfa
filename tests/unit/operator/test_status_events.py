"""The app's status (conditions, phase) and its Events, as functions; the recorder's deduplication."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.operator import events as ev
from autoscaler.operator.config import AppRef
from autoscaler.operator.reconcile import EventRecorder, merge_patch
from autoscaler.operator.status import Observed, condition, phase, rollout, set_condition, status_from
from autoscaler.runtime.clock import FakeClock
from tests.fakekube import FakeKube
from tests.kube import validate

REF = AppRef("analytics", "clicks", "uid-clicks")
CLOCK = FakeClock()
T0 = CLOCK.now()


def test_a_condition_keeps_its_transition_time_until_its_status_flips():
    c = set_condition([], "Ready", "False", "NotReady", "starting", T0, 1)
    later = set_condition(c, "Ready", "False", "NotReady", "still starting", T0 + timedelta(minutes=1), 2)
    assert later[0]["lastTransitionTime"] == c[0]["lastTransitionTime"] and later[0]["message"] == "still starting"
    assert later[0]["observedGeneration"] == 2
    flipped = set_condition(later, "Ready", "True", "Ready", "ticks", T0 + timedelta(minutes=2), 2)
    assert flipped[0]["lastTransitionTime"] != c[0]["lastTransitionTime"] and len(flipped) == 1


def sts(ready=1, replicas=1, current="r1", update="r1", generation=1, observed=1):
    return {"metadata": {"generation": generation}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "readyReplicas": ready, "currentRevision": current, "updateRevision": update}}


@pytest.mark.parametrize(
    "statefulset, complete, why",
    [
        pytest.param(None, False, "the StatefulSet does not exist yet", id="absent"),
        pytest.param(sts(), True, "the pod runs the current template", id="done"),
        pytest.param(sts(update="r2"), False, "rolling out revision r2", id="rolling"),
        pytest.param(sts(ready=0), False, "0 of 1 pod ready", id="not-ready"),
        pytest.param(sts(generation=2), False, "the StatefulSet controller has not seen the new template yet", id="not-observed"),
        pytest.param(sts(ready=0, replicas=0), True, "suspended: no pod", id="suspended"),
    ],
)
def test_rollout(statefulset, complete, why):
    assert rollout(statefulset) == (complete, why)


def pod(phase_="Running", waiting=None):
    statuses = [{"name": "daemon", "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}}}]
    return {"metadata": {"name": "clicks-0", "uid": "pod-1"}, "status": {"phase": phase_, "podIP": "10.0.0.7", "containerStatuses": statuses}}


DAEMON = {"version": "0.1.0", "mode": {"configured": "active", "effective": "active", "reason": "ModeConfigured", "fallback": False, "message": "ok"},
          "executors": {"alive": 3, "requested": 4, "pending": 1, "target": 4, "pods": {"pending": 1, "unschedulable": 0, "message": None}},
          "bounds": {"min": 1, "max": 8}, "queries": [{"name": "q", "status": "running", "params": {"parallelism": 4, "max_rows_per_batch": None,
                                                                                                      "trigger_interval_seconds": 2.0}}],
          "last_decision": {"id": 7, "at": "2026-11-20T10:05:00+00:00", "what": "executors 3 -> 4 (ScaleUpForLoad)", "reason": "ScaleUpForLoad"}}


@pytest.mark.parametrize(
    "obs, expected",
    [
        pytest.param(Observed(1, suspended=True), "Suspended", id="suspended"),
        pytest.param(Observed(1), "Pending", id="no-pod"),
        pytest.param(Observed(1, pod=pod("Pending")), "Pending", id="pod-pending"),
        pytest.param(Observed(1, pod=pod()), "Starting", id="daemon-not-answering-yet"),
        pytest.param(Observed(1, pod=pod(), daemon=DAEMON, daemon_ready=False), "Starting", id="daemon-not-ready"),
        pytest.param(Observed(1, pod=pod(), daemon=DAEMON, daemon_ready=True), "Running", id="running"),
        pytest.param(Observed(1, pod=pod(), unreachable_polls=3), "Degraded", id="unreachable"),
        pytest.param(Observed(1, pod=pod(waiting="CrashLoopBackOff")), "Degraded", id="crash-loop"),
    ],
)
def test_phase(obs, expected):
    assert phase(obs) == expected


def test_a_running_app_is_ready_with_the_daemons_view_and_no_churn():
    obs = Observed(3, statefulset=sts(), pod=pod(), daemon=DAEMON, daemon_ready=True, restart_hash="sha256:x")
    status = status_from({}, obs, T0)
    assert status["phase"] == "Running" and status["observedGeneration"] == 3
    assert condition(status, "Ready")["status"] == "True" and condition(status, "ExecutorsGranted")["status"] == "True"
    assert status["executors"] == {"alive": 3, "requested": 4, "pending": 1, "target": 4, "min": 1, "max": 8, "podsPending": 1, "podsUnschedulable": 0}
    assert status["lastDecision"]["what"] == "executors 3 -> 4 (ScaleUpForLoad)"
    assert status["daemon"] == {"pod": "clicks-0", "podUID": "pod-1", "version": "0.1.0"}
    again = status_from(status, obs, T0 + timedelta(minutes=5))
    assert merge_patch(status, again) == {}  # nothing changed: nothing to write


def test_a_pod_that_cannot_run_or_has_no_node_is_named_with_kubernetes_words():
    # before: an OOMKilled crash loop read "container daemon: CrashLoopBackOff" (the reason was
    # dropped: such a container leaves no message), and a pod with no node only "0 of 1 pod ready"
    oom = pod(waiting="CrashLoopBackOff")
    oom["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    status = status_from({}, Observed(1, statefulset=sts(ready=0), pod=oom), T0)
    assert condition(status, "Ready")["message"] == "container daemon: CrashLoopBackOff: last run ended OOMKilled (exit code 137)"
    assert status["phase"] == "Degraded"

    unscheduled = pod("Pending")
    del unscheduled["status"]["podIP"], unscheduled["status"]["containerStatuses"]
    unscheduled["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/3 nodes are available: 3 Insufficient cpu."}]
    status = status_from({}, Observed(1, statefulset=sts(ready=0), pod=unscheduled), T0)
    assert condition(status, "Ready")["message"] == "the pod cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 Insufficient cpu."
    assert status["phase"] == "Pending"  # a node may still come (a cluster autoscaler)


def test_requests_not_granted_are_a_false_condition_with_the_schedulers_words():
    message = "requested executors were not granted in time; running on those registered (3 executor pods Pending, 3 Unschedulable: 0/5 nodes...)"
    daemon = {**DAEMON, "mode": {"configured": "active", "effective": "active", "reason": "RequestNotGranted", "fallback": True, "message": message}}
    status = status_from({}, Observed(1, statefulset=sts(), pod=pod(), daemon=daemon, daemon_ready=True), T0)
    granted = condition(status, "ExecutorsGranted")
    assert (granted["status"], granted["reason"], granted["message"]) == ("False", "NotGranted", message)
    assert condition(status, "ModeFallback")["status"] == "True"


def test_an_invalid_spec_is_a_false_condition_and_the_app_is_not_ready():
    status = status_from({}, Observed(2, problems=("spec.scaling.maxExecutors: must be >= 1",), statefulset=sts(), pod=pod(), daemon=DAEMON,
                                      daemon_ready=True), T0)
    valid = condition(status, "SpecValid")
    assert valid["status"] == "False" and "spec.scaling.maxExecutors" in valid["message"] and "last valid spec" in valid["message"]
    assert condition(status, "Ready")["message"] == "the spec is invalid" and status["phase"] == "Running"


def test_merge_patch_removes_with_null():
    assert merge_patch({"a": 1, "b": 2}, {"a": 1, "c": 3}) == {"c": 3, "b": None}


# --- events --------------------------------------------------------------------------------------------


def entry(i, what, kind="decision", **details):
    return {"id": i, "at": "2026-11-20T10:00:00+00:00", "last_at": "2026-11-20T10:00:00+00:00", "repeats": 1, "kind": kind, "who": "autoscaler",
            "what": what, "reason": details.pop("reason", "ScaleUpForLoad"), "details": details}


UP = entry(5, "executors 2 -> 4 (ScaleUpForLoad)", decision={"current": 2, "target": 4})
DOWN = entry(6, "executors 4 -> 3 (ScaleDownForLoad)", decision={"current": 4, "target": 3})
HELD = entry(7, "executors held at 3, wanted 2 (ScaleDownDelayed)", decision={"current": 3, "target": 3, "proposed": 2})
RESCALE = entry(8, "query q: partitions 4 -> 8 (PolicyParallelism)", decision={"current": 3, "target": 3}, plan={"query_changes": [{"query": "q"}]})
FAILED = entry(9, "query q: rescale failed (partitions 4 -> 8): boom", kind="event", reason="QueryFailed")
OPERATOR = entry(10, "max_executors 8 -> 20", kind="operator")


@pytest.mark.parametrize(
    "e, reason, type_",
    [(UP, "ScaledUp", "Normal"), (DOWN, "ScaledDown", "Normal"), (HELD, "ScalingHeld", "Normal"), (RESCALE, "QueryRescaled", "Normal"),
     (FAILED, "QueryFailed", "Warning")],
    ids=["up", "down", "held", "rescale", "query-failed"],
)
def test_each_decision_becomes_an_event_in_the_stable_format(e, reason, type_):
    spec = ev.classify_entry(e)
    assert (spec.type, spec.reason, spec.message) == (type_, reason, f"{e['what']} [audit {e['id']}]")


def test_operator_changes_are_not_repeated_as_decision_events():
    assert ev.classify_entry(OPERATOR) is None


def test_events_follow_a_cursor_that_restarts_with_a_new_pod():
    entries = [OPERATOR, FAILED, RESCALE, HELD, DOWN, UP]  # newest first, as the API answers
    events, cursor = ev.decision_events(entries, None, "pod-1")
    assert [e.reason for e in events] == ["ScaledUp", "ScaledDown", "ScalingHeld", "QueryRescaled", "QueryFailed"]
    assert cursor == {"podUID": "pod-1", "decisionId": 10}
    assert ev.decision_events(entries, cursor, "pod-1") == ([], cursor)  # nothing new
    events, cursor = ev.decision_events([UP], cursor, "pod-2")  # a new pod's ids start again
    assert [e.reason for e in events] == ["ScaledUp"] and cursor == {"podUID": "pod-2", "decisionId": 5}


def test_event_names_are_deterministic_valid_and_distinct():
    a = ev.event_name(REF, "ScaledUp", "executors 2 -> 4")
    assert a == ev.event_name(REF, "ScaledUp", "executors 2 -> 4") and a.startswith("clicks.") and len(a) == len("clicks.") + 16
    assert a != ev.event_name(REF, "ScaledUp", "executors 4 -> 6") != ev.event_name(AppRef("analytics", "clicks", "uid-2"), "ScaledUp", "executors 2 -> 4")


def test_the_event_body_is_a_valid_event():
    body = ev.event_body(REF, ev.classify_entry(UP), "clicks.0123456789abcdef", "2026-11-20T10:00:00Z", "operator-0")
    validate(body)
    assert body["involvedObject"]["kind"] == "SparkStreamingApp" and body["count"] == 1


def test_repeats_count_on_one_event_and_are_held_back_within_the_repeat_interval():
    kube, clock = FakeKube(), FakeClock()
    recorder = EventRecorder(kube, clock, timedelta(minutes=30), "operator-0")
    held = ev.classify_entry(HELD)
    assert recorder.emit(REF, held) is True
    clock.advance(60)
    assert recorder.emit(REF, held) is False  # within 30 min: not sent
    assert recorder.emit(REF, held) is False
    [event] = kube.of_kind("Event")
    assert event["count"] == 1
    clock.advance(timedelta(minutes=30))
    assert recorder.emit(REF, held) is True  # the two held back catch up
    [event] = kube.of_kind("Event")
    assert event["count"] == 4 and event["lastTimestamp"] != event["firstTimestamp"]
    recorder.emit(REF, ev.classify_entry(UP))
    assert len(kube.of_kind("Event")) == 2
