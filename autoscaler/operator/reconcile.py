"""One app, one pass: validate, apply the children, steer the daemon, mirror its status.

:class:`AppReconciler` is the shell around the pure parts. It talks to Kubernetes through the
gateway protocol and to the daemon through its REST client, and decides nothing itself:

1. **Validate** the spec (the model, the immutable ``checkpointRoot``, the daemon's own check
   of the configuration it would get). An invalid spec is reported (``SpecValid=False`` and a
   ``SpecInvalid`` Event) and nothing is applied: the app keeps running its last valid spec,
   whose control fields are still enforced.
2. **Apply** the children (server-side apply, in order). When the restart hash changed, a
   ``RolloutStarted`` Event names the restart-class fields that changed.
3. **Poll** the daemon (readiness, status, overrides). Failed polls are counted; after
   ``unreachable_after`` in a row the app is ``Degraded`` with a ``DaemonUnreachable`` Event.
4. **Steer** it: the control diff goes to ``PATCH /api/v1/control`` with the app's generation
   in the audit note; a rejection is reported and not retried at the same generation. Then
   the per-query requests and the log level.
5. **Tell**: Events for the daemon's new decisions, and the status, written only when it
   changed (a merge patch of ``/status``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Mapping, Sequence

from autoscaler.k8s.errors import Conflict, Forbidden, Invalid
from autoscaler.k8s.gateway import KubeGateway
from autoscaler.operator import events as ev
from autoscaler.operator.changes import classify_change, restart_hash
from autoscaler.operator.children import desired_children
from autoscaler.operator.config import AppRef, check_daemon_settings
from autoscaler.operator.control import (
    apply_patch,
    control_diff,
    describe_patch,
    desired_control,
    log_level_to_send,
    missing_queries,
    query_requests,
)
from autoscaler.operator.daemon_client import Applied, DaemonClient, DaemonUnavailable, WriteRefused
from autoscaler.operator.model import APP_NAME, MAX_APP_NAME, SparkStreamingAppSpec, parse_spec
from autoscaler.operator.settings import OperatorSettings
from autoscaler.operator.status import ControlOutcome, Observed, iso, status_from
from autoscaler.runtime.clock import Clock
from autoscaler.runtime.logs import get_logger

log = get_logger("autoscaler.operator")

DaemonFactory = Callable[[AppRef, Mapping[str, Any]], DaemonClient]  # (app, its pod) -> client


@dataclass
class AppMemory:
    """What the operator keeps about an app between passes (lost on restart: nothing vital)."""

    unreachable: int = 0
    refusing: int = 0  # passes in a row the daemon answered but took no change (401, 503)
    rejected: dict[tuple[int, str], str] = field(default_factory=dict)  # (generation, what) rejected -> why: not resent

    def forget_before(self, generation: int) -> None:
        """Drop the refusals of earlier generations: a pass asks only for its own (an app that runs
        for weeks would otherwise keep every refusal of every spec it had)."""
        self.rejected = {key: why for key, why in self.rejected.items() if key[0] >= generation}


@dataclass(frozen=True)
class QueryPass:
    """What a pass made of the spec's per-query settings."""

    missing: tuple[str, ...] = ()  # queries the spec names and the daemon does not host
    managed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per query, the fields the spec manages now
    refused: tuple[str, ...] = ()  # the daemon's refusals at this generation


@dataclass(frozen=True)
class Outcome:
    requeue_after: timedelta
    written: dict[str, Any] | None = None  # the app as the status write returned it


