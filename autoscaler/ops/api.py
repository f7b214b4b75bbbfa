"""The REST API: read what the daemon sees and decided, steer it without stopping anything.

``create_app(...)`` builds a FastAPI application from what it serves; there are no globals, so
tests build one per case around a reconciler on the fake cluster. Schema at ``/openapi.json``.

* Read (open): ``/healthz``, ``/readyz``, ``/metrics``, ``/api/v1/status``, ``/api/v1/control``,
  ``/api/v1/decisions``, ``/api/v1/queries``, ``/api/v1/queries/{name}`` (a ``/`` in a name sent as ``%2F``).
* Control (bearer token; disabled with 403 when no token is configured): ``PATCH
  /api/v1/control``, ``POST /api/v1/control/pause|resume``, ``PATCH /api/v1/queries/{name}``,
  ``DELETE /api/v1/queries/{name}/request``, ``PUT /api/v1/log-level``. The token is checked
  before a body is read, a body longer than ``MAX_BODY_BYTES`` is refused (413) unread, one that
  has not all arrived within ``MAX_BODY_SECONDS`` is refused (408); a body must be sent as
  ``application/json`` (415 otherwise).

Every error body is ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`` and ``loc``
names the offending field (as FastAPI's own validation errors do). A change is validated as a
whole and applied atomically (:mod:`autoscaler.runtime.commands`); it takes effect on the next tick.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta
from typing import Annotated, Any, Awaitable, Callable, Iterable, Literal, Mapping, TypeAlias, TypeVar
from urllib.parse import unquote

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from autoscaler._version import __version__
from autoscaler.core.evaluate import judged_lag
from autoscaler.core.model import JAVA_LONG_MAX, QueryStatus, QueryView
from autoscaler.ops.auth import ApiAuth
from autoscaler.ops.probes import answer_head
from autoscaler.runtime.audit import KINDS, AuditEntry
from autoscaler.runtime.clock import Clock, SystemClock
from autoscaler.runtime.commands import Applied, ChangeError, Commands
from autoscaler.runtime.loop import ReconcileLoop
from autoscaler.runtime.reconciler import Reconciler
from autoscaler.runtime.state import StateStoreError
from autoscaler.runtime.views import (
    decision_json,
    executor_pods_json,
    iso,
    load_json,
    query_view_json,
    seconds,
)

T = TypeVar("T")
Ref: TypeAlias = T | Callable[[], T] | None  # a value, or how to get it once it exists

MAX_COUNT = 100_000
# The largest body a control request may have. The largest real one, a ControlPatch with a
# 500-character note and a policy's parameters, is a few KiB; the limit is there to bound what a
# broken or hostile client makes the daemon hold, in the process that is also the Spark driver.
MAX_BODY_BYTES = 1 << 20
# The longest a control request's body may take to arrive once its headers have (the whole body,
# not each read: a client trickling a byte at a time is cut off too). A real body of a few KiB
# arrives in milliseconds, and even one of MAX_BODY_BYTES takes under 9 s at 1 Mbit/s; without a
# bound, a client that sends headers and then part of a body holds a request open in the driver
# for as long as it likes (a slowloris).
MAX_BODY_SECONDS = 10.0


# a path segment as _SegmentPaths leaves it: "%" and "/" in it still escaped, undone here
QueryName: TypeAlias = Annotated[str, Path(description="Query (pipeline) name; a `/` in it sent as `%2F`."), AfterValidator(unquote)]


def _no_default(schema: dict[str, Any]) -> None:
    """Optional in a PATCH means "leave as is", not "null": keep ``default`` out of the schema."""
    schema.pop("default", None)


def _absent(**kw: Any) -> Any:
    return Field(None, json_schema_extra=_no_default, **kw)


# --- request bodies ---------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(None, max_length=500, description="Why: written to the audit trail with the change.")


class NoteBody(_Body):
    pass


class ControlPatch(_Body):
    """Fields present are changed together or not at all; ``null`` returns a field to the configuration."""

    paused: StrictBool | None = _absent(description="true: decide and report but do not act; false or null: resume.")
    mode: Literal["auto", "reactive", "active"] | None = _absent(description="Override `mode`; null: the configured mode.")
    dry_run: StrictBool | None = _absent(description="Recommend only (true) or act (false); null: the configured `dry_run`.")
    min_executors: Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)] | None = _absent(description="Override `executors.min`.")
    max_executors: Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)] | None = _absent(description="Override `executors.max`.")
    manual_executors: Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)] | None = _absent(
        description="Hold this executor count instead of the policy's (within the bounds); null: back to the policy."
    )
    policy_params: dict[str, Any] | None = _absent(
        description="Parameters of the configured policy, merged over `policy.params` (replaces earlier overrides); null or {}: none."
    )


class QueryPatch(_Body):
    """New settings for a hosted query, applied by a restart from its checkpoint at a batch boundary."""

    parallelism: Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)] = _absent(description="Source partitions (tasks per batch).")
    max_rows_per_batch: Annotated[StrictInt, Field(ge=1, le=JAVA_LONG_MAX)] | None = _absent(
        description="Rate limit in rows per batch (a source option Spark reads as a Java long); null: unlimited."
    )
    trigger_interval_seconds: Annotated[StrictFloat, Field(ge=0.1, le=86400, allow_inf_nan=False)] | None = _absent(
        description="Trigger interval in seconds; null: none (Spark's default trigger: the next batch as soon as the last ends)."
    )
    shuffle_partitions: Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)] = _absent(
        description="spark.sql.shuffle.partitions; refused for stateful queries unless their state store is RocksDB."
    )


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class LogLevelBody(_Body):
    # in any case: "debug" was refused with a list of the upper-case names, which say the same
    level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)]
    logger: str | None = Field(
        None, max_length=200, pattern=r"^[A-Za-z0-9_.\-]*$", description="Logger name (e.g. `autoscaler.reconciler`); empty or null: root."
    )


# --- responses ---------------------------------------------------------------------------------


class Problem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    detail: list[Problem]


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    reason: str | None = None


class Params(BaseModel):
    parallelism: int
    shuffle_partitions: int | None
    trigger_interval_seconds: float | None
    max_rows_per_batch: int | None


class LoadView(BaseModel):
    samples: int
    input_rows_per_second: float | None
    processing_rows_per_second: float | None
    capacity_rows_per_second: float | None
    busy_ratio: float | None
    backlog_rows: float | None
    lag_seconds: float | None
    batch_duration_seconds: float | None
    parallelism: int | None


class HistoryEvent(BaseModel):
    at: str
    subject: str
    from_value: int
    to_value: int
    reason: str
    pause_seconds: float | None


class QueryInfo(BaseModel):
    name: str
    status: str = Field(
        description="Now, for a query the daemon hosts (a restart quicker than a tick shows as `rescaling`); "
        "as seen at the last tick otherwise."
    )
    params: Params
    declared: Params | None = Field(
        description="What the query's pipeline declares (what a setting given back returns to); null for a query the daemon does not host."
    )
    min_parallelism: int
    max_parallelism: int
    rescalable: bool
    bounded: bool = Field(
        description="An available_now pipeline: each run processes what is there, commits and finishes; a trigger interval is refused."
    )
    stateful: bool
    state_store: str | None
    restarts: int
    batch_running: bool
    run_started_at: str | None
    last_error: str | None
    target_lag_seconds: float = Field(
        description="The lag this query is scaled to stay under: the SLO (`slo.target_lag`), or two trigger "
        "intervals when its schedule allows no less (a query that keeps up lags up to two triggers)."
    )
    metrics: LoadView | None = Field(description="Evaluated over the metric window at the last tick.")
    pending_request: Params | None = Field(description="Settings an operator asked for, applied at the next batch boundary.")


class QueryDetail(QueryInfo):
    held: list[dict[str, Any]] = Field(description="Changes held or refused at the last tick, with reasons.")
    recent_rescales: list[HistoryEvent]


class ModeView(BaseModel):
    configured: str
    effective: str | None
    reason: str | None
    fallback: bool
    message: str | None


class PolicyView(BaseModel):
    name: str
    params: dict[str, Any] = Field(description="Effective parameters: configuration merged with operator overrides.")
    overrides: dict[str, Any] | None


class Bounds(BaseModel):
    min: int
    max: int
    configured_min: int
    configured_max: int


class ExecutorPodsView(BaseModel):
    pending: int = Field(description="Executor pods in phase Pending.")
    unschedulable: int = Field(description="Pending executor pods the scheduler cannot place (PodScheduled=False, Unschedulable).")
    message: str | None = Field(description="The scheduler's message for one of them, e.g. `0/5 nodes are available: 5 Insufficient cpu.`")


class ExecutorsView(BaseModel):
    alive: int | None
    cores: int | None
    requested: int | None
    pending: int | None
    lost_last_tick: list[str]
    proposed: int | None
    target: int | None
    manual_target: int | None
    pods: ExecutorPodsView | None = Field(
        None, description="On Kubernetes: the executor pods at the last tick, which explain a request that waits; null elsewhere."
    )


class LoopView(BaseModel):
    ticks: int | None
    consecutive_failures: int | None
    errors: dict[str, int]
    last_success_at: str | None
    state_error: str | None = Field(None, description="Why the state store could not be written on the last tick (null: saved).")


class AuditEntryView(BaseModel):
    id: int
    at: str
    last_at: str
    repeats: int
    kind: str
    who: str
    what: str
    reason: str | None
    details: dict[str, Any]


class LastTick(BaseModel):
    at: str
    duration_seconds: float | None
    decision: dict[str, Any]
    proposal_reason: str
    proposal_message: str


class Status(BaseModel):
    application: str
    version: str
    mode: ModeView
    policy: PolicyView
    bounds: Bounds
    executors: ExecutorsView
    paused: bool
    dry_run: bool
    queries: list[QueryInfo]
    last_tick: LastTick | None
    last_decision: AuditEntryView | None = Field(description="The newest audit entry of kind `decision`.")
    loop: LoopView
    control_api_enabled: bool


class ControlView(BaseModel):
    paused: bool
    mode: str | None
    dry_run: bool | None
    min_executors: int | None
    max_executors: int | None
    manual_executors: int | None
    policy_params: dict[str, Any] | None
    query_requests: dict[str, Params]


class ControlStatus(BaseModel):
    overrides: ControlView = Field(description="Operator overrides; null fields follow the configuration.")
    effective: dict[str, Any]


class ChangeResult(BaseModel):
    control: ControlView
    changes: dict[str, Any] = Field(description="What changed: field -> {from, to}. Empty when the request changed nothing.")
    audit_id: int | None
    effective: str = "next tick"


class LogLevelResult(BaseModel):
    changes: dict[str, Any]
    audit_id: int | None


class Decisions(BaseModel):
    entries: list[AuditEntryView]


# --- the app -------------------------------------------------------------------------------------

CONTROL_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or unknown bearer token."},
    403: {"model": ErrorBody, "description": "Control API disabled: no token is configured."},
    422: {"model": ErrorBody, "description": "Invalid change; `loc` names the field. Nothing was applied."},
    503: {
        "model": ErrorBody,
        "description": "Nothing was applied: the daemon is still starting, the state store cannot be written, or the "
        "token file became unreadable or malformed (every change is refused until it is fixed).",
    },
}
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    **CONTROL_ERRORS,
    408: {"model": ErrorBody, "description": f"The body did not all arrive within {MAX_BODY_SECONDS:g} seconds; the rest was not read."},
    413: {"model": ErrorBody, "description": f"The body is longer than {MAX_BODY_BYTES} bytes; it was not read."},
    415: {"model": ErrorBody, "description": "The body is not sent as `Content-Type: application/json`."},
}
QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    **CONTROL_ERRORS,
    404: {"model": ErrorBody, "description": "Unknown query, or no pending request."},
    409: {"model": ErrorBody, "description": "The query cannot take this change (attached, or its checkpoint pins the setting)."},
}


def _error(status: int, loc: list[str | int], msg: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": [{"loc": loc, "msg": msg, "type": kind}]}, status_code=status, headers=headers)


def _query_names(dependant: Any) -> set[str]:
    """The query parameters an endpoint and its dependencies take."""
    return {p.alias for p in dependant.query_params}.union(*(_query_names(d) for d in dependant.dependencies))


def _unknown_query_refuser() -> Callable[[Request], None]:
    """A dependency refusing a query parameter the endpoint does not take, or one given twice, by
    name, as a body's unknown or repeated key is: ``?Limit=1`` was ignored and the default 50
    entries came back, and of ``?limit=5&limit=6`` the last won. Each route's parameters are
    walked once (they are fixed when it is declared), not per request."""
    known_by_route: dict[str, frozenset[str]] = {}  # by APIRoute.unique_id (routes are not hashable)

    def refuse(request: Request) -> None:
        route = request.scope.get("route")
        if not isinstance(route, APIRoute):
            return
        known = known_by_route.get(route.unique_id)
        if known is None:
            known = known_by_route[route.unique_id] = frozenset(_query_names(route.dependant))
        seen: set[str] = set()
        for key, _ in request.query_params.multi_items():
            if key not in known:
                takes = f"it takes {', '.join(sorted(known))}" if known else "it takes none"
                raise _Refused(_error(422, ["query", key], f"unknown query parameter of {request.method} {route.path}; {takes}", "extra_forbidden"))
            if key in seen:
                raise _Refused(_error(422, ["query", key], "given twice", "duplicate_key"))
            seen.add(key)

    return refuse


def _validation_detail(error: Mapping[str, Any], body: Any) -> dict[str, Any]:
    """One of the request's validation errors in the API's shape. A body that is not JSON says
    why and where, as the command line does for a file: FastAPI keeps the parser's reason in
    ``ctx`` and its offset in ``loc`` (``"JSON decode error"`` at ``["body", 1]`` said neither)."""
    loc = list(error.get("loc", ()))
    if error.get("type") == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int) and isinstance(body, (str, bytes)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        where = json.JSONDecodeError(str((error.get("ctx") or {}).get("error") or "not JSON"), text, loc[1])
        return {"loc": ["body"], "msg": f"the body is not valid JSON (line {where.lineno}, column {where.colno}: {where.msg})", "type": "json_invalid"}
    return {"loc": loc, "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


def _resolve(ref: Any) -> Any:
    return ref() if callable(ref) and not isinstance(ref, (Reconciler, ReconcileLoop)) else ref


def _route_path(scope: Scope) -> str:
    """The path routes match: the request's path less the app's ``root_path`` prefix (Starlette
    does the same in ``starlette._utils.get_route_path``, which is private, so not imported)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (path == root or path[len(root)] == "/"):
        return path[len(root):]
    return path


