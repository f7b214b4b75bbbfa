"""The app's ``.status``: conditions, phase and the daemon's view, as pure functions.

Conditions follow the Kubernetes convention (``type``, ``status``, ``reason``, ``message``,
``lastTransitionTime``, ``observedGeneration``); a condition's transition time moves only
when its status flips. Lag and rate numbers stay out of the status: Prometheus has them, and
writing them would change the resource on every poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

READY, SPEC_VALID, DAEMON_REACHABLE, CONTROL_APPLIED = "Ready", "SpecValid", "DaemonReachable", "ControlApplied"
EXECUTORS_GRANTED, MODE_FALLBACK, ROLLOUT_COMPLETE = "ExecutorsGranted", "ModeFallback", "RolloutComplete"
CONDITIONS = (READY, SPEC_VALID, DAEMON_REACHABLE, CONTROL_APPLIED, EXECUTORS_GRANTED, MODE_FALLBACK, ROLLOUT_COMPLETE)

PENDING, STARTING, RUNNING, DEGRADED, SUSPENDED = "Pending", "Starting", "Running", "Degraded", "Suspended"
MAX_QUERIES = 64
MAX_MESSAGE = 1000


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, now: datetime, generation: int) -> list[dict[str, Any]]:
    """``conditions`` with ``type_`` set; its ``lastTransitionTime`` kept unless the status flips."""
    previous = next((c for c in conditions if c.get("type") == type_), None)
    since = previous["lastTransitionTime"] if previous is not None and previous.get("status") == status and previous.get("lastTransitionTime") else iso(now)
    new = {"type": type_, "status": status, "reason": reason, "message": message[:MAX_MESSAGE], "lastTransitionTime": since,
           "observedGeneration": generation}
    return [new if c.get("type") == type_ else c for c in conditions] if previous is not None else [*conditions, new]


def condition(status: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == type_), None)


@dataclass(frozen=True)
class ControlOutcome:
    """What became of the spec's control fields at this generation."""

    status: str  # "True" applied, "False" rejected, "Unknown" not sent yet (daemon not reachable)
    reason: str  # Applied, InSync, Rejected, Pending
    message: str


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile learned, the input of :func:`status_from`."""

    generation: int
    problems: tuple[str, ...] = ()  # the spec's (empty: valid)
    suspended: bool = False
    restart_hash: str | None = None
    applied_spec: Mapping[str, Any] | None = None  # the last good spec (what runs)
    statefulset: Mapping[str, Any] | None = None
    pod: Mapping[str, Any] | None = None
    daemon: Mapping[str, Any] | None = None  # GET /api/v1/status; None: no answer
    daemon_ready: bool = False
    daemon_not_ready_reason: str | None = None
    unreachable_polls: int = 0  # failed polls in a row
    unreachable_after: int = 3
    daemon_error: str | None = None
    control: ControlOutcome | None = None
    overrides: Mapping[str, Any] | None = None  # GET /api/v1/control's overrides
    managed_fields: tuple[str, ...] = ()
    managed_query_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # per query, the fields the spec sets
    log_level: Mapping[str, Any] | None = None  # what the operator set ({podUID, level}); {}: none any more; None: not known this pass
    missing_queries: tuple[str, ...] = ()
    event_cursor: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def rollout(sts: Mapping[str, Any] | None) -> tuple[bool, str]:
    """Whether the StatefulSet runs its current template with every replica ready."""
    if sts is None:
        return False, "the StatefulSet does not exist yet"
    spec, st = sts.get("spec") or {}, sts.get("status") or {}
    want = spec.get("replicas", 1)
    if st.get("observedGeneration", 0) < sts.get("metadata", {}).get("generation", 0):
        return False, "the StatefulSet controller has not seen the new template yet"
    if want and st.get("updateRevision") and st.get("currentRevision") != st.get("updateRevision"):
        return False, f"rolling out revision {st['updateRevision']}"
    ready = st.get("readyReplicas", 0)
    if ready < want:
        return False, f"{ready} of {want} pod ready"
    return True, "the pod runs the current template" if want else "suspended: no pod"


# a container waiting for one of these will not start on its own
FAILING = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "CreateContainerConfigError",
           "CreateContainerError", "InvalidImageName", "RunContainerError")


def pod_problem(pod: Mapping[str, Any] | None) -> str | None:
    """Why the daemon's pod cannot run (a failing init check, a crash loop, an image it cannot pull)."""
    if pod is None:
        return None
    st = pod.get("status") or {}
    for kind in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(kind) or ():
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in FAILING:
                last = _last_exit(cs) or waiting.get("message") or ""
                return f"container {cs.get('name')}: {waiting['reason']}" + (f": {last}" if last else "")
    return None