class EventRecorder:
    """Deduplicated Events (see :mod:`autoscaler.operator.events`)."""

    def __init__(self, gateway: KubeGateway, clock: Clock, repeat_interval: timedelta, instance: str) -> None:
        self.gateway = gateway
        self.clock = clock
        self.repeat_interval = repeat_interval
        self.instance = instance
        self._sent: dict[str, tuple[Any, int]] = {}  # name -> (last sent, repeats not sent since)

    def emit(self, ref: AppRef, event: ev.EventSpec) -> bool:
        name = ev.event_name(ref, event.reason, event.key)
        now = self.clock.now()
        last = self._sent.get(name)
        if last is not None and now - last[0] < self.repeat_interval:
            self._sent[name] = (last[0], last[1] + 1)
            return False
        held = last[1] if last is not None else 0
        stamp = iso(now)
        existing = self.gateway.get_event(ref.namespace, name)
        if existing is None:
            body = ev.event_body(ref, event, name, stamp, self.instance)
            body["count"] = 1 + held
            try:
                self.gateway.create_event(ref.namespace, body)
            except Conflict:  # created meanwhile (another pass): count it
                existing = self.gateway.get_event(ref.namespace, name)
        if existing is not None:
            count = int(existing.get("count") or 1) + 1 + held
            self.gateway.patch_event(ref.namespace, name, {"count": count, "lastTimestamp": stamp, "message": event.message[: ev.MAX_MESSAGE]})
        self._sent[name] = (now, 0)
        self._prune(now)
        log.info("event", app=ref.key, type=event.type, reason=event.reason, message=event.message)
        return True

    def _prune(self, now: Any) -> None:
        """Forget events sent longer ago than the repeat interval with no repeat held back: the
        next one is sent anyway (keeps the memory bounded by the recent events)."""
        for name, (at, held) in list(self._sent.items()):
            if held == 0 and now - at >= self.repeat_interval:
                del self._sent[name]

    def forget(self, ref: AppRef) -> None:
        prefix = f"{ref.name[:200]}."
        for name in [n for n in self._sent if n.startswith(prefix)]:
            del self._sent[name]


