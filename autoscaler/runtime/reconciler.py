"""One tick = observe -> evaluate -> decide -> normalize -> plan -> act -> record.

Level-triggered: every tick re-asserts the desired executor target, so a missed or lost
action heals itself on the next tick. Only ``observe`` and ``act`` touch the cluster.
"""

from __future__ import annotations

import threading
from dataclasses import field
from functools import partial
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

import structlog

from autoscaler.runtime.audit import EVENT, AuditEntry, AuditTrail
from autoscaler.runtime.clock import Clock
from autoscaler.core.control import ControlState, control_problems
from autoscaler.core.costmodel import CostModelCache
from autoscaler.core.history import EXECUTORS, ScalingEvent, ScalingHistory
from autoscaler.core.model import (
    ActionOutcome,
    EffectiveMode,
    ExecutorDecision,
    Mode,
    Plan,
    Proposal,
    QueryLoad,
    QueryParams,
    QueryView,
    Reason,
    Snapshot,
)
from autoscaler.core.modes import resolve_mode
from autoscaler.core.normalize import NormalizeInput, normalize
from autoscaler.core.plan import QueryPlanInput, executor_position, plan_executors, plan_queries
from autoscaler.runtime.ports import ClusterObserver, ExecutorActuator, QueryActuator, StateStore
from autoscaler.core.settings import Settings
from autoscaler.runtime.state.base import StateStoreError
from autoscaler.runtime.state.schema import restore_state
from autoscaler.core.evaluate import Fitter, evaluate_query, record_rates, schedule_lag
from autoscaler.core.values import replace, value
from policies import Policy, PolicyInput, check_proposal, create_policy

log = structlog.get_logger("autoscaler.reconciler")


class TickError(Exception):
    """A tick failed in one phase; ``phase`` is a bounded label for metrics."""

    def __init__(self, phase: str, cause: BaseException) -> None:
        super().__init__(f"{phase}: {cause}")
        self.phase = phase
        self.cause = cause

    def __reduce__(self) -> tuple[type, tuple[str, BaseException]]:
        return type(self), (self.phase, self.cause)  # picklable: crosses process pools


@value
class ActionResult:
    action: str  # "set_target", "remove", "rescale"
    subject: str
    ok: bool
    message: str = ""


@value
class TickRecord:
    """Everything one tick saw, wanted and did: the unit of the audit trail."""

    at: datetime
    mode: EffectiveMode
    executors_alive: int
    executors_cores: int
    executors_requested: int | None
    executors_pending: int
    executors_lost: tuple[str, ...]
    loads: tuple[QueryLoad, ...]
    proposal: Proposal
    decision: ExecutorDecision
    plan: Plan
    results: tuple[ActionResult, ...]
    paused: bool
    dry_run: bool
    duration: timedelta
    # the snapshot's queries (their batch samples are the snapshot's, not copies), and
    # asynchronous actions that completed
    queries: tuple[QueryView, ...] = ()
    outcomes: tuple[ActionOutcome, ...] = ()
    min_executors: int | None = None  # effective bounds this tick (settings or operator override)
    max_executors: int | None = None
    # derived from the fields above (every tick reads them: the audit trail, the log, the metrics)
    acted: bool = field(init=False, repr=False, compare=False)  # removed executors, restarted a query or changed the target
    # changed (or, paused or in dry run, would change) something, or held/refused a wanted change
    notable: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        decision = self.decision
        acted = False
        for r in self.results:  # one pass (a tick usually has one result: the target re-asserted)
            if r.ok and (r.action in ("remove", "rescale") or r.action == "set_target" and decision.changes):
                acted = True
                break
        wanted = decision.proposed is not None and decision.proposed != decision.current
        notable = bool(acted or wanted or decision.changes or self.plan.refusals or self.plan.query_changes or self.executors_lost)
        object.__setattr__(self, "acted", acted)
        object.__setattr__(self, "notable", notable)


