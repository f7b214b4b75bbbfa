"""Operator changes of a running daemon: validated, applied atomically, audited.

The REST API is a thin layer over :class:`Commands`. Each change is checked against the same
rules as the configuration (:func:`autoscaler.core.control.control_problems`) inside
:meth:`Reconciler.update_control`, under the reconciler's lock: either the whole change is
valid and replaces the control state at once, or nothing changes and :class:`ChangeError`
names every offending field. A change takes effect on the next tick and is written to the
audit trail (who, what, when) and to the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Mapping, Sequence

from autoscaler.core.control import ControlState
from autoscaler.core.model import Mode, QueryParams, Reason
from autoscaler.core.plan import refusal_for
from autoscaler.runtime.audit import OPERATOR, AuditEntry
from autoscaler.runtime.clock import Clock
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.reconciler import Reconciler

log = get_logger("autoscaler.commands")

CONTROL_FIELDS = ("paused", "mode", "dry_run", "min_executors", "max_executors", "manual_executors", "policy_params")
QUERY_FIELDS = ("parallelism", "max_rows_per_batch", "trigger_interval_seconds", "shuffle_partitions")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# the setting a query refusal is about, so that the answer points at the field to change rather
# than at the query's name; a refusal of the query as a whole (attached, unknown) names the query
REFUSED_SETTING = {Reason.STATE_PINS_SHUFFLE_PARTITIONS: "shuffle_partitions", Reason.BOUNDED_QUERY_TRIGGER: "trigger_interval_seconds"}


class ChangeError(Exception):
    """A refused change: HTTP-like ``status`` and ``(field, message)`` problems, nothing applied."""

    def __init__(self, problems: Sequence[tuple[str, str]], status: int = 422) -> None:
        self.problems = list(problems)
        self.status = status
        super().__init__("; ".join(f"{f}: {m}" for f, m in self.problems))


@dataclass(frozen=True)
class Applied:
    control: ControlState
    changes: Mapping[str, Mapping[str, Any]]  # field -> {"from": ..., "to": ...} (JSON values)
    entry: AuditEntry | None  # None when nothing changed


def _json(value: Any) -> Any:
    if isinstance(value, Mode):
        return value.value
    if isinstance(value, QueryParams):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value


class Commands:
    def __init__(self, reconciler: Reconciler, *, clock: Clock, metrics: Any = None) -> None:
        self.reconciler = reconciler
        self.clock = clock
        self.metrics = metrics

    # --- control state -------------------------------------------------------------------------

    def change_control(self, who: str, changes: Mapping[str, Any], note: str | None = None) -> Applied:
        """Set any of :data:`CONTROL_FIELDS` at once; ``None`` returns a field to the configuration."""
        unknown = sorted(set(changes) - set(CONTROL_FIELDS))
        if unknown:
            raise ChangeError([(f, "not a control field") for f in unknown])
        if not changes:
            raise ChangeError([("body", f"give at least one of {', '.join(CONTROL_FIELDS)}")])
        values = {k: self._coerce(k, v) for k, v in changes.items()}
        settings = self.reconciler.settings
        seen: dict[str, ControlState] = {}

        def apply(old: ControlState) -> ControlState:
            new = replace(old, **values)
            problems = self.reconciler.override_problems(new)
            if new.manual_executors is not None and values.keys() & {"manual_executors", "min_executors", "max_executors"}:
                lo = new.min_executors if new.min_executors is not None else settings.executors.min
                hi = new.max_executors if new.max_executors is not None else settings.executors.max
                if not lo <= new.manual_executors <= hi and lo <= hi:
                    if "manual_executors" in values:
                        problems.append(("manual_executors", f"{new.manual_executors} is outside the executor bounds [{lo}, {hi}]"))
                    else:
                        # a bound moved past the manual target: the same state refused when the
                        # target comes second is refused when it came first
                        bound = "max_executors" if "max_executors" in values and new.manual_executors > hi else "min_executors"
                        problems.append((bound, f"the manual target {new.manual_executors} would be outside the executor bounds "
                                                f"[{lo}, {hi}]; change or clear manual_executors in the same request"))
            if problems:
                raise ChangeError(problems)
            seen["old"] = old
            return new

        new = self.reconciler.update_control(apply)
        old = seen["old"]
        diff = {k: {"from": _json(getattr(old, k)), "to": _json(getattr(new, k))} for k in values if getattr(old, k) != getattr(new, k)}
        return Applied(new, diff, self._audit(who, diff, note))

    @staticmethod
    def _coerce(name: str, value: Any) -> Any:
        if name == "paused":
            return bool(value)  # None: back to not paused
        if name == "mode" and value is not None:
            return Mode(value)
        if name == "policy_params" and value is not None:
            return dict(value) or None  # {} overrides nothing: the same state as null, not a change to record
        return value

    # --- queries -------------------------------------------------------------------------------

    def request_query(self, who: str, name: str, fields: Mapping[str, Any], note: str | None = None) -> Applied:
        """Ask for new query settings; applied at a batch boundary by a restart from the checkpoint."""
        unknown = sorted(set(fields) - set(QUERY_FIELDS))
        if unknown:
            raise ChangeError([(f, "not a query setting") for f in unknown])
        if not fields:
            raise ChangeError([("body", f"give at least one of {', '.join(QUERY_FIELDS)}")])
        view = self._query_view(name)
        if not view.rescalable:
            raise ChangeError([("name", f"query {name!r} is attached, not hosted: the daemon cannot restart it")], status=409)
        problems = []
        p = fields.get("parallelism")
        if p is not None and not view.min_parallelism <= p <= view.max_parallelism:
            problems.append(("parallelism", f"{p} is outside the query's range [{view.min_parallelism}, {view.max_parallelism}]"))
        if "parallelism" in fields and p is None:
            problems.append(("parallelism", "must be a whole number of at least 1"))
        if problems:
            raise ChangeError(problems)
        updates: dict[str, Any] = {}
        for key, value in fields.items():
            if key == "trigger_interval_seconds":  # None: no interval, Spark's default trigger
                updates["trigger_interval"] = None if value is None else timedelta(seconds=float(value))
            else:
                updates[key] = value
        seen: dict[str, ControlState] = {}

        def apply(old: ControlState) -> ControlState:
            base = old.query_requests.get(name, view.params)
            wanted = replace(base, **updates)
            refused = refusal_for(view, wanted)
            if refused is not None and refused[0] != Reason.QUERY_BUSY:  # a busy query takes it once running
                raise ChangeError([(REFUSED_SETTING.get(refused[0], "name"), f"{refused[0].value}: {refused[1]}")], status=409)
            seen["old"] = old
            if wanted == view.params and name not in old.query_requests:
                return old  # already running with these settings: nothing to do
            new = replace(old, query_requests={**old.query_requests, name: wanted})
            problems = [
                (f.rsplit(".", 1)[-1], m) for f, m in self.reconciler.override_problems(new) if f.startswith(f"query_requests.{name}.")
            ]
            if problems:
                raise ChangeError(problems)
            return new

        new = self.reconciler.update_control(apply)
        before = seen["old"].query_requests.get(name, view.params)
        after = new.query_requests.get(name, view.params)
        diff = {f"query_requests.{name}": {"from": _json(before), "to": _json(after)}} if before != after else {}
        return Applied(new, diff, self._audit(who, diff, note, change="query_params"))

    def cancel_query_request(self, who: str, name: str, note: str | None = None) -> Applied:
        seen: dict[str, ControlState] = {}

        def apply(old: ControlState) -> ControlState:
            if name not in old.query_requests:
                raise ChangeError([("name", f"no pending request for query {name!r}")], status=404)
            seen["old"] = old
            return replace(old, query_requests={n: p for n, p in old.query_requests.items() if n != name})

        new = self.reconciler.update_control(apply)
        diff = {f"query_requests.{name}": {"from": _json(seen["old"].query_requests[name]), "to": None}}
        return Applied(new, diff, self._audit(who, diff, note, change="query_request_cancel"))

    def _query_view(self, name: str) -> Any:
        snap = self.reconciler.last_snapshot
        if snap is None:
            raise ChangeError([("name", "the daemon has not observed the cluster yet; retry after the first tick")], status=409)
        view = snap.query(name)
        if view is None:
            known = ", ".join(sorted(q.name for q in snap.queries)) or "none"
            raise ChangeError([("name", f"unknown query {name!r}; known: {known}")], status=404)
        return view

    # --- logging -------------------------------------------------------------------------------

    def set_log_level(self, who: str, level: str, logger: str | None = None, note: str | None = None) -> Applied:
        level = level.upper()
        if level not in LOG_LEVELS:
            raise ChangeError([("level", f"must be one of {', '.join(LOG_LEVELS)}")])
        name = logger or ""
        if name and name not in logging.root.manager.loggerDict:
            raise ChangeError([("logger", f"no logger named {name!r}; leave it empty for the root logger")])
        target = logging.getLogger(name or None)
        before = logging.getLevelName(target.level)
        target.setLevel(level)
        label = name or "root"
        diff = {f"log_level.{label}": {"from": before, "to": level}} if before != level else {}
        return Applied(self.reconciler.control, diff, self._audit(who, diff, note, change="log_level"))

    # --- audit ---------------------------------------------------------------------------------

    def _audit(self, who: str, diff: Mapping[str, Mapping[str, Any]], note: str | None, change: str | None = None) -> AuditEntry | None:
        if not diff:
            return None
        what = "; ".join(f"{field}: {_short(d['from'])} -> {_short(d['to'])}" for field, d in diff.items())
        entry = self.reconciler.audit.add(
            at=self.clock.now(),
            kind=OPERATOR,
            who=who,
            what=what[:500],
            details={"changes": dict(diff), "note": note},
        )
        for field in diff:
            label = change or field
            if self.metrics is not None:
                self.metrics.operator_change(label)
        log.info("operator_change", who=who, what=entry.what, audit_id=entry.id, note=note)
        return entry


def _short(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in value.items() if v is not None) + "}"
    return str(value).lower() if isinstance(value, bool) else str(value)