class _ControlRoutes:
    """Which route a request goes to when it is a control route, worked out once from the app's
    routes so that a request is not routed twice (here, then by Starlette).

    Starlette serves a request with the first route whose path and method both match. So, for each
    method some control route takes, the routes taking that method are kept in order with their
    path regex; the first whose path matches is the one Starlette will pick. A request of any other
    method (``GET``: every read and every ``/metrics`` scrape) is told at one look-up.
    """

    def __init__(self, routes: Iterable[BaseRoute], is_control: Callable[[APIRoute], bool]) -> None:
        # (path, methods (None: any), the route if a control one) of every route Starlette tries, in its order
        marked = [(r.path_regex, r.methods, r if isinstance(r, APIRoute) and is_control(r) else None) for r in routes if isinstance(r, Route)]
        methods = {m for _, taken, control in marked if control is not None for m in taken or ()}
        self._by_method: dict[str, tuple[tuple[re.Pattern[str], APIRoute | None], ...]] = {
            method: tuple((path, control) for path, taken, control in marked if not taken or method in taken) for method in methods
        }

    def route(self, scope: Scope) -> APIRoute | None:
        """The route an HTTP request goes to if it is a control route, else None."""
        candidates = self._by_method.get(scope["method"])
        if candidates:
            path = _route_path(scope)
            for path_regex, route in candidates:
                if path_regex.match(path):
                    return route
        return None


