"""What to send to a running daemon so that it does what the spec says: pure functions.

One authority per field. A control field set in the spec is enforced: whatever the daemon
holds (an override made through its REST API by a human, a restored state) is replaced by the
spec's value. A field the spec leaves unset is left alone, so a human's REST override stays.
A field the spec set before and no longer sets goes back to the daemon's configuration
(``null``); the fields the spec manages are kept in ``status.control.managedFields`` for that.

Per-query settings (rate limit, trigger) are requested only when the query runs with other
values and no request for these values is pending (the daemon applies a request by a restart
of that query from its checkpoint, at a batch boundary). The same one authority: a per-query
field the spec no longer sets goes back once to what the query's pipeline declares
(``status.control.managedQueryFields``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autoscaler.core.settings import parse_duration
from autoscaler.operator.model import QuerySpec, SparkStreamingAppSpec

# spec field -> the daemon's ControlPatch field
CONTROL_FIELDS: tuple[tuple[str, str], ...] = (
    ("scaling.mode", "mode"),
    ("scaling.minExecutors", "min_executors"),
    ("scaling.maxExecutors", "max_executors"),
    ("scaling.manualExecutors", "manual_executors"),
    ("scaling.paused", "paused"),
    ("scaling.dryRun", "dry_run"),
    ("scaling.policy.params", "policy_params"),
)
SPEC_FIELD = {daemon: spec for spec, daemon in CONTROL_FIELDS}


def desired_control(spec: SparkStreamingAppSpec) -> dict[str, Any]:
    """The spec's control fields by the daemon's names (None: unset)."""
    s = spec.scaling
    return {
        "mode": s.mode.value if s.mode is not None else None,
        "min_executors": s.min_executors,
        "max_executors": s.max_executors,
        "manual_executors": s.manual_executors,
        "paused": s.paused,
        "dry_run": s.dry_run,
        "policy_params": dict(s.policy.params) if s.policy.params is not None else None,
    }


def _norm(field: str, value: Any) -> Any:
    return None if field == "paused" and value is False else value  # not paused is the default, as null


def _held(overrides: Mapping[str, Any], field: str) -> Any:
    return _norm(field, overrides.get(field))


@dataclass(frozen=True)
class ControlDiff:
    patch: dict[str, Any]  # the body of PATCH /api/v1/control (without the note); empty: nothing to send
    managed: tuple[str, ...]  # the daemon fields the spec manages after the patch


def control_diff(desired: Mapping[str, Any], overrides: Mapping[str, Any], managed: Sequence[str]) -> ControlDiff:
    """``desired`` (:func:`desired_control`) against the daemon's ``overrides``
    (``GET /api/v1/control``), given the fields the spec managed so far."""
    patch: dict[str, Any] = {}
    now_managed = []
    for _, field in CONTROL_FIELDS:
        want, held = desired.get(field), _held(overrides, field)
        if want is not None:
            now_managed.append(field)
            if held != _norm(field, want):
                patch[field] = want
        elif field in managed and held is not None:
            patch[field] = None  # the spec gave the field up: back to the daemon's configuration
    return ControlDiff(patch, tuple(now_managed))


def apply_patch(overrides: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The overrides after the daemon took ``patch`` (what the next ``GET /api/v1/control`` shows)."""
    out = dict(overrides)
    for field, value in patch.items():
        out[field] = False if field == "paused" and value is None else value
    return out


