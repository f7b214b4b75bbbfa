"""One tick = observe -> decide -> realize -> record (after Flink's ``runScalingLogic``).

Level-triggered: every tick re-asserts the desired executor target, so a missed or lost action
heals itself on the next tick. ``observe`` (the cluster observer) and ``realize`` (the
:class:`~autoscaler.runtime.realizer.Realizer`) are the only steps that touch the cluster;
``decide`` is the pure :func:`~autoscaler.core.decide.decide`; ``record`` keeps the history,
saves the state, writes the audit trail and the log.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Callable

from autoscaler.core.control import (
    ControlState,
    cleared,
    control_problems,
    settled_requests,
)
from autoscaler.core.decide import (
    Decision,
    DecisionMemo,
    TickInput,
    decide,
    effective_bounds,
    with_actions,
)
from autoscaler.core.evaluate import schedule_lag
from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import ActionKind, ActionResult, Mode, QueryStatus, Snapshot, TickRecord
from autoscaler.core.plan import QueryResume
from autoscaler.core.policy import Policy, PolicyError, PolicyFailed
from autoscaler.core.settings import Settings
from autoscaler.runtime.audit import EVENT, AuditEntry, AuditTrail
from autoscaler.runtime.clock import Clock
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.ports import (
    ClusterObserver,
    ExecutorActuator,
    QueryActuator,
    StateStore,
)
from autoscaler.runtime.realizer import Realizer
from autoscaler.runtime.state.base import StateStoreError
from autoscaler.runtime.state.schema import queries_json, restore_state
from policies.registry import create_policy

# a tick that changed only the scale-down window's recommendations saves at most this often
RECOMMENDATIONS_SAVED_EVERY = timedelta(minutes=1)

log = get_logger("autoscaler.reconciler")


class TickError(Exception):
    """A tick failed in one phase; ``phase`` is a bounded label for metrics."""

    def __init__(self, phase: str, cause: BaseException) -> None:
        super().__init__(f"{phase}: {cause}")
        self.phase = phase
        self.cause = cause

    def __reduce__(self) -> tuple[type, tuple[str, BaseException]]:
        return type(self), (self.phase, self.cause)  # picklable: crosses process pools


def unfit_overrides(control: ControlState, settings: Settings) -> dict[str, str]:
    """Saved overrides that no longer fit ``settings`` (field -> why): a restore drops them."""
    return dict(control_problems(control, settings, policy_params_problem(settings)))


def policy_params_problem(settings: Settings) -> Callable[[object], str | None]:
    """Judge policy parameters (merged over the configured ones) with the configured policy."""

    def problem(params: object) -> str | None:
        try:
            create_policy(settings.policy.name, params)  # type: ignore[arg-type]
        except PolicyError as exc:
            return str(exc)
        return None

    return problem


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
        self.realizer = Realizer(executors, queries)
        self.clock = clock
        self.state_store = state_store
        self.on_tick = on_tick
        self._lock = threading.RLock()
        self.history = ScalingHistory()
        self.control = ControlState()
        # each hosted query as it last ran, saved so a restarted daemon starts it so again
        self.queries: dict[str, QueryResume] = {}
        self.audit = audit if audit is not None else AuditTrail(settings.audit.max_count, settings.audit.max_age)
        self.last: TickRecord | None = None
        self.last_snapshot: Snapshot | None = None
        self.state_error: str | None = None  # why the last tick's state could not be saved (None: saved)
        # when the ticks last saved, what a restart must not lose then (_lasting), and the newest
        # recommendation of the scale-down window then
        self._saved: tuple[datetime, tuple[object, ...], int | None] | None = None
        self._slo_warned: set[tuple[str, timedelta]] = set()  # (query, schedule lag) told once
        self._restore()
        self.policy: Policy = self._make_policy()
        self.memo = DecisionMemo(policy=self.policy.new_memo())

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
            if policy is not self.policy:
                self.memo.policy = policy.new_memo()
            self.policy, self.control = policy, new
            return new

    def _make_policy(self, control: ControlState | None = None) -> Policy:
        """The configured policy with the operator's parameter overrides (of ``control``) on top."""
        overrides = (control or self.control).policy_params or {}
        return create_policy(self.settings.policy.name, {**self.settings.policy.params, **overrides})

    def override_problems(self, control: ControlState) -> list[tuple[str, str]]:
        """What makes ``control`` unusable with the configuration (``(field, message)`` pairs)."""
        return control_problems(control, self.settings, policy_params_problem(self.settings))

    def bounds(self) -> tuple[int, int]:
        return effective_bounds(self.settings.executors, self.control)

    def configured_mode(self) -> Mode:
        return self.control.mode or self.settings.mode

    def dry_run(self) -> bool:
        return self.control.dry_run if self.control.dry_run is not None else self.settings.dry_run

    # --- the tick --------------------------------------------------------------------------

    def tick(self) -> TickRecord:
        with self._lock:
            started = self.clock.now()
            snap = self._observe(started)
            decision = self._decide(snap, started)
            paused, dry = self.control.paused, self.dry_run()
            results = () if paused or dry else self.realizer.apply(decision.plan, started)
            record = self._record(snap, decision, results, started, paused=paused, dry_run=dry)
            self.last = record
            entry = self.audit.record_tick(record)
            self._log(record, entry)
            if self.on_tick:
                self.on_tick(record)
            return record

    def _observe(self, now: datetime) -> Snapshot:
        try:
            snap = self.observer.observe(now)
        except Exception as exc:
            raise TickError("observe", exc) from exc
        self.last_snapshot = snap
        self._tell_unreachable_slo(snap)
        return snap

    def _decide(self, snap: Snapshot, now: datetime) -> Decision:
        try:
            return decide(TickInput(now, snap, self.control, self.settings), self.history, self.policy, self.memo)
        except PolicyFailed as exc:
            raise TickError("policy", exc.cause) from exc.cause
        except Exception as exc:
            raise TickError("decide", exc) from exc

    def _record(
        self, snap: Snapshot, decision: Decision, results: tuple[ActionResult, ...], now: datetime, *, paused: bool, dry_run: bool
    ) -> TickRecord:
        """Keep what the tick changed (history, settled operator requests), save it, and make its record."""
        h = self.settings.history
        history = with_actions(decision.history, now, decision.executors, decision.plan, results)
        # rate points kept per query: one a step over the rate history's age
        rate_points = (int(h.rate_max_age / h.rate_step) + 1) * max(1, len(snap.queries))
        self.history = history.trimmed(now, h.max_age, h.max_count, h.rate_max_age, rate_points)
        self.control = settled_requests(self.control, snap, decision.plan)
        self.queries.update(
            (q.name, QueryResume(q.params, q.declared)) for q in snap.queries if q.declared is not None and q.status == QueryStatus.RUNNING
        )
        self._save_tick(now)
        return TickRecord(
            at=now,
            mode=decision.mode,
            executors_alive=snap.executors.count,
            executors_cores=snap.executors.cores,
            executors_requested=snap.executors.requested_total,
            executors_pending=snap.executors.pending_executors,
            executors_lost=snap.executors.lost,
            loads=decision.loads,
            proposal=decision.proposal,
            decision=decision.executors,
            plan=decision.plan,
            results=results,
            paused=paused,
            dry_run=dry_run,
            duration=self.clock.now() - now,
            queries=snap.queries,
            outcomes=snap.outcomes,
            min_executors=decision.min_executors,
            max_executors=decision.max_executors,
            executor_pods=snap.executors.pods,
        )

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
                    detail="a query that keeps up lags up to two trigger intervals; more executors cannot shorten that",
                )

    # --- persistence and logs ----------------------------------------------------------------

    def _restore(self) -> None:
        if self.state_store is None:
            return
        state = self.state_store.load()
        if leftovers := getattr(self.state_store, "removed_leftovers", None):
            log.info("state_leftovers_removed", files=leftovers, detail="temporary files of saves a killed daemon did not finish")
        if not state:
            return
        restored = restore_state(state, str(self.state_store))
        self.history, control, self.queries = restored.history, restored.control, dict(restored.queries)
        if self.history.recommendations:
            # the recommendations after the last save are lost; none was above the newest saved
            # (_save_tick), which is taken as made until now
            last_at, newest = self.history.recommendations[-1]
            if self.clock.now() > last_at:
                self.history = self.history.with_recommendation(self.clock.now(), newest)
        # Overrides saved under another configuration may no longer fit it: drop those, loudly.
        dropped = unfit_overrides(control, self.settings)
        if dropped:
            control = cleared(control, dropped)
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
            self.state_store.save({"history": self.history.to_json(), "control": saved.to_json(), "queries": queries_json(self.queries)})

    def _save_tick(self, now: datetime) -> None:
        """Save what the tick changed. The tick has acted by now: a store that cannot be written
        (a full disk, a revoked permission) must not also lose its record and audit entry, so the
        failure is logged (once while it lasts), shown in the status, and retried every tick.

        Every tick adds a recommendation to the scale-down window and nothing else most of the
        time, and a save writes the whole state (the remembered rates of every query: 190 KiB a
        query with the default 8 days of 5-minute steps, about 17 ms a save to a file on the project
        machine; on Kubernetes a write of a ConfigMap through the API server). What a restarted
        daemon must not lose (a scaling event, a remembered rate, the operator's control, how a
        query runs) is saved by the tick that changed it, and so is a recommendation above the
        newest one saved; the others at most every ``RECOMMENDATIONS_SAVED_EVERY``. A restarted
        daemon counts the newest recommendation saved as made when it starts (:meth:`_restore`),
        so the window it lost holds it no less than the one it had: its scale-down waits at
        most one delay longer, never less."""
        if self.state_store is None:
            return
        lasting = self._lasting()
        newest = self.history.recommendations[-1][1] if self.history.recommendations else None
        if self.state_error is None and self._saved is not None:
            saved_at, saved, saved_newest = self._saved
            higher = newest is not None and (saved_newest is None or newest > saved_newest)
            if saved == lasting and not higher and now - saved_at < RECOMMENDATIONS_SAVED_EVERY:
                return
        try:
            self._save()
        except StateStoreError as exc:
            if str(exc) != self.state_error:
                log.error("state_save_failed", error=str(exc))
            self.state_error = str(exc)
            return
        self._saved = (now, lasting, newest)
        if self.state_error is not None:
            log.info("state_saved", detail="the state store is written again")
        self.state_error = None

    def _lasting(self) -> tuple[object, ...]:
        """What of the state a restarted daemon must not lose, told cheaply: events and rates
        are appended in time order and trimmed from the front (their count and newest tell a
        change), the control state and the queries' settings are small."""
        h = self.history
        return (len(h.events), h.events[-1:], h.scale_down_since, len(h.rates), h.rates[-1:], self.control, dict(self.queries))

    def _log(self, r: TickRecord, entry: AuditEntry | None) -> None:
        decided = r.notable and (entry is None or entry.repeats == 1)  # a folded repetition is not logged again
        # the target is re-asserted every tick: logged only when it changed
        actions = [res for res in r.results if res.action != ActionKind.SET_TARGET or r.decision.changes]
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
            log.info("action", audit_id=fields["audit_id"], action=str(res.action), subject=res.subject, ok=res.ok, detail=res.message)
        for o in r.outcomes:
            log.info(
                "action_outcome",
                kind=str(o.kind),
                subject=o.subject,
                ok=o.ok,
                pause_seconds=None if o.pause is None else round(o.pause.total_seconds(), 3),
                detail=o.message,
            )