class _ControlGate:
    """ASGI middleware in front of the control routes: the token first, then the body within
    ``MAX_BODY_BYTES`` and ``MAX_BODY_SECONDS``, read here and handed on to the route.

    FastAPI reads and parses a route's body before it runs the route's dependencies, the bearer
    check among them: left to it, a client without a token could make the daemon hold a body of
    any size, and would hear about its JSON before its token. FastAPI's own ``max_body_size``
    does not help here: it answers 413 in plain text, ahead of authentication.
    """

    def __init__(self, app: ASGIApp, *, control: _ControlRoutes, authenticate: Callable[[HTTPConnection], Awaitable[str]]) -> None:
        self.app = app
        self.control = control
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.control.route(scope) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        try:
            await self.authenticate(HTTPConnection(scope))
            body = await _read_json_body(scope, _within(MAX_BODY_SECONDS, receive)) if route.body_field is not None else None
        except _Refused as refused:
            await refused.response(scope, receive, send)
            return
        await self.app(scope, receive if body is None else _replay(body, receive), send)


class _SegmentPaths:
    """ASGI middleware: route on the path's segments as the client sent them, so that a query
    name holding "/" (an attached query can have any name; clients send it as %2F) stays one
    segment.

    The server decodes %2F before routing: ``/api/v1/queries/x%2Frequest`` (the query
    ``x/request``) and ``/api/v1/queries/x/request`` (query ``x``'s pending request) would be one
    path. Here each segment is decoded on its own with a "%" or "/" in it kept escaped (``%25``,
    ``%2F``), and ``QueryName`` undoes that; a path with no escape is left as it is. The raw path
    is the one uvicorn (and Starlette's test client) puts in the scope.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%" in raw:
            segments = raw.decode("latin-1").split("/")
            scope = {**scope, "path": "/".join(unquote(s).replace("%", "%25").replace("/", "%2F") for s in segments)}
        await self.app(scope, receive, send)


async def _read_json_body(scope: Scope, receive: Receive) -> bytes:
    """The whole body, refused with 413 once it is longer than ``MAX_BODY_BYTES`` and with 415
    when it is not sent as JSON (FastAPI would read it as text, then say it is not an object)."""
    headers = Headers(scope=scope)
    body = await _read_body(headers, receive)
    content_type = headers.get("content-type")
    if body and not _is_json(content_type):
        given = repr(content_type) if content_type else "no Content-Type"
        raise _Refused(_error(415, ["header", "content-type"], f"the body must be JSON sent as Content-Type: application/json, "
                              f"not {given}", "unsupported_media_type"))
    if body and (twice := _key_given_twice(body)) is not None:
        # JSON parsers keep the last of two equal keys: `{"max_executors": 3, "max_executors": 4}`
        # applied 4 without a word (the configuration file refuses the same)
        raise _Refused(_error(422, ["body", *twice], f"{twice[-1]!r} is given twice in one object", "duplicate_key"))
    return body


class _Object(dict[str, Any]):
    """A JSON object as parsed, with the first key it held twice."""

    twice: str | None = None


def _key_given_twice(body: bytes) -> list[str | int] | None:
    """The path to the first key an object of the JSON ``body`` holds twice (``["policy_params",
    "target_utilization"]``); None also when it is no JSON (FastAPI then says why)."""

    def pairs(items: list[tuple[str, Any]]) -> _Object:
        obj, seen = _Object(items), set()
        for key, _ in items:
            if key in seen and obj.twice is None:
                obj.twice = key
            seen.add(key)
        return obj

    def find(node: Any, path: list[str | int]) -> list[str | int] | None:
        if isinstance(node, _Object) and node.twice is not None:
            return [*path, node.twice]
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        return next((found for key, child in children if (found := find(child, [*path, key])) is not None), None)

    try:
        return find(json.loads(body, object_pairs_hook=pairs), [])
    except (ValueError, RecursionError):
        return None


def _is_json(content_type: str | None) -> bool:
    """The media types FastAPI parses as JSON: application/json and application/*+json, any parameters."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def _read_body(headers: Headers, receive: Receive) -> bytes:
    """The whole body, refused with 413 once it is longer than ``MAX_BODY_BYTES``: at once when
    its Content-Length says so, else (chunked) as soon as one byte too many has arrived."""
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise _Refused(_too_large(f"the body is {int(length)} bytes, more than"))
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break  # the client went away: the route sees an incomplete body and answers no one
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _Refused(_too_large("the body is more than"))
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _too_large(what: str) -> JSONResponse:
    return _error(413, ["body"], f"{what} the {MAX_BODY_BYTES} bytes a control request may have", "body_too_large",
                  {"Connection": "close"})  # the rest of the body is not read: the connection cannot be reused


def _within(limit: float, receive: Receive) -> Receive:
    """A ``receive`` refused with 408 once ``limit`` seconds have passed since it was made: a
    deadline for the whole body, not for each read. What has already arrived is still taken."""
    deadline = asyncio.get_running_loop().time() + limit

    async def timed() -> Message:
        try:
            async with asyncio.timeout_at(deadline):
                return await receive()
        except TimeoutError:
            raise _Refused(_error(408, ["body"], f"the body did not all arrive within the {limit:g} seconds a control request may take",
                                  "body_timeout", {"Connection": "close"})) from None  # the rest is not read

    return timed


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then what the client sends next (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def create_app(
    *,
    reconciler: Ref[Reconciler],
    registry: CollectorRegistry,
    auth: ApiAuth,
    loop: Ref[ReconcileLoop] = None,
    metrics: Any = None,
    clock: Clock | None = None,
    application: str = "spark-autoscaler",
    stopping: Callable[[], bool] = lambda: False,
    live_status: Callable[[], Mapping[str, QueryStatus]] | None = None,
) -> FastAPI:
    """``reconciler`` and ``loop`` may be callables: the daemon serves health and metrics while
    it is still starting Spark, before they exist. ``live_status`` gives the hosted queries'
    status now; the rest of a query's view is the last tick's."""
    clock = clock or SystemClock()
    app = FastAPI(
        title="spark-autoscaler",
        version=__version__,
        description="Observe and steer the elastic scaling daemon for Spark Structured Streaming. "
        "Control endpoints need `Authorization: Bearer <token>`; changes take effect on the next tick.",
        dependencies=[Depends(_unknown_query_refuser())],
    )
    bearer = HTTPBearer(auto_error=False, description="A token from `http.token_file` or `$SPARK_AUTOSCALER_API_TOKEN`.")

    def get_reconciler() -> Reconciler:
        rec = _resolve(reconciler)
        if rec is None:
            raise _Refused(_error(503, [], "the daemon is still starting; retry shortly", "unavailable"))
        return rec

    def get_loop() -> ReconcileLoop | None:
        return _resolve(loop)

    def statuses_now() -> Mapping[str, QueryStatus]:
        return live_status() if live_status is not None else {}

    def operator(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        """Who sends this control request; refused (503, 403 or 401) when it cannot be told."""
        if (problem := auth.check()) is not None:
            # fail closed: until the token file is good again no change is accepted (the bad
            # rotation may have been meant to revoke the very token presented)
            raise _Refused(_error(503, ["header", "authorization"], f"control refused: {problem}; fix the file to resume", "token_file_invalid"))
        if not auth.enabled:
            raise _Refused(
                _error(403, ["header", "authorization"], "control API disabled: configure a token (http.token_file or "
                       "$SPARK_AUTOSCALER_API_TOKEN) to enable it", "disabled")
            )
        who = auth.identify(credentials.credentials if credentials else None)
        if who is None:
            raise _Refused(
                _error(401, ["header", "authorization"], "missing or unknown bearer token", "unauthorized", {"WWW-Authenticate": "Bearer"})
            )
        return who

    who_dep = Depends(operator)

    @app.exception_handler(_Refused)
    async def refused(_: Request, exc: _Refused) -> JSONResponse:
        return exc.response

    @app.exception_handler(ChangeError)
    async def change_error(_: Request, exc: ChangeError) -> JSONResponse:
        detail = []
        for field, message in exc.problems:
            loc: list[str | int] = ["path", "name"] if field == "name" else (["body"] if field == "body" else ["body", *field.split(".")])
            detail.append({"loc": loc, "msg": message, "type": {404: "not_found", 409: "conflict"}.get(exc.status, "value_error")})
        return JSONResponse({"detail": detail}, status_code=exc.status)

    @app.exception_handler(StateStoreError)
    async def unsaved(_: Request, exc: StateStoreError) -> JSONResponse:
        # the change is saved before it is applied (a restart must not forget it): not applied
        return _error(503, [], f"the change was not applied: {exc}", "state_not_saved")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Framework errors in the same shape; 405 lists every method of the path; unparseable body is a 422."""
        if exc.status_code == 405:
            methods = sorted({m for route in app.routes if isinstance(route, APIRoute) and route.matches(request.scope)[0] != Match.NONE
                              for m in route.methods or ()})
            return _error(405, [], f"method {request.method} not allowed", "method_not_allowed", {"Allow": ", ".join(methods)})
        if exc.status_code == 400 and "parsing the body" in str(exc.detail):
            return _error(422, ["body"], "the body is not valid JSON", "json_invalid")
        return _error(exc.status_code, [], str(exc.detail), "http_error", dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": [_validation_detail(e, exc.body) for e in exc.errors()]}, status_code=422)

    def commands(rec: Reconciler) -> Commands:
        return Commands(rec, clock=clock, metrics=metrics)

    # --- health -----------------------------------------------------------------------------

    @app.get("/healthz", response_model=Health, tags=["health"], summary="Liveness: the process serves requests")
    def healthz() -> Health:
        return Health(status="ok")

    @app.get(
        "/readyz",
        response_model=Readiness,
        tags=["health"],
        summary="Readiness: the reconcile loop ticks",
        responses={503: {"model": Readiness, "description": "Starting, stopping, or no successful tick recently."}},
    )
    def readyz() -> Any:
        reason = _not_ready(_resolve(reconciler), get_loop(), clock, stopping())
        if reason is not None:
            return JSONResponse(Readiness(status="not ready", reason=reason).model_dump(), status_code=503)
        return Readiness(status="ready")

    @app.get("/metrics", include_in_schema=False)
    def metrics_endpoint() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_PLAIN_0_0_4)  # every Prometheus 2.x and 3.x reads it

    # --- read ---------------------------------------------------------------------------------

    @app.get("/api/v1/status", response_model=Status, tags=["read"], responses={503: {"model": ErrorBody}},
             summary="Mode and why, policy, bounds, executors, queries with their metrics, last decision")
    def status() -> Status:
        rec = get_reconciler()
        return _status(rec, get_loop(), application, auth.enabled, statuses_now())

    @app.get("/api/v1/control", response_model=ControlStatus, tags=["read"], responses={503: {"model": ErrorBody}},
             summary="Operator overrides and the effective values")
    def control_status() -> ControlStatus:
        rec = get_reconciler()
        lo, hi = rec.bounds()
        return ControlStatus(
            overrides=_control_view(rec),
            effective={"paused": rec.control.paused, "mode": rec.configured_mode().value, "dry_run": rec.dry_run(),
                       "min_executors": lo, "max_executors": hi},
        )

    @app.get("/api/v1/decisions", response_model=Decisions, tags=["read"], responses={503: {"model": ErrorBody}},
             summary="The audit trail, newest first")
    def decisions(
        limit: Annotated[int, Query(ge=1, le=1000, description="Most entries to return.")] = 50,
        kind: Annotated[Literal["decision", "operator", "event"] | None, Query(description=f"Only entries of this kind ({', '.join(KINDS)}).")] = None,
    ) -> Decisions:
        rec = get_reconciler()
        return Decisions(entries=[_entry_view(e) for e in rec.audit.entries(limit, kind)])

    @app.get("/api/v1/queries", response_model=list[QueryInfo], tags=["read"], responses={503: {"model": ErrorBody}},
             summary="Every query with its metrics")
    def queries() -> list[QueryInfo]:
        return _queries(get_reconciler(), statuses_now())

    @app.get("/api/v1/queries/{name}", response_model=QueryDetail, tags=["read"],
             responses={404: {"model": ErrorBody}, 503: {"model": ErrorBody}}, summary="One query: settings, metrics, held changes, rescales")
    def query(name: QueryName) -> QueryDetail:
        rec = get_reconciler()
        info = next((q for q in _queries(rec, statuses_now()) if q.name == name), None)
        if info is None:
            raise _Refused(_error(404, ["path", "name"], f"unknown query {name!r}", "not_found"))
        last = rec.last
        held = [
            {"reason": r.reason.value, "message": r.message, "wanted": r.wanted.to_json()}
            for r in (last.plan.refusals if last else ())
            if r.name == name
        ]
        events = [
            HistoryEvent(at=iso(e.at) or "", subject=e.subject, from_value=e.from_value, to_value=e.to_value,
                         reason=e.reason.value, pause_seconds=seconds(e.pause))
            for e in rec.history.events
            if e.subject == name
        ][-20:]
        return QueryDetail(**info.model_dump(), held=held, recent_rescales=events)

    # --- control --------------------------------------------------------------------------------

    def result(rec: Reconciler, applied: Applied) -> ChangeResult:
        return ChangeResult(control=_control_view(rec), changes=dict(applied.changes), audit_id=applied.entry.id if applied.entry else None)

    @app.patch("/api/v1/control", response_model=ChangeResult, tags=["control"], responses=BODY_ERRORS,
               summary="Change mode, bounds, policy parameters, dry run, pause or the manual executor target, atomically")
    def patch_control(body: ControlPatch, who: str = who_dep) -> ChangeResult:
        rec = get_reconciler()
        changes = {k: getattr(body, k) for k in body.model_fields_set if k != "note"}
        return result(rec, commands(rec).change_control(who, changes, body.note))

    @app.post("/api/v1/control/pause", response_model=ChangeResult, tags=["control"], responses=BODY_ERRORS,
              summary="Pause scaling: keep deciding and reporting, stop acting")
    def pause(body: NoteBody | None = None, who: str = who_dep) -> ChangeResult:
        rec = get_reconciler()
        return result(rec, commands(rec).change_control(who, {"paused": True}, body.note if body else None))

    @app.post("/api/v1/control/resume", response_model=ChangeResult, tags=["control"], responses=BODY_ERRORS,
              summary="Resume scaling")
    def resume(body: NoteBody | None = None, who: str = who_dep) -> ChangeResult:
        rec = get_reconciler()
        return result(rec, commands(rec).change_control(who, {"paused": False}, body.note if body else None))

    @app.patch("/api/v1/queries/{name}", response_model=ChangeResult, tags=["control"], responses={**QUERY_ERRORS, **BODY_ERRORS},
               summary="Request new query settings (partitions, rate limit, trigger), applied by a restart from the checkpoint")
    def patch_query(name: QueryName, body: QueryPatch, who: str = who_dep) -> ChangeResult:
        rec = get_reconciler()
        fields = {k: getattr(body, k) for k in body.model_fields_set if k != "note"}
        return result(rec, commands(rec).request_query(who, name, fields, body.note))

    @app.delete("/api/v1/queries/{name}/request", response_model=ChangeResult, tags=["control"], responses=QUERY_ERRORS,
                summary="Withdraw a pending query request")
    def cancel_query_request(name: QueryName, who: str = who_dep) -> ChangeResult:
        rec = get_reconciler()
        return result(rec, commands(rec).cancel_query_request(who, name))

    @app.put("/api/v1/log-level", response_model=LogLevelResult, tags=["control"], responses=BODY_ERRORS,
             summary="Change a logger's level at once")
    def log_level(body: LogLevelBody, who: str = who_dep) -> LogLevelResult:
        rec = get_reconciler()
        applied = commands(rec).set_log_level(who, body.level, body.logger, body.note)
        return LogLevelResult(changes=dict(applied.changes), audit_id=applied.entry.id if applied.entry else None)

    answer_head(app)

    # the gate, added once every route is: a control route is one that needs the token
    def is_control(route: APIRoute) -> bool:
        return any(dep.call is operator for dep in route.dependant.dependencies)

    async def authenticate(connection: HTTPConnection) -> str:
        return operator(await bearer(connection))

    app.add_middleware(_ControlGate, control=_ControlRoutes(app.router.routes, is_control), authenticate=authenticate)
    app.add_middleware(_SegmentPaths)  # the last added runs first: the gate matches routes on its paths
    return app


# --- views ---------------------------------------------------------------------------------------


def _not_ready(rec: Reconciler | None, loop: ReconcileLoop | None, clock: Clock, stopping: bool) -> str | None:
    if stopping:
        return "stopping"
    if rec is None:
        return "starting: the reconciler is not running yet"
    interval = rec.settings.reconcile_interval
    stale_after = max(3 * interval, timedelta(seconds=30))
    last_ok = loop.last_success_at if loop is not None else (rec.last.at if rec.last else None)
    if last_ok is None:
        return "no successful reconcile tick yet"
    age = clock.now() - last_ok
    if age > stale_after:
        return f"last successful reconcile tick {age.total_seconds():.0f}s ago (more than {stale_after.total_seconds():.0f}s)"
    return None


def _entry_view(e: AuditEntry) -> AuditEntryView:
    return AuditEntryView(**e.to_json())


def _control_view(rec: Reconciler) -> ControlView:
    c = rec.control
    return ControlView(
        paused=c.paused,
        mode=c.mode.value if c.mode else None,
        dry_run=c.dry_run,
        min_executors=c.min_executors,
        max_executors=c.max_executors,
        manual_executors=c.manual_executors,
        policy_params=dict(c.policy_params) if c.policy_params is not None else None,
        query_requests={n: Params.model_validate(p.to_json()) for n, p in c.query_requests.items()},
    )


def _queries(rec: Reconciler, statuses_now: Mapping[str, QueryStatus]) -> list[QueryInfo]:
    last = rec.last
    snap = rec.last_snapshot
    views: list[QueryView] = list(last.queries) if last else list(snap.queries if snap else ())
    loads = {ld.name: ld for ld in (last.loads if last else ())}
    cores = last.executors_cores if last else 0
    out = []
    for v in views:
        load = loads.get(v.name)
        pending = rec.control.query_requests.get(v.name)
        out.append(
            QueryInfo(
                **{**query_view_json(v), "status": statuses_now.get(v.name, v.status).value},
                target_lag_seconds=judged_lag(rec.settings.slo.target_lag, v.params.trigger_interval).total_seconds(),
                metrics=LoadView(**load_json(load, cores)) if load else None,
                pending_request=Params.model_validate(pending.to_json()) if pending else None,
            )
        )
    return out


def _status(
    rec: Reconciler, loop: ReconcileLoop | None, application: str, control_enabled: bool, statuses_now: Mapping[str, QueryStatus]
) -> Status:
    last = rec.last
    lo, hi = rec.bounds()
    e = rec.settings.executors
    overrides = dict(rec.control.policy_params) if rec.control.policy_params is not None else None
    decisions = rec.audit.entries(1, "decision")
    d = last.decision if last else None
    return Status(
        application=application,
        version=__version__,
        mode=ModeView(
            configured=rec.configured_mode().value,
            effective=last.mode.mode.value if last else None,
            reason=last.mode.reason.value if last else None,
            fallback=last.mode.fallback if last else False,
            message=last.mode.message if last else None,
        ),
        policy=PolicyView(name=rec.settings.policy.name, params=_policy_params(rec), overrides=overrides),
        bounds=Bounds(min=lo, max=hi, configured_min=e.min, configured_max=e.max),
        executors=ExecutorsView(
            alive=last.executors_alive if last else None,
            cores=last.executors_cores if last else None,
            requested=last.executors_requested if last else None,
            pending=last.executors_pending if last else None,
            lost_last_tick=list(last.executors_lost) if last else [],
            proposed=last.proposal.executors if last else None,
            target=d.target if d else None,
            manual_target=rec.control.manual_executors,
            pods=ExecutorPodsView(**pods) if last and (pods := executor_pods_json(last.executor_pods)) else None,
        ),
        paused=rec.control.paused,
        dry_run=rec.dry_run(),
        queries=_queries(rec, statuses_now),
        last_tick=LastTick(
            at=iso(last.at) or "",
            duration_seconds=seconds(last.duration),
            decision=decision_json(last.decision),
            proposal_reason=last.proposal.reason.value,
            proposal_message=last.proposal.message,
        )
        if last
        else None,
        last_decision=_entry_view(decisions[0]) if decisions else None,
        loop=LoopView(
            ticks=loop.ticks if loop else None,
            consecutive_failures=loop.consecutive_failures if loop else None,
            errors=dict(loop.errors) if loop else {},
            last_success_at=iso(loop.last_success_at) if loop else None,
            state_error=rec.state_error,
        ),
        control_api_enabled=control_enabled,
    )


def _policy_params(rec: Reconciler) -> dict[str, Any]:
    params = getattr(rec.policy, "p", None) or getattr(rec.policy, "params", None)
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json")
    return {**rec.settings.policy.params, **(rec.control.policy_params or {})}