def describe_patch(patch: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
    """``scaling.maxExecutors: 8 -> 20, scaling.paused: true -> unset``."""

    def show(value: Any) -> str:
        if value is None:
            return "unset"
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return ", ".join(f"{SPEC_FIELD[f]}: {show(_held(overrides, f))} -> {show(v)}" for f, v in patch.items())


# the per-query fields a spec sets, by the daemon's names
QUERY_FIELDS = ("max_rows_per_batch", "trigger_interval_seconds")


def desired_query(q: QuerySpec) -> dict[str, Any]:
    """The per-query fields the spec sets, by the daemon's names (unset fields left out)."""
    want: dict[str, Any] = {}
    if q.max_rows_per_batch is not None:
        want["max_rows_per_batch"] = q.max_rows_per_batch
    if q.trigger_interval is not None:
        want["trigger_interval_seconds"] = float(parse_duration(q.trigger_interval).total_seconds())
    return want


@dataclass(frozen=True)
class QueryDiff:
    requests: list[tuple[str, dict[str, Any]]]  # (name, body) of each PATCH /api/v1/queries/{name} needed now
    managed: dict[str, tuple[str, ...]]  # per query, the fields the spec manages once these are taken


def query_requests(
    queries: Sequence[QuerySpec], daemon_queries: Sequence[Mapping[str, Any]], managed: Mapping[str, Sequence[str]] | None = None
) -> QueryDiff:
    """The requests the spec needs now, given the fields it managed so far (``managed``, from
    ``status.control.managedQueryFields``).

    A field the spec sets is requested when the query runs with another value and no request
    for this value is pending. A field the spec set before and no longer sets is requested
    once at what the query's pipeline declares (the daemon's ``declared``), then left alone: a
    rate limit the daemon manages itself may differ from it later. A query the spec no longer
    lists gives all its fields back. A query the daemon does not host (yet) is skipped: it is
    reported in the status instead, and its fields stay managed.
    """
    managed = managed or {}
    hosted = {q["name"]: q for q in daemon_queries}
    requests: list[tuple[str, dict[str, Any]]] = []
    now_managed: dict[str, tuple[str, ...]] = {}
    wanted = {q.name: desired_query(q) for q in queries}
    for name in [*wanted, *(n for n in managed if n not in wanted)]:  # a query left out of the spec gives its fields back
        want = wanted.get(name, {})
        info = hosted.get(name)
        if info is None:
            if kept := tuple(sorted({*want, *managed.get(name, ())})):
                now_managed[name] = kept
            continue
        if want:
            now_managed[name] = tuple(f for f in QUERY_FIELDS if f in want)
        running, pending = info.get("params") or {}, info.get("pending_request") or {}
        body = {k: v for k, v in want.items() if running.get(k) != v and pending.get(k) != v}
        body.update(_given_back(managed.get(name, ()), want, info.get("declared"), pending or running))
        if body:
            requests.append((name, body))
    return QueryDiff(requests, now_managed)


def _given_back(
    was_managed: Sequence[str], want: Mapping[str, Any], declared: Mapping[str, Any] | None, upcoming: Mapping[str, Any]
) -> dict[str, Any]:
    """The declared value of each field the spec no longer sets where the query's ``upcoming``
    settings (those pending, else those it runs with) differ (a pipeline that declares no
    trigger interval goes back to none)."""
    if declared is None:
        return {}  # a daemon that does not say (an older one): nothing to go back to
    gone = (f for f in was_managed if f in QUERY_FIELDS and f not in want)
    return {f: declared.get(f) for f in gone if upcoming.get(f) != declared.get(f)}


def missing_queries(queries: Sequence[QuerySpec], daemon_queries: Sequence[Mapping[str, Any]]) -> list[str]:
    hosted = {q["name"] for q in daemon_queries}
    return [q.name for q in queries if q.name not in hosted]


# the level the daemon's container starts at (its args carry no --log-level: `run`'s default)
DAEMON_LOG_LEVEL = "INFO"


def log_level_to_send(spec_level: str | None, applied: Mapping[str, Any] | None, pod_uid: str | None) -> str | None:
    """The level to ``PUT /api/v1/log-level``: the daemon does not report its level, so the
    operator remembers what it set, for which pod (a new pod starts at its default). A level the
    spec no longer sets goes back to the daemon's own (one set and then removed stayed, DEBUG
    for as long as the pod lived)."""
    if pod_uid is None:
        return None
    ours = applied.get("level") if applied and applied.get("podUID") == pod_uid else None
    if spec_level is None:
        return DAEMON_LOG_LEVEL if ours is not None and ours != DAEMON_LOG_LEVEL else None
    return None if ours == spec_level else spec_level