class Reconciler:
    def __init__(
        self,
        *,
        settings: Settings,
        observer: ClusterObserver,
        executors: ExecutorActuator,
        queries: QueryActuator | None,
        clock: Clock,
        state_store: StateStore | None = None,
        on_tick: Callable[[TickRecord], None] | None = None,
        audit: AuditTrail | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.executors = executors
        self.queries = queries
        self.clock = clock
        self.state_store = state_store
        self.on_tick = on_tick
        self._lock = threading.RLock()
        self.history = ScalingHistory()
        self.control = ControlState()
        self.audit = audit if audit is not None else AuditTrail(settings.audit.max_count, settings.audit.max_age)
        self.last: TickRecord | None = None
        self.last_snapshot: Snapshot | None = None
        self.state_error: str | None = None  # why the last tick's state could not be saved (None: saved)
        self._cost_models: dict[str, CostModelCache] = {}
        self._slo_warned: set[tuple[str, timedelta]] = set()  # (query, schedule lag) told once
        # rate points kept per query: one a step over the rate history's age
        self._rate_steps = int(settings.history.rate_max_age / settings.history.rate_step) + 1
        self._restore()
        self.policy: Policy = self._make_policy()

    # --- control ---------------------------------------------------------------------------

    def update_control(self, change: Callable[[ControlState], ControlState]) -> ControlState:
        """Apply an operator change atomically; it takes effect on the next tick.

        The change is saved before it is applied: when the state store cannot be written,
        :class:`StateStoreError` is raised and nothing changed (a pause that a restart would
        forget is not applied).
        """
        with self._lock:
            new = change(self.control)
            policy = self._make_policy(new) if new.policy_params != self.control.policy_params else self.policy
            self._save(new)
            self.policy, self.control = policy, new
            return new

    def _make_policy(self, control: ControlState | None = None) -> Policy:
        """The configured policy with the operator's parameter overrides (of ``control``) on top."""
        overrides = (control or self.control).policy_params or {}
        return create_policy(self.settings.policy.name, {**self.settings.policy.params, **overrides})

    def bounds(self) -> tuple[int, int]:
        c, e = self.control, self.settings.executors
        lo = c.min_executors if c.min_executors is not None else e.min
        hi = c.max_executors if c.max_executors is not None else e.max
        return lo, hi

    def configured_mode(self) -> Mode:
        return self.control.mode or self.settings.mode

    def dry_run(self) -> bool:
        return self.control.dry_run if self.control.dry_run is not None else self.settings.dry_run

    # --- the tick --------------------------------------------------------------------------

    def tick(self) -> TickRecord:
        with self._lock:
            started = self.clock.now()
            try:
                snap = self.observer.observe(started)
            except Exception as exc:
                raise TickError("observe", exc) from exc
            try:
                record = self._decide_and_act(snap, started)
            except TickError:
                raise
            except Exception as exc:
                raise TickError("decide", exc) from exc
            self.last = record
            entry = self.audit.record_tick(record)
            self._log(record, entry)
            if self.on_tick:
                self.on_tick(record)
            return record

    def _decide_and_act(self, snap: Snapshot, now: datetime) -> TickRecord:
        s, control = self.settings, self.control
        self.last_snapshot = snap
        history = self._absorb_outcomes(self.history, snap)
        configured = self.configured_mode()
        first = resolve_mode(configured, snap.executors)
        position = executor_position(snap.executors, now, s.request_timeout, first.mode)
        mode = resolve_mode(configured, snap.executors, position.not_granted)
        lo, hi = self.bounds()
        loads = {q.name: evaluate_query(q, now, s.window.metrics_window, snap.executors.cores, self._fitter(q.name)) for q in snap.queries}
        self._forget_cost_models(snap)
        self._tell_unreachable_slo(snap)
        history = record_rates(history, snap.queries, now, s.history.rate_step)
        cores_per_executor = snap.executors.cores_per_executor
        policy_input = PolicyInput(
            now=now,
            snapshot=snap,
            loads=loads,
            history=history,
            min_executors=lo,
            max_executors=hi,
            cores_per_executor=cores_per_executor,
            target_lag=s.slo.target_lag,
            interval=s.reconcile_interval,
        )
        proposal = self._propose(policy_input, control)
        backlogged = self._backlogged(snap, loads)
        if control.manual_executors is not None:
            target = max(lo, min(hi, control.manual_executors))
            decision = ExecutorDecision(position.current, proposal.executors, target, Reason.MANUAL_TARGET)
        else:
            decision, history = normalize(
                NormalizeInput(
                    now=now,
                    proposal=proposal,
                    current=position.current,
                    min_executors=lo,
                    max_executors=hi,
                    history=history,
                    settings=s.normalize,
                    in_flight=position.in_flight,
                    backlogged=backlogged,
                )
            )
        set_target, remove = plan_executors(decision, snap.executors, mode.mode)
        if proposal.parallelism and (not mode.requesting or proposal.executors is not None and decision.target != proposal.executors):
            # partitions were proposed for an executor count that normalization held or
            # changed, or that reactive mode will not request: they would not fit; the planner
            # keeps partitions aligned to the cores instead
            proposal = replace(proposal, parallelism={})
        wanted = self._wanted_params(snap, proposal, control)
        changes, refusals = plan_queries(
            QueryPlanInput(
                now=now,
                queries=snap.queries,
                cores=self._planning_cores(snap, mode, decision),
                executors_settling=position.in_flight,
                wanted=wanted,
                history=history,
                settings=s.normalize,
            )
        )
        plan = Plan(set_target, remove, changes, refusals)
        paused, dry = control.paused, self.dry_run()
        results: tuple[ActionResult, ...] = ()
        if not paused and not dry:
            results = self._act(plan, now)
        history = self._record_changes(history, now, decision, plan, results)
        self.history = history.trimmed(
            now, s.history.max_age, s.history.max_count, s.history.rate_max_age, self._rate_steps * max(1, len(snap.queries))
        )
        self._consume_query_requests(snap, plan, results)
        self._save_tick()
        return TickRecord(
            at=now,
            mode=mode,
            executors_alive=snap.executors.count,
            executors_cores=snap.executors.cores,
            executors_requested=snap.executors.requested_total,
            executors_pending=snap.executors.pending_executors,
            executors_lost=snap.executors.lost,
            loads=tuple(loads.values()),
            proposal=proposal,
            decision=decision,
            plan=plan,
            results=results,
            paused=paused,
            dry_run=dry,
            duration=self.clock.now() - now,
            queries=snap.queries,
            outcomes=snap.outcomes,
            min_executors=lo,
            max_executors=hi,
        )

    def _backlogged(self, snap: Snapshot, loads: Mapping[str, QueryLoad]) -> bool:
        """Some query lags beyond the backlog threshold and beyond what its schedule explains
        (a query with a long trigger lags up to two triggers while it keeps up)."""
        threshold = self.settings.normalize.backlog_lag_threshold
        for view in snap.queries:
            load = loads.get(view.name)
            if load is not None and load.lag is not None and load.lag > max(threshold, schedule_lag(view.params.trigger_interval)):
                return True
        return False

    def _tell_unreachable_slo(self, snap: Snapshot) -> None:
        """Warn once per query and trigger when the SLO lag is shorter than the query's schedule
        allows: the policies then judge that query against its schedule (two triggers)."""
        target = self.settings.slo.target_lag
        for view in snap.queries:
            trigger = view.params.trigger_interval
            floor = schedule_lag(trigger)
            if trigger and floor > target and (view.name, floor) not in self._slo_warned:
                self._slo_warned.add((view.name, floor))
                log.warning(
                    "slo_below_schedule",
                    query=view.name,
                    trigger_seconds=trigger.total_seconds(),
                    target_lag_seconds=target.total_seconds(),
                    judged_against_seconds=floor.total_seconds(),
                    detail="a query that keeps up lags up to two triggers; more executors cannot shorten that",
                )

    @staticmethod
    def _planning_cores(snap: Snapshot, mode: EffectiveMode, decision: ExecutorDecision) -> int:
        """Cores the queries' partitions are aligned to: where active mode is heading, else what exists.

        Aligning to the executors still arriving would restart a query twice (once for the
        cores that exist, once more when the rest register).
        """
        if mode.requesting and decision.target is not None:
            return decision.target * max(1, snap.executors.cores_per_executor)
        return snap.executors.cores

    def _fitter(self, query: str) -> Fitter | None:
        """The query's cost-model cache, or None when the policy does not use a cost model."""
        if not getattr(self.policy, "needs_cost_model", True):
            return None
        cache = self._cost_models.get(query)
        if cache is None:
            cache = self._cost_models[query] = CostModelCache()
        return cache.fit

    def _forget_cost_models(self, snap: Snapshot) -> None:
        if len(self._cost_models) <= len(snap.queries):
            return  # every cached model is of a query observed now (evaluation just asked for each)
        for name in self._cost_models.keys() - {q.name for q in snap.queries}:
            del self._cost_models[name]

    def _propose(self, inp: PolicyInput, control: ControlState) -> Proposal:
        try:
            proposal = self.policy.propose(inp)
            check_proposal(self.settings.policy.name, proposal, inp.snapshot.queries)
        except Exception as exc:
            raise TickError("policy", exc) from exc
        return proposal

    def _wanted_params(
        self, snap: Snapshot, proposal: Proposal, control: ControlState
    ) -> dict[str, tuple[QueryParams, Reason]]:
        wanted: dict[str, tuple[QueryParams, Reason]] = {}
        for name, parallelism in proposal.parallelism.items():
            view = snap.query(name)
            if view is not None:
                wanted[name] = (replace(view.params, parallelism=parallelism), Reason.POLICY_PARALLELISM)
        for name, params in control.query_requests.items():
            if snap.query(name) is not None:
                wanted[name] = (params, Reason.OPERATOR_REQUEST)
        return wanted

    def _act(self, plan: Plan, now: datetime) -> tuple[ActionResult, ...]:
        results: list[ActionResult] = []
        # Remove first: Spark lowers its target by the number removed; then pin the exact target.
        if plan.remove:
            results.append(self._try("remove", ",".join(plan.remove), lambda: self.executors.remove(plan.remove, now)))
        if plan.set_target is not None:
            target = plan.set_target
            results.append(self._try("set_target", EXECUTORS, lambda: self.executors.set_target(target, now)))
        queries = self.queries
        for change in plan.query_changes:
            if queries is None:
                results.append(ActionResult("rescale", change.name, False, "no query actuator"))
                continue
            results.append(self._try("rescale", change.name, partial(queries.rescale, change, now)))
        return tuple(results)

    @staticmethod
    def _try(action: str, subject: str, call: Callable[[], bool]) -> ActionResult:
        try:
            ok = bool(call())
            return ActionResult(action, subject, ok, "" if ok else "not accepted")
        except Exception as exc:  # one failed action must not stop the others
            log.warning("action_failed", action=action, subject=subject, error=str(exc))
            return ActionResult(action, subject, False, f"{type(exc).__name__}: {exc}")

    def _record_changes(
        self,
        history: ScalingHistory,
        now: datetime,
        decision: ExecutorDecision,
        plan: Plan,
        results: tuple[ActionResult, ...],
    ) -> ScalingHistory:
        if not decision.changes and not plan.query_changes:
            return history  # the usual tick: the target re-asserted, no query restarted
        applied = {(r.action, r.subject) for r in results if r.ok}
        if decision.changes and ("set_target", EXECUTORS) in applied and decision.target is not None:
            history = history.with_event(
                ScalingEvent(now, EXECUTORS, decision.current, decision.target, decision.reason)
            )
        for change in plan.query_changes:
            if ("rescale", change.name) in applied:
                history = history.with_event(
                    ScalingEvent(now, change.name, change.from_params.parallelism, change.to_params.parallelism, change.reason)
                )
        return history

    def _absorb_outcomes(self, history: ScalingHistory, snap: Snapshot) -> ScalingHistory:
        """Attach measured pauses of completed rescales to their history events."""
        if not snap.outcomes or not any(outcome.pause is not None for outcome in snap.outcomes):
            return history
        events = list(history.events)
        for outcome in snap.outcomes:
            if outcome.pause is None:
                continue
            for i in range(len(events) - 1, -1, -1):
                if events[i].subject == outcome.subject and events[i].pause is None:
                    events[i] = replace(events[i], pause=outcome.pause)
                    break
        return replace(history, events=tuple(events))

    def _consume_query_requests(self, snap: Snapshot, plan: Plan, results: tuple[ActionResult, ...]) -> None:
        """Drop operator requests that started, were refused for good, already hold, or whose query is gone."""
        if not self.control.query_requests:
            return
        done = {r.subject for r in results if r.ok and r.action == "rescale"}
        refused = {r.name for r in plan.refusals if r.reason not in (Reason.QUERY_BUSY,)}
        views = {q.name: q for q in snap.queries}
        settled = {
            name
            for name, params in self.control.query_requests.items()
            if name not in views or (views[name].params == params and name not in {c.name for c in plan.query_changes})
        }
        gone = (done | refused | settled) & set(self.control.query_requests)
        if gone:
            remaining = {n: p for n, p in self.control.query_requests.items() if n not in gone}
            self.control = replace(self.control, query_requests=remaining)

    # --- persistence and logs ----------------------------------------------------------------

    def _restore(self) -> None:
        if self.state_store is None:
            return
        state = self.state_store.load()
        if not state:
            return
        self.history, control = restore_state(state, str(self.state_store))
        # Overrides saved under another configuration may no longer fit it: drop those, loudly.
        dropped = {f: m for f, m in control_problems(control, self.settings)}
        if dropped:
            control = replace(control, **{f.split(".")[0]: _CLEARED[f.split(".")[0]] for f in dropped})
            log.warning("overrides_dropped_on_restore", problems=dropped)
            self.audit.add(
                at=self.clock.now(),
                kind=EVENT,
                who="autoscaler",
                what="saved operator overrides that no longer fit the configuration were dropped: " + ", ".join(dropped),
                details={"problems": dropped},
            )
        self.control = control

    def _save(self, control: ControlState | None = None) -> None:
        """Save the history with ``control`` (default: the control state in effect)."""
        if self.state_store is not None:
            saved = control if control is not None else self.control
            self.state_store.save({"history": self.history.to_json(), "control": saved.to_json()})

    def _save_tick(self) -> None:
        """Save what the tick changed. The tick has acted by now: a store that cannot be written
        (a full disk, a revoked permission) must not also lose its record and audit entry, so the
        failure is logged (once while it lasts), shown in the status, and retried every tick."""
        try:
            self._save()
        except StateStoreError as exc:
            if str(exc) != self.state_error:
                log.error("state_save_failed", error=str(exc))
            self.state_error = str(exc)
            return
        if self.state_error is not None:
            log.info("state_saved", detail="the state store is written again")
        self.state_error = None

    def _log(self, r: TickRecord, entry: AuditEntry | None) -> None:
        decided = r.notable and (entry is None or entry.repeats == 1)  # a folded repetition is not logged again
        # the target is re-asserted every tick: logged only when it changed
        actions = [res for res in r.results if res.action != "set_target" or r.decision.changes]
        if not (decided or actions or r.outcomes):
            return  # a quiet tick
        fields = dict(
            audit_id=entry.id if entry else None,
            mode=r.mode.mode.value,
            executors=r.executors_alive,
            proposed=r.decision.proposed,
            target=r.decision.target,
            reason=r.decision.reason.value,
            limits=[x.value for x in r.decision.limits],
        )
        if decided:
            log.info(
                "decision",
                summary=entry.what if entry else None,
                message=r.decision.message or r.proposal.message,
                paused=r.paused,
                dry_run=r.dry_run,
                **fields,
            )
            for ref in r.plan.refusals:
                log.info("query_change_held", audit_id=fields["audit_id"], query=ref.name, reason=ref.reason.value, detail=ref.message)
        for res in actions:
            log.info("action", audit_id=fields["audit_id"], action=res.action, subject=res.subject, ok=res.ok, detail=res.message)
        for o in r.outcomes:
            log.info(
                "action_outcome",
                kind=o.kind,
                subject=o.subject,
                ok=o.ok,
                pause_seconds=None if o.pause is None else round(o.pause.total_seconds(), 3),
                detail=o.message,
            )


# what a dropped override is reset to (``ControlState`` defaults)
_CLEARED: dict[str, Any] = {
    "mode": None,
    "dry_run": None,
    "min_executors": None,
    "max_executors": None,
    "manual_executors": None,
    "policy_params": None,
    "query_requests": {},
}