def _last_exit(container_status: Mapping[str, Any]) -> str:
    """How the container's last run ended: its message, else its reason and exit code (an
    ``OOMKilled`` container leaves no message)."""
    ended = (container_status.get("lastState") or {}).get("terminated") or {}
    if ended.get("message"):
        return str(ended["message"]).strip()
    if ended.get("reason"):
        code = ended.get("exitCode")
        return f"last run ended {ended['reason']}" + (f" (exit code {code})" if code is not None else "")
    return ""


def pod_unscheduled(pod: Mapping[str, Any] | None) -> str | None:
    """The scheduler's words when the pod has no node (``0/3 nodes are available: 3 Insufficient
    cpu``): it may still get one (a cluster autoscaler adding a node), so not a failure."""
    for c in ((pod or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"the pod cannot be scheduled ({c.get('reason') or 'Unschedulable'}): {c.get('message') or 'no reason given'}"
    return None


def phase(obs: Observed) -> str:
    if obs.suspended:
        return SUSPENDED
    if pod_problem(obs.pod) is not None or obs.unreachable_polls >= obs.unreachable_after:
        return DEGRADED
    if obs.pod is None or (obs.pod.get("status") or {}).get("phase") == "Pending":
        return PENDING
    if obs.daemon is not None and obs.daemon_ready:
        return RUNNING
    return STARTING


def status_from(prev: Mapping[str, Any], obs: Observed, now: datetime) -> dict[str, Any]:
    """The new ``.status``: what the daemon said, merged into what the status held."""
    g = obs.generation
    conditions: list[dict[str, Any]] = [dict(c) for c in prev.get("conditions") or ()]

    def cond(type_: str, ok: bool | None, reason: str, message: str) -> None:
        nonlocal conditions
        state = "Unknown" if ok is None else ("True" if ok else "False")
        conditions = set_condition(conditions, type_, state, reason, message, now, g)

    if obs.problems:
        cond(SPEC_VALID, False, "Invalid", "; ".join(obs.problems) + " (the app keeps running its last valid spec)")
    else:
        cond(SPEC_VALID, True, "Valid", "the spec is valid")
    complete, why = rollout(obs.statefulset)
    cond(ROLLOUT_COMPLETE, complete, "Complete" if complete else "RollingOut", why)

    daemon = obs.daemon
    if daemon is not None:
        cond(DAEMON_REACHABLE, True, "Reachable", "the daemon answers")
    elif obs.suspended:
        cond(DAEMON_REACHABLE, None, "Suspended", "no daemon runs while suspended")
    elif obs.unreachable_polls >= obs.unreachable_after:
        cond(DAEMON_REACHABLE, False, "Unreachable", f"{obs.unreachable_polls} polls failed in a row: {obs.daemon_error or 'no answer'}")
    else:
        cond(DAEMON_REACHABLE, None, "Starting", obs.daemon_error or "waiting for the daemon to answer")
    if obs.control is not None:
        cond(CONTROL_APPLIED, {"True": True, "False": False}.get(obs.control.status), obs.control.reason, obs.control.message)

    mode = (daemon or {}).get("mode") or {}
    if daemon is not None:
        not_granted = mode.get("reason") == "RequestNotGranted"
        cond(EXECUTORS_GRANTED, not not_granted, "NotGranted" if not_granted else "Granted",
             mode.get("message") or "" if not_granted else "the cluster grants the daemon's executor requests")
        cond(MODE_FALLBACK, bool(mode.get("fallback")), str(mode.get("reason") or "ModeConfigured"), mode.get("message") or "")

    problem, unscheduled = pod_problem(obs.pod), pod_unscheduled(obs.pod)
    ready = daemon is not None and obs.daemon_ready and complete and not obs.problems
    if obs.suspended:
        cond(READY, False, "Suspended", "spec.suspend is set")
    elif ready:
        cond(READY, True, "Ready", "the daemon ticks and runs the current spec")
    else:
        reason = next(r for ok, r in (
            (problem is None, problem or ""), (not obs.problems, "the spec is invalid"),
            (unscheduled is None, unscheduled or ""), (complete, why),
            (daemon is not None, "the daemon does not answer"), (obs.daemon_ready, obs.daemon_not_ready_reason or "the daemon is not ready"),
        ) if not ok)
        cond(READY, False, "NotReady", reason)

    status: dict[str, Any] = {k: v for k, v in prev.items() if k not in ("conditions",)}
    status.update(observedGeneration=g, phase=phase(obs), conditions=sorted(conditions, key=lambda c: CONDITIONS.index(c["type"]) if c["type"] in CONDITIONS else 99))
    if obs.restart_hash is not None:
        status["restartHash"] = obs.restart_hash
    if obs.applied_spec is not None:
        status["lastAppliedSpec"] = dict(obs.applied_spec)
    if obs.pod is not None:
        md = obs.pod.get("metadata") or {}
        status["daemon"] = {**(prev.get("daemon") or {}), "pod": md.get("name"), "podUID": md.get("uid")}
    if daemon is not None:
        # no "last contact" time: it would change the resource on every poll; DaemonReachable's
        # transition time says since when the daemon answers
        status["daemon"] = {**status.get("daemon", {}), "version": daemon.get("version")}
        status["mode"] = {k: mode.get(k) for k in ("configured", "effective", "reason", "fallback", "message")}
        status["executors"] = executors_view(daemon)
        status["queries"] = [query_view(q) for q in (daemon.get("queries") or [])[:MAX_QUERIES]]
        last = daemon.get("last_decision")
        if last:
            status["lastDecision"] = {"id": last.get("id"), "at": last.get("at"), "what": last.get("what"), "reason": last.get("reason")}
    if obs.overrides is not None or obs.managed_fields or obs.managed_query_fields or obs.log_level is not None:
        control = dict(prev.get("control") or {})
        if obs.overrides is not None:
            control["overrides"] = dict(obs.overrides)
        control["managedFields"] = list(obs.managed_fields)
        _set_managed_queries(control, obs.managed_query_fields)
        if obs.control is not None and obs.control.status == "True":
            control["appliedGeneration"] = g
        if obs.log_level:
            control["logLevel"] = dict(obs.log_level)
        elif obs.log_level is not None and "logLevel" in control:
            # {}: the level the operator had set was given back; null, as /status takes a merge patch
            control["logLevel"] = None
        status["control"] = control
    if obs.missing_queries:
        status["missingQueries"] = list(obs.missing_queries)
    else:
        status.pop("missingQueries", None)
    if obs.event_cursor is not None:
        status["eventCursor"] = dict(obs.event_cursor)
    status.update(obs.extra)
    return status


def _set_managed_queries(control: dict[str, Any], managed: Mapping[str, tuple[str, ...]]) -> None:
    """``managedQueryFields``: a query whose fields were all given back is removed with a null
    (the status takes a merge patch, which keeps a key left out of a nested object)."""
    before = control.get("managedQueryFields") or {}
    now: dict[str, Any] = {name: list(fields) for name, fields in sorted(managed.items())}
    gone = {name: None for name in before if name not in now}
    if now or gone:
        control["managedQueryFields"] = {**now, **gone}


def executors_view(daemon: Mapping[str, Any]) -> dict[str, Any]:
    ex, bounds = daemon.get("executors") or {}, daemon.get("bounds") or {}
    pods = ex.get("pods") or {}
    view = {"alive": ex.get("alive"), "requested": ex.get("requested"), "pending": ex.get("pending"), "target": ex.get("target"),
            "min": bounds.get("min"), "max": bounds.get("max")}
    if pods:
        view.update(podsPending=pods.get("pending"), podsUnschedulable=pods.get("unschedulable"))
    return {k: v for k, v in view.items() if v is not None}


def query_view(q: Mapping[str, Any]) -> dict[str, Any]:
    params = q.get("params") or {}
    view = {"name": q.get("name"), "status": q.get("status"), "parallelism": params.get("parallelism"),
            "maxRowsPerBatch": params.get("max_rows_per_batch"), "triggerIntervalSeconds": params.get("trigger_interval_seconds")}
    return {k: v for k, v in view.items() if v is not None}