class AppReconciler:
    def __init__(
        self,
        gateway: KubeGateway,
        settings: OperatorSettings,
        *,
        clock: Clock,
        daemon: DaemonFactory,
        events: EventRecorder,
    ) -> None:
        self.gateway = gateway
        self.settings = settings
        self.clock = clock
        self.daemon = daemon
        self.events = events
        self.memory: dict[str, AppMemory] = {}

    def forget(self, ref: AppRef) -> None:
        """The app was deleted: its children go with it (owner references); only memory is left to drop."""
        self.memory.pop(ref.key, None)
        self.events.forget(ref)

    # --- one pass -------------------------------------------------------------------------------

    def reconcile(self, app: Mapping[str, Any]) -> Outcome:
        ref = AppRef.of(dict(app))
        generation = int(app["metadata"].get("generation") or 1)
        prev: dict[str, Any] = dict(app.get("status") or {})
        mem = self.memory.setdefault(ref.key, AppMemory())
        mem.forget_before(generation)
        last_good = _last_good(prev)
        spec, problems = self.validate(ref, app.get("spec"), last_good)
        if problems:
            self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.SPEC_INVALID, f"generation {generation}: " + "; ".join(problems), f"{generation}"))
        running = spec if spec is not None else last_good
        if running is None:  # never valid: nothing to run, nothing to poll
            status = status_from(prev, Observed(generation, tuple(problems)), self.clock.now())
            return Outcome(self.settings.resync_interval, self._write_status(ref, prev, status))

        hash_ = restart_hash(running, self.settings)
        record = _spec_record(spec) if spec is not None else None
        applied = record == prev.get("lastAppliedSpec") and hash_ == prev.get("restartHash")  # this spec's children are there
        if spec is not None and (refused := self._apply(ref, spec, hash_, prev, last_good, dry_run_first=not applied)) is not None:
            # the API server refused a child the model let through: reported as the spec's
            # problem, and the spec not recorded as applied (the next pass tries it again)
            self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.APPLY_REFUSED, f"generation {generation}: {refused}", f"{generation}"))
            problems, spec, record = [*problems, refused], None, None
            running = last_good or running
            hash_ = prev.get("restartHash") or hash_
        sts = self.gateway.get_statefulset(ref.namespace, ref.name)
        pod = self.gateway.get_pod(ref.namespace, f"{ref.name}-0")
        obs = Observed(
            generation,
            tuple(problems),
            suspended=running.suspend,
            restart_hash=hash_,
            applied_spec=record if record is not None else prev.get("lastAppliedSpec"),
            statefulset=sts,
            pod=pod,
            unreachable_after=self.settings.unreachable_after,
            managed_fields=tuple((prev.get("control") or {}).get("managedFields") or ()),
            managed_query_fields=managed_query_fields(prev),
            event_cursor=prev.get("eventCursor"),
        )
        requeue = self.settings.resync_interval
        if not running.suspend and pod is not None and daemon_listening(pod):
            obs, requeue = self._with_daemon(ref, running, generation, prev, pod, obs, mem)
        status = status_from(prev, obs, self.clock.now())
        return Outcome(requeue, self._write_status(ref, prev, status))

    def validate(self, ref: AppRef, raw: Any, last_good: SparkStreamingAppSpec | None) -> tuple[SparkStreamingAppSpec | None, list[str]]:
        if not APP_NAME.fullmatch(ref.name) or len(ref.name) > MAX_APP_NAME:
            return None, [f"metadata.name: {ref.name!r} cannot name the app's Service and StatefulSet: a lower-case letter, then "
                          f"lower-case letters, digits and '-', at most {MAX_APP_NAME} characters"]
        spec, problems = parse_spec(raw)
        if spec is None:
            return None, problems
        if last_good is not None and last_good.checkpoint_root != spec.checkpoint_root:
            # the CRD's rule refuses this first; checked again for an API server without it
            return None, [f"spec.checkpointRoot: immutable: the queries' checkpoints are in {last_good.checkpoint_root!r}"]
        try:
            _, problems = check_daemon_settings(ref, spec, self.settings)
        except (TypeError, ValueError, AttributeError) as exc:  # settings the daemon's configuration cannot be built from
            problems = [f"spec.settings: the daemon's configuration cannot be made from them: {exc}"]
        return (None, problems) if problems else (spec, [])

    # --- children -------------------------------------------------------------------------------

    def _apply(
        self, ref: AppRef, spec: SparkStreamingAppSpec, hash_: str, prev: Mapping[str, Any], last_good: SparkStreamingAppSpec | None,
        *, dry_run_first: bool,
    ) -> str | None:
        """Apply every child; what the API server refused (a field it checks and the model does
        not), or None. A failure it may not repeat (a timeout, a 5xx) is raised and retried.

        ``dry_run_first`` (a spec not applied yet): every child goes to the API server as a dry
        run first, so that one it refuses leaves all of them as they were (it left the ConfigMap
        updated and the StatefulSet not: the daemon's configuration of one generation under the
        pod of another).
        """
        children = desired_children(ref, spec, self.settings, hash_)
        for dry_run in (True, False) if dry_run_first else (False,):
            for child in children:
                try:
                    self.gateway.apply(child, dry_run=dry_run)
                except (Invalid, Forbidden) as exc:
                    return f"the API server refused {child['kind']} {child['metadata']['name']}: {exc.message or exc}"
        before = prev.get("restartHash")
        if before is not None and before != hash_:  # told once the StatefulSet carries the change
            fields = classify_change(last_good, spec).restart if last_good is not None else ()
            what = ", ".join(fields) if fields else "the operator's pod settings"
            self.events.emit(ref, ev.EventSpec(ev.NORMAL, ev.ROLLOUT_STARTED,
                                               f"{what} changed: the driver pod restarts and the queries resume from their checkpoints", hash_))
        return None

    # --- the daemon -------------------------------------------------------------------------------

    def _with_daemon(
        self, ref: AppRef, spec: SparkStreamingAppSpec, generation: int, prev: Mapping[str, Any], pod: Mapping[str, Any], obs: Observed, mem: AppMemory
    ) -> tuple[Observed, timedelta]:
        client = self.daemon(ref, pod)
        pod_uid = (pod.get("metadata") or {}).get("uid")
        try:
            ready, why = client.ready()
            overrides = client.control().get("overrides") or {}
        except DaemonUnavailable as exc:
            mem.unreachable += 1
            if mem.unreachable == self.settings.unreachable_after:
                self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.DAEMON_UNREACHABLE, f"{mem.unreachable} polls failed in a row: {exc}", "unreachable"))
            return replace(obs, unreachable_polls=mem.unreachable, daemon_error=str(exc)), self._backoff(mem.unreachable)
        mem.unreachable = 0
        note = f"SparkStreamingApp {ref.key} generation {generation}"
        try:
            control, overrides, managed = self._control(ref, spec, generation, prev, overrides, client, note, mem)
            queries = self._queries(ref, spec, generation, obs.managed_query_fields, client, note, mem)
            if queries.refused:  # the condition covers every live field: a query's refusal is not hidden by the rest applying
                control = ControlOutcome("False", "Rejected", "; ".join(queries.refused))
            level = self._log_level(ref, spec, prev, pod_uid, client, note)
            daemon_status = client.status()  # after the changes: the status shows them
            cursor = self._decision_events(ref, prev, daemon_status, client, pod_uid)
        except WriteRefused as exc:
            return self._refusing(ref, client, obs, mem, exc, ready, why)
        except DaemonUnavailable as exc:  # it answered a moment ago: try again soon, not counted as unreachable
            return replace(obs, daemon_error=str(exc)), min(self.settings.resync_interval, timedelta(seconds=5))
        mem.refusing = 0
        observed = replace(obs, daemon=daemon_status, daemon_ready=ready, daemon_not_ready_reason=why, control=control, overrides=overrides,
                            managed_fields=managed, managed_query_fields=queries.managed, log_level=level, missing_queries=queries.missing,
                            event_cursor=cursor)
        return observed, (self.settings.resync_interval if ready else min(self.settings.resync_interval, timedelta(seconds=5)))

    def _refusing(
        self, ref: AppRef, client: DaemonClient, obs: Observed, mem: AppMemory, exc: WriteRefused, ready: bool, why: str | None
    ) -> tuple[Observed, timedelta]:
        """The daemon answers but takes no change (a token it does not accept, a broken token file
        or state store): said as such once it lasts, its status still mirrored, polled with
        back-off. It showed as "Starting, the daemon does not answer", polled every 5 s."""
        mem.refusing += 1
        lasting = mem.refusing >= self.settings.unreachable_after
        if mem.refusing == self.settings.unreachable_after:
            self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.CHANGES_REFUSED,
                                               f"{mem.refusing} passes in a row the daemon took none of the operator's changes: {exc}", "refusing"))
        try:
            daemon_status: dict[str, Any] | None = client.status()
        except DaemonUnavailable:  # the mirror is a courtesy here: the refusal is what this pass reports
            daemon_status = None
        outcome = ControlOutcome("False" if lasting else "Unknown", "Refused" if lasting else "Pending",
                                 f"the daemon takes no change: {exc}")
        return replace(obs, daemon=daemon_status, daemon_ready=ready, daemon_not_ready_reason=why, control=outcome,
                       daemon_error=str(exc)), self._backoff(mem.refusing)

    def _backoff(self, failures: int) -> timedelta:
        """Seconds to the next poll after ``failures`` in a row: doubling, at most the resync interval."""
        return timedelta(seconds=min(self.settings.resync_interval.total_seconds(), 2 ** min(failures, 6)))

    def _control(
        self, ref: AppRef, spec: SparkStreamingAppSpec, generation: int, prev: Mapping[str, Any], overrides: dict[str, Any],
        client: DaemonClient, note: str, mem: AppMemory,
    ) -> tuple[ControlOutcome | None, dict[str, Any], tuple[str, ...]]:
        managed = tuple((prev.get("control") or {}).get("managedFields") or ())
        diff = control_diff(desired_control(spec), overrides, managed)
        if not diff.patch:
            had = next((c for c in prev.get("conditions") or () if c.get("type") == "ControlApplied"), None)
            outcome = None if had is not None and had.get("status") == "True" else ControlOutcome("True", "InSync", "the daemon holds what the spec sets")
            return outcome, overrides, diff.managed
        key = (generation, json.dumps(diff.patch, sort_keys=True))
        if key in mem.rejected:
            return None, overrides, managed  # told already; retried when the spec changes
        described = describe_patch(diff.patch, overrides)
        result = client.patch_control(diff.patch, note)
        if isinstance(result, Applied):
            message = f"{described} (generation {generation}) [audit {result.audit_id}]"
            self.events.emit(ref, ev.EventSpec(ev.NORMAL, ev.CONTROL_APPLIED, message, f"{generation}:{key[1]}"))
            return ControlOutcome("True", "Applied", message), apply_patch(overrides, diff.patch), diff.managed
        message = f"generation {generation}: the daemon refused {described}: {result.message}"
        mem.rejected[key] = message
        self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.CONTROL_REJECTED, message, f"{generation}:{key[1]}"))
        return ControlOutcome("False", "Rejected", message), overrides, managed

    def _queries(
        self, ref: AppRef, spec: SparkStreamingAppSpec, generation: int, managed: Mapping[str, tuple[str, ...]], client: DaemonClient,
        note: str, mem: AppMemory,
    ) -> QueryPass:
        if not spec.queries and not managed:
            return QueryPass()
        hosted = client.queries()
        diff = query_requests(spec.queries, hosted, managed)
        now_managed, refused = dict(diff.managed), []
        for name, body in diff.requests:
            key = (generation, f"query {name} {json.dumps(body, sort_keys=True)}")
            message = mem.rejected.get(key)
            if message is None:
                message = self._request_query(ref, generation, client, note, name, body, key[1])
                if message is not None:
                    mem.rejected[key] = message
            if message is not None:  # refused, now or before at this generation: not resent
                refused.append(message)
                now_managed[name] = _union(managed.get(name, ()), now_managed.get(name, ()))  # still ours to give back
        return QueryPass(tuple(missing_queries(spec.queries, hosted)), now_managed, tuple(refused))

    def _request_query(
        self, ref: AppRef, generation: int, client: DaemonClient, note: str, name: str, body: dict[str, Any], dedup: str
    ) -> str | None:
        """Send one query request: None when the daemon took it, else why it refused."""
        result = client.patch_query(name, body, note)
        fields = ", ".join(f"{k} {v}" for k, v in body.items())
        if isinstance(result, Applied):
            self.events.emit(ref, ev.EventSpec(ev.NORMAL, ev.CONTROL_APPLIED,
                                               f"query {name}: {fields} requested (generation {generation}) [audit {result.audit_id}]", dedup))
            return None
        message = f"generation {generation}: the daemon refused query {name}: {fields}: {result.message}"
        self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.CONTROL_REJECTED, message, dedup))
        return message

    def _log_level(self, ref: AppRef, spec: SparkStreamingAppSpec, prev: Mapping[str, Any], pod_uid: str | None,
                   client: DaemonClient, note: str) -> dict[str, Any] | None:
        applied = (prev.get("control") or {}).get("logLevel")
        level = log_level_to_send(spec.log_level, applied, pod_uid)
        if level is None:
            return applied
        result = client.put_log_level(level, note)
        if isinstance(result, Applied):
            # the spec's level given up and the daemon's own restored: nothing of ours is held ({})
            return {"podUID": pod_uid, "level": level} if spec.log_level is not None else {}
        self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.CONTROL_REJECTED, f"log level {level}: {result.message}", f"log:{level}"))
        return applied

    def _decision_events(self, ref: AppRef, prev: Mapping[str, Any], daemon_status: Mapping[str, Any], client: DaemonClient,
                         pod_uid: str | None) -> dict[str, Any]:
        entries = client.decisions(50)
        events, cursor = ev.decision_events(entries, prev.get("eventCursor"), pod_uid)
        for event in events:
            self.events.emit(ref, event)
        mode = daemon_status.get("mode") or {}
        if mode.get("reason") == "RequestNotGranted":
            self.events.emit(ref, ev.EventSpec(ev.WARNING, ev.EXECUTORS_NOT_GRANTED, str(mode.get("message") or "not granted"), "not-granted"))
        return cursor

    # --- status ---------------------------------------------------------------------------------------

    def _write_status(self, ref: AppRef, prev: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any] | None:
        patch = merge_patch(prev, status)
        if not patch:
            return None
        return self.gateway.patch_app_status(ref.namespace, ref.name, patch)


def daemon_listening(pod: Mapping[str, Any] | None) -> bool:
    """Whether the pod's daemon container has started, so a poll that fails means something. The
    pod has its address before the image is pulled and the init check has run: polled from then
    on, a normal start raised DaemonUnreachable and Degraded about 6 s into the first polls."""
    status = (pod or {}).get("status") or {}
    daemon = next((cs for cs in status.get("containerStatuses") or () if cs.get("name") == "daemon"), None)
    return bool(status.get("podIP")) and daemon is not None and "running" in (daemon.get("state") or {})


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level JSON merge patch from ``old`` to ``new`` (a removed key is ``null``)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


def _spec_record(spec: SparkStreamingAppSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True, exclude_none=True)


def _last_good(prev: Mapping[str, Any]) -> SparkStreamingAppSpec | None:
    spec, _ = parse_spec(prev.get("lastAppliedSpec")) if prev.get("lastAppliedSpec") else (None, [])
    return spec


def managed_query_fields(status: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``status.control.managedQueryFields``: per query, the fields the spec set last."""
    held = (status.get("control") or {}).get("managedQueryFields") or {}
    return {name: tuple(fields) for name, fields in held.items() if isinstance(fields, list) and fields}


def _union(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({*a, *b}))
