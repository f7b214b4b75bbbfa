"""The REST API on a live loopback server over the real reconciler and the fake cluster."""

from __future__ import annotations

import http.client
import json
import logging
import select
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from autoscaler.core.model import Mode, QueryStatus, Reason
from autoscaler.ops import api
from autoscaler.ops.api import MAX_BODY_BYTES
from autoscaler.ops.auth import ApiAuth, TokenFileError, parse_tokens
from tests.fakes import query_view
from tests.harness import APP, TOKEN, build, serve


@pytest.fixture
def d():
    yield from serve(build())


def loc(response) -> list:
    return [tuple(p["loc"]) for p in response.json()["detail"]]


def send_part(d, method: str, path: str, headers: dict[str, str], body: bytes = b"", chunks: tuple[bytes, ...] = ()) -> tuple[int, dict]:
    """Send the headers and only part of a body, then read the answer: an answer that waits for
    the whole body never comes (the socket times out)."""
    url = urllib.parse.urlsplit(d.server.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    try:
        conn.putrequest(method, path)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders(body or None)
        for chunk in chunks:
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def start_request(d, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> socket.socket:
    """A raw connection that has sent the request's headers and ``body`` (a part of it, or none) and waits."""
    url = urllib.parse.urlsplit(d.server.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=5)
    head = "".join(f"{name}: {value}\r\n" for name, value in {"Host": url.netloc, **headers}.items())
    sock.sendall(f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode() + body)
    return sock


def answered(sock: socket.socket, within: float = 0.0) -> bool:
    return bool(select.select([sock], [], [], within)[0])


def answer(sock: socket.socket) -> tuple[int, dict]:
    """Read the answer on a connection from ``start_request`` (waiting at most its 5 s timeout), and close it."""
    with sock:
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


# --- health ----------------------------------------------------------------------------------------


def test_healthz_is_always_ok(d):
    assert d.client.get("/healthz").json() == {"status": "ok"}


def test_readyz_waits_for_a_successful_tick_and_fails_when_ticks_stop(d):
    r = d.client.get("/readyz")
    assert r.status_code == 503 and r.json()["reason"] == "no successful reconcile tick yet"
    d.tick()
    assert d.client.get("/readyz").json() == {"status": "ready", "reason": None}
    d.clock.advance(31)  # max(3 x 5 s, 30 s) without a successful tick
    r = d.client.get("/readyz")
    assert r.status_code == 503 and "last successful reconcile tick 31s ago" in r.json()["reason"]


def test_a_daemon_still_starting_serves_health_and_metrics_but_not_status():
    import httpx
    from prometheus_client import CollectorRegistry

    from autoscaler.ops.api import create_app
    from autoscaler.ops.server import HttpServer

    app = create_app(reconciler=lambda: None, registry=CollectorRegistry(), auth=ApiAuth.disabled())
    with HttpServer(app, "127.0.0.1", 0) as server, httpx.Client(base_url=server.url) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").json()["reason"].startswith("starting")
        assert client.get("/metrics").status_code == 200
        r = client.get("/api/v1/status")
        assert r.status_code == 503 and "still starting" in r.json()["detail"][0]["msg"]


def test_metrics_are_served_in_the_text_format(d):
    d.run_for(30, rate=400)
    r = d.client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert f'spark_autoscaler_query_input_rows_per_second{{application="{APP}",query="q"}}' in r.text


# --- read ------------------------------------------------------------------------------------------


def test_status_shows_mode_and_why_policy_bounds_executors_queries_and_the_last_decision(d):
    d.run_for(60, rate=2500)
    s = d.client.get("/api/v1/status").json()
    assert s["application"] == APP
    assert s["mode"] == {"configured": "auto", "effective": "active", "reason": "CanRequestExecutors", "fallback": False,
                         "message": "requesting executors from the cluster manager"}
    assert s["policy"]["name"] == "target-utilization" and s["policy"]["params"]["target_utilization"] == 0.7
    assert s["bounds"] == {"min": 1, "max": 6, "configured_min": 1, "configured_max": 6}
    assert s["executors"]["alive"] == 4 and s["executors"]["target"] == 4
    [q] = s["queries"]
    assert q["name"] == "q" and q["status"] == "running" and q["params"]["parallelism"] == 8
    assert q["metrics"]["input_rows_per_second"] == pytest.approx(2500, rel=0.1)
    assert q["metrics"]["lag_seconds"] is not None and q["metrics"]["capacity_rows_per_second"] > 2500
    assert s["last_decision"]["reason"] == Reason.SCALE_UP_FOR_LOAD.value
    assert s["paused"] is False and s["dry_run"] is False and s["control_api_enabled"] is True
    assert s["loop"]["ticks"] == 12 and s["loop"]["errors"] == {}


def test_decisions_are_the_audit_trail_newest_first(d):
    d.run_for(60, rate=2500)
    d.client.post("/api/v1/control/pause", headers=d.auth_header)
    entries = d.client.get("/api/v1/decisions", params={"limit": 2}).json()["entries"]
    assert len(entries) == 2 and entries[0]["id"] > entries[1]["id"]
    assert entries[0]["kind"] == "operator" and entries[0]["who"] == "alice" and entries[0]["what"] == "paused: false -> true"
    only = d.client.get("/api/v1/decisions", params={"kind": "decision"}).json()["entries"]
    assert only and all(e["kind"] == "decision" for e in only)
    first = only[-1]
    assert {"inputs", "proposal", "decision", "plan", "results"} <= set(first["details"])


@pytest.mark.parametrize("params, field", [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"kind": "gossip"}, "kind")])
def test_bad_decision_queries_name_the_parameter(d, params, field):
    r = d.client.get("/api/v1/decisions", params=params)
    assert r.status_code == 422 and ("query", field) in loc(r)


@pytest.mark.parametrize(
    "path, query, field, message",
    [
        # the default 50 entries came back, the misspelt limit ignored
        ("/api/v1/decisions", "Limit=1", "Limit", "unknown query parameter of GET /api/v1/decisions; it takes kind, limit"),
        ("/api/v1/status", "limit=abc", "limit", "unknown query parameter of GET /api/v1/status; it takes none"),
        # the last of two won
        ("/api/v1/decisions", "limit=5&limit=6", "limit", "given twice"),
    ],
)
def test_an_unknown_or_repeated_query_parameter_is_a_422_naming_it(d, path, query, field, message):
    r = d.client.get(f"{path}?{query}")
    assert r.status_code == 422 and r.json()["detail"] == [{"loc": ["query", field], "msg": message, "type": r.json()["detail"][0]["type"]}], r.text
    assert d.client.get("/api/v1/decisions?limit=2&kind=decision").status_code == 200


def test_query_detail_and_unknown_query(d):
    d.run_for(30, rate=400)
    q = d.client.get("/api/v1/queries/q").json()
    assert q["metrics"]["samples"] > 0 and q["held"] == [] and q["pending_request"] is None and q["bounded"] is False
    r = d.client.get("/api/v1/queries/nope")
    assert r.status_code == 404 and loc(r) == [("path", "name")]
    assert [x["name"] for x in d.client.get("/api/v1/queries").json()] == ["q"]


def test_a_hosted_query_shows_its_status_now_not_the_last_ticks():
    # a restart from the checkpoint can begin and end between two ticks: the query host's
    # status, read at the request, shows it; the rest of the view stays the last tick's
    now: dict[str, QueryStatus] = {}
    for d in serve(build(), live_status=lambda: dict(now)):
        d.run_for(30, rate=400)
        assert d.client.get("/api/v1/queries/q").json()["status"] == "running"
        now["q"] = QueryStatus.RESCALING
        assert d.client.get("/api/v1/queries/q").json()["status"] == "rescaling"
        assert [q["status"] for q in d.client.get("/api/v1/queries").json()] == ["rescaling"]
        assert [q["status"] for q in d.client.get("/api/v1/status").json()["queries"]] == ["rescaling"]
        assert d.client.get("/api/v1/queries/q").json()["metrics"]["samples"] > 0


# --- auth ------------------------------------------------------------------------------------------


def test_control_is_disabled_not_open_without_a_configured_token():
    for d in serve(build(), auth=ApiAuth.disabled()):
        r = d.client.post("/api/v1/control/pause", headers=d.auth_header)
        assert r.status_code == 403 and "control API disabled" in r.json()["detail"][0]["msg"]
        assert d.reconciler.control.paused is False
        assert d.client.get("/api/v1/status").json()["control_api_enabled"] is False


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-header"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong-token"),
        pytest.param({"Authorization": f"Basic {TOKEN}"}, id="wrong-scheme"),
        pytest.param({"Authorization": f"Bearer {TOKEN}x"}, id="token-prefix"),
    ],
)
def test_a_missing_or_wrong_token_is_refused(d, headers):
    r = d.client.patch("/api/v1/control", json={"paused": True}, headers=headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert loc(r) == [("header", "authorization")]
    assert d.reconciler.control.paused is False


def test_an_unauthenticated_change_is_refused_before_its_body_is_read(d):
    # 100 MiB announced, 10 bytes sent: the 401 comes without waiting for (or holding) the rest
    status, body = send_part(d, "PATCH", "/api/v1/control", {"Content-Type": "application/json", "Content-Length": str(100 << 20)},
                             b'{"note":"x')
    assert status == 401 and body["detail"][0]["loc"] == ["header", "authorization"]


@pytest.mark.parametrize(
    "content, content_type",
    [
        pytest.param(b'{"paused": tru', "application/json", id="malformed-json"),
        pytest.param(b'{"paused": true}', "text/plain", id="not-json"),
        pytest.param(b"x" * (MAX_BODY_BYTES + 1), "application/json", id="over-the-limit"),
    ],
)
def test_an_unauthenticated_change_hears_401_whatever_its_body(d, content, content_type):
    r = d.client.patch("/api/v1/control", content=content, headers={"Content-Type": content_type})
    assert r.status_code == 401 and loc(r) == [("header", "authorization")]


def test_the_token_file_names_who_changed_what(tmp_path: Path):
    tokens = tmp_path / "tokens"
    tokens.write_text("# operators\nbob-token-1234567890 \ncarol carol-token-0987654321\n")
    auth = ApiAuth.from_settings(tokens, "UNUSED_ENV", environ={})
    for d in serve(build(), auth=auth):
        d.client.post("/api/v1/control/pause", headers={"Authorization": "Bearer carol-token-0987654321"})
        d.client.post("/api/v1/control/resume", headers={"Authorization": "Bearer bob-token-1234567890"})
        who = [e["who"] for e in d.client.get("/api/v1/decisions").json()["entries"]]
        assert who == ["operator", "carol"]
        tokens.write_text("dave dave-token-1111111111\n")  # rotated: takes effect without a restart
        assert d.client.post("/api/v1/control/pause", headers={"Authorization": "Bearer carol-token-0987654321"}).status_code == 401


@pytest.mark.parametrize(
    "rotated",
    [
        pytest.param(b"dave dave-token-1111111111 extra-word\n", id="malformed-line"),
        pytest.param(b"\xca\xfe\xba\xbe\xca\xfe", id="not-text"),
    ],
)
def test_a_token_file_rotated_into_garbage_fails_closed_and_says_so(tmp_path: Path, rotated):
    tokens = tmp_path / "tokens"
    tokens.write_text("carol carol-token-0987654321\n")
    told: list[str | None] = []
    auth = ApiAuth.from_settings(tokens, "UNUSED_ENV", environ={})
    auth.on_problem = told.append
    assert auth.identify("carol-token-0987654321") == "carol"
    tokens.write_bytes(rotated)  # the rotation that was meant to revoke carol went wrong
    assert auth.identify("carol-token-0987654321") is None  # her old token stops working at once
    assert auth.check() is not None and "token file" in auth.check() and told == [auth.problem]
    for d in serve(build(), auth=auth):
        r = d.client.post("/api/v1/control/pause", headers={"Authorization": "Bearer carol-token-0987654321"})
        assert r.status_code == 503 and r.json()["detail"][0]["type"] == "token_file_invalid"
        assert "fix the file" in r.json()["detail"][0]["msg"] and d.reconciler.control.paused is False
        tokens.write_text("dave dave-token-1111111111\n")  # fixed: the new tokens work, the problem is gone
        assert d.client.post("/api/v1/control/pause", headers={"Authorization": "Bearer dave-token-1111111111"}).status_code == 200
        assert auth.problem is None and told[-1] is None


def test_a_bad_token_file_is_logged_and_counted_where_the_daemon_serves_it(tmp_path: Path, restore_logging):
    from prometheus_client import CollectorRegistry

    from autoscaler.core.settings import Settings
    from autoscaler.ops.metrics import Metrics
    from autoscaler.ops.server import serve_daemon

    tokens = tmp_path / "tokens"
    tokens.write_text("carol carol-token-0987654321\n")
    metrics = Metrics(CollectorRegistry(), application="x")
    settings = Settings.model_validate({"http": {"port": 0, "token_file": str(tokens), "token_env": "UNUSED_ENV"}})
    server = serve_daemon(settings, reconciler=lambda: None, loop=lambda: None, registry=metrics.registry, metrics=metrics,
                          clock=None, application="x")
    try:
        value = metrics.registry.get_sample_value
        assert value("spark_autoscaler_token_file_valid", {"application": "x"}) == 1
        tokens.write_text("one two three four\n")
        import httpx
        import structlog

        with structlog.testing.capture_logs() as logs:
            r = httpx.post(f"{server.url}/api/v1/control/pause", headers={"Authorization": "Bearer carol-token-0987654321"})
        assert r.status_code == 503 and r.json()["detail"][0]["type"] == "token_file_invalid"
        [logged] = [e for e in logs if e["event"] == "token_file_invalid"]
        assert logged["log_level"] == "error" and str(tokens) in logged["error"], logged
        assert value("spark_autoscaler_token_file_valid", {"application": "x"}) == 0
        assert value("spark_autoscaler_token_file_errors_total", {"application": "x"}) == 1
    finally:
        server.stop()


def test_a_token_is_compared_with_every_known_one_in_constant_time(monkeypatch):
    # no early exit on a match, no == on the secret: what a guess costs does not tell how close it was
    from autoscaler.ops import auth as auth_module

    compared = []

    def compare(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return a == b

    monkeypatch.setattr(auth_module.hmac, "compare_digest", compare)
    auth = ApiAuth(static={"first-token-123456": "a", "second-token-123456": "b"})
    assert auth.identify("first-token-123456") == "a" and len(compared) == 2
    compared.clear()
    assert auth.identify("wrong-token-1234567") is None and sorted(compared) == [b"first-token-123456", b"second-token-123456"]


def test_the_environment_token_is_an_operator():
    auth = ApiAuth.from_settings(None, "MY_TOKEN", environ={"MY_TOKEN": " envtoken-123 \n"})
    assert auth.identify("envtoken-123") == "operator" and auth.identify("other") is None


def test_a_malformed_token_file_names_the_line():
    with pytest.raises(TokenFileError, match="line 2"):
        parse_tokens("ok-token\na b c\n", "tokens")


# --- control ---------------------------------------------------------------------------------------


def test_pause_stops_actions_on_the_next_tick_and_resume_restarts_them(d):
    d.tick(400)
    assert d.client.post("/api/v1/control/pause", json={"note": "maintenance"}, headers=d.auth_header).json()["effective"] == "next tick"
    calls = len(d.cluster.calls)
    records = d.run_for(30, rate=2500)
    assert all(r.paused and r.results == () for r in records) and len(d.cluster.calls) == calls
    assert len(d.cluster.alive) == 1
    d.client.post("/api/v1/control/resume", headers=d.auth_header)
    r = d.tick(2500)
    assert not r.paused and r.results and len(d.cluster.calls) > calls
    entry = d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"][1]
    assert entry["details"]["note"] == "maintenance"


def test_a_mode_switch_takes_effect_on_the_next_tick(d):
    d.tick(400)
    assert d.reconciler.last.mode.mode == Mode.ACTIVE
    r = d.client.patch("/api/v1/control", json={"mode": "reactive"}, headers=d.auth_header)
    assert r.status_code == 200 and r.json()["changes"] == {"mode": {"from": None, "to": "reactive"}}
    record = d.tick(400)
    assert record.mode.mode == Mode.REACTIVE and record.mode.reason == Reason.MODE_CONFIGURED
    assert d.client.get("/api/v1/status").json()["mode"]["configured"] == "reactive"


def test_a_manual_target_and_bounds_take_effect_on_the_next_tick(d):
    d.tick(400)
    r = d.client.patch("/api/v1/control", json={"max_executors": 3, "manual_executors": 3}, headers=d.auth_header)
    assert r.status_code == 200, r.text
    record = d.tick(400)
    assert (record.decision.target, record.decision.reason) == (3, Reason.MANUAL_TARGET)
    d.run_for(10, rate=400)
    assert len(d.cluster.alive) == 3
    d.client.patch("/api/v1/control", json={"manual_executors": None}, headers=d.auth_header)
    assert d.tick(400).decision.reason != Reason.MANUAL_TARGET


def test_dry_run_recommends_without_acting(d):
    d.tick(400)
    d.client.patch("/api/v1/control", json={"dry_run": True, "manual_executors": 4}, headers=d.auth_header)
    record = d.tick(400)
    assert record.dry_run and record.decision.target == 4 and record.results == ()
    assert d.client.get("/metrics").text.count('spark_autoscaler_dry_run{application="harness"} 1.0') == 1


def test_policy_parameters_change_without_a_restart(d):
    r = d.client.patch("/api/v1/control", json={"policy_params": {"target_utilization": 0.5}}, headers=d.auth_header)
    assert r.status_code == 200
    assert d.client.get("/api/v1/status").json()["policy"]["params"]["target_utilization"] == 0.5


def test_empty_policy_parameters_are_no_override(d):
    """``{}`` overrides nothing: the state null gives, so no change is recorded where there was none."""
    r = d.client.patch("/api/v1/control", json={"policy_params": {}}, headers=d.auth_header)
    assert r.status_code == 200 and r.json()["changes"] == {}, r.text
    assert d.client.get("/api/v1/decisions?kind=operator").json()["entries"] == []
    d.client.patch("/api/v1/control", json={"policy_params": {"target_utilization": 0.5}}, headers=d.auth_header)
    r = d.client.patch("/api/v1/control", json={"policy_params": {}}, headers=d.auth_header)
    assert r.json()["changes"] == {"policy_params": {"from": {"target_utilization": 0.5}, "to": None}}, r.text
    assert d.client.get("/api/v1/control").json()["overrides"]["policy_params"] is None


@pytest.mark.parametrize(
    "body, where",
    [
        pytest.param({"paused": True, "min_executors": 9}, ("body", "min_executors"), id="min-above-max"),
        pytest.param({"paused": True, "max_executors": 0}, ("body", "max_executors"), id="max-zero"),
        pytest.param({"paused": True, "speed": 11}, ("body", "speed"), id="unknown-field"),
        pytest.param({"paused": True, "min_executors": "2"}, ("body", "min_executors"), id="string-number"),
        pytest.param({"paused": "yes"}, ("body", "paused"), id="string-bool"),
        pytest.param({"paused": True, "mode": "turbo"}, ("body", "mode"), id="bad-mode"),
        pytest.param({"paused": True, "manual_executors": 50}, ("body", "manual_executors"), id="manual-outside-bounds"),
        pytest.param({"paused": True, "policy_params": {"target_utilization": 7}}, ("body", "policy_params"), id="bad-policy-param"),
        # a boolean where a number is declared was taken for 1.0 (and the raw true kept)
        pytest.param({"paused": True, "policy_params": {"target_utilization": True}}, ("body", "policy_params"), id="boolean-policy-param"),
        pytest.param({"note": "only a note"}, ("body",), id="nothing-to-change"),
        pytest.param([1, 2], ("body",), id="not-an-object"),
    ],
)
def test_an_invalid_control_change_is_a_422_naming_the_field_and_nothing_is_applied(d, body, where):
    r = d.client.patch("/api/v1/control", json=body, headers=d.auth_header)
    assert r.status_code == 422, r.text
    assert where in loc(r)
    assert d.reconciler.control.paused is False
    assert d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] == []


@pytest.mark.parametrize(
    "body, message",
    [
        # the usual slip of shell quoting; said before only "JSON decode error" at ["body", 1]
        pytest.param(b"{'dry_run': true}", "the body is not valid JSON (line 1, column 2: Expecting property name enclosed in double quotes)", id="single-quotes"),
        pytest.param(b'{"dry_run": true,\n}', "the body is not valid JSON (line 2, column 1: Expecting property name enclosed in double quotes)", id="trailing-comma"),
        pytest.param(b'{"dry_run": true} {"paused": true}', "the body is not valid JSON (line 1, column 19: Extra data)", id="two-objects"),
    ],
)
def test_a_body_that_is_not_json_says_why_and_where_and_nothing_is_applied(d, body, message):
    r = d.client.patch("/api/v1/control", content=body, headers={**d.auth_header, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"] == [{"loc": ["body"], "msg": message, "type": "json_invalid"}], r.text
    assert d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] == []


@pytest.mark.parametrize(
    "body, where",
    [
        pytest.param(b'{"max_executors": 3, "max_executors": 4}', ["body", "max_executors"], id="top-level"),
        # its loc lacked policy_params
        pytest.param(b'{"policy_params": {"target_utilization": 0.5, "target_utilization": 0.9}}', ["body", "policy_params", "target_utilization"], id="nested"),
    ],
)
def test_a_key_given_twice_is_a_422_naming_it_and_nothing_is_applied(d, body, where):
    # JSON parsers keep the last of two equal keys: the first was dropped without a word
    r = d.client.patch("/api/v1/control", content=body, headers={**d.auth_header, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == where, r.text
    assert "is given twice in one object" in r.json()["detail"][0]["msg"]
    assert d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] == []


def test_a_body_over_the_limit_is_refused_with_413_naming_it_before_it_is_read(d):
    headers = {**d.auth_header, "Content-Type": "application/json", "Content-Length": str(100 << 20)}
    status, body = send_part(d, "PATCH", "/api/v1/control", headers, b'{"note":"x')
    assert status == 413 and body["detail"] == [
        {"loc": ["body"], "msg": f"the body is {100 << 20} bytes, more than the {MAX_BODY_BYTES} bytes a control request may have",
         "type": "body_too_large"}
    ]
    assert d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] == []


def test_a_chunked_body_is_cut_off_at_the_limit(d):
    # no Content-Length: one byte past the limit is refused, without waiting for the body's end
    headers = {**d.auth_header, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    half = MAX_BODY_BYTES // 2
    status, body = send_part(d, "PATCH", "/api/v1/control", headers, chunks=(b" " * half, b" " * (MAX_BODY_BYTES - half + 1)))
    assert status == 413 and body["detail"][0]["msg"] == f"the body is more than the {MAX_BODY_BYTES} bytes a control request may have"


@pytest.mark.parametrize("chunked", [pytest.param(False, id="content-length"), pytest.param(True, id="chunked")])
def test_a_body_of_exactly_the_limit_is_read(d, chunked):
    change = b'{"paused": true, "note": "padded with whitespace to the limit"}'
    padded = change + b" " * (MAX_BODY_BYTES - len(change))
    content = iter([padded[:1000], padded[1000:]]) if chunked else padded  # an iterator is sent chunked
    r = d.client.patch("/api/v1/control", content=content, headers={**d.auth_header, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert d.reconciler.control.paused is True


@pytest.mark.parametrize(
    "content_type, named",
    [
        pytest.param("text/plain", "'text/plain'", id="text"),
        pytest.param("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'", id="form-as-curl-d-sends-it"),
        pytest.param(None, "no Content-Type", id="none"),
    ],
)
def test_a_body_not_sent_as_json_is_refused_with_415_naming_the_type_expected(d, content_type, named):
    headers = {**d.auth_header, **({"Content-Type": content_type} if content_type else {})}
    r = d.client.patch("/api/v1/control", content=b'{"paused": true}', headers=headers)
    assert r.status_code == 415 and r.json()["detail"] == [
        {"loc": ["header", "content-type"], "msg": f"the body must be JSON sent as Content-Type: application/json, not {named}",
         "type": "unsupported_media_type"}
    ]
    assert d.reconciler.control.paused is False


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/merge-patch+json"])
def test_a_json_body_is_read_under_any_json_media_type(d, content_type):
    r = d.client.patch("/api/v1/control", content=b'{"paused": true}', headers={**d.auth_header, "Content-Type": content_type})
    assert r.status_code == 200, r.text


CHANGE = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}


def too_slow(seconds: float) -> list[dict]:
    return [{"loc": ["body"], "msg": f"the body did not all arrive within the {seconds:g} seconds a control request may take",
             "type": "body_timeout"}]


@pytest.mark.parametrize(
    "headers, sent",
    [
        pytest.param({"Content-Length": "100"}, b'{"paused": true, "note": "', id="content-length"),
        pytest.param({"Transfer-Encoding": "chunked"}, b'f\r\n{"paused": true\r\n', id="chunked-never-ending"),
    ],
)
def test_a_body_that_does_not_all_arrive_in_time_is_refused_with_408_naming_the_limit(d, monkeypatch, headers, sent):
    # a slowloris: headers, part of the body, then nothing; without a bound the request is held forever
    monkeypatch.setattr(api, "MAX_BODY_SECONDS", 0.5)
    started = time.monotonic()
    status, body = answer(start_request(d, "PATCH", "/api/v1/control", {**CHANGE, **headers}, sent))
    assert status == 408 and body["detail"] == too_slow(0.5)
    assert 0.5 <= time.monotonic() - started < 3
    assert d.reconciler.control.paused is False


def test_a_body_trickled_in_is_cut_off_when_the_whole_of_it_is_late_not_each_piece(d, monkeypatch):
    # one byte every 0.1 s: each arrives well within 0.5 s, the 40 bytes would take 4 s
    monkeypatch.setattr(api, "MAX_BODY_SECONDS", 0.5)
    change = b'{"paused": true}'.ljust(40)
    sock = start_request(d, "PATCH", "/api/v1/control", {**CHANGE, "Content-Length": str(len(change))})
    started, sent = time.monotonic(), 0
    while sent < len(change) and not answered(sock, 0.1):
        sock.sendall(change[sent:sent + 1])
        sent += 1
    status, body = answer(sock)
    assert status == 408 and body["detail"] == too_slow(0.5)
    assert time.monotonic() - started < 2 and sent < len(change)
    assert d.reconciler.control.paused is False


def test_requests_are_answered_while_a_slow_body_is_pending(d, monkeypatch):
    monkeypatch.setattr(api, "MAX_BODY_SECONDS", 2.0)
    slow = start_request(d, "PATCH", "/api/v1/control", {**CHANGE, "Content-Length": "100"}, b'{"dry_run": true, ')
    started = time.monotonic()
    assert d.client.get("/healthz").status_code == 200
    assert d.client.get("/metrics").status_code == 200
    # a whole body, sent at once or chunked, is read as before
    assert d.client.patch("/api/v1/control", json={"paused": True}, headers=d.auth_header).status_code == 200
    r = d.client.patch("/api/v1/control", content=iter([b'{"paused": ', b"false}"]), headers=CHANGE)  # an iterator is sent chunked
    assert r.status_code == 200 and r.json()["changes"] == {"paused": {"from": True, "to": False}}, r.text
    assert time.monotonic() - started < 1.5 and not answered(slow)  # all of it while the slow one still waited
    status, body = answer(slow)
    assert status == 408 and body["detail"] == too_slow(2)
    assert d.reconciler.control.dry_run is None


def test_a_pause_without_a_body_needs_no_content_type(d):
    r = d.client.post("/api/v1/control/pause", headers=d.auth_header)
    assert r.status_code == 200 and d.reconciler.control.paused is True


def test_a_query_rate_limit_change_restarts_the_query_on_the_next_tick(d):
    d.run_for(20, rate=400)
    r = d.client.patch("/api/v1/queries/q", json={"max_rows_per_batch": 500, "trigger_interval_seconds": 4}, headers=d.auth_header)
    assert r.status_code == 200, r.text
    assert r.json()["control"]["query_requests"]["q"]["max_rows_per_batch"] == 500
    assert d.client.get("/api/v1/queries/q").json()["pending_request"]["trigger_interval_seconds"] == 4.0
    record = d.tick(400)
    [change] = record.plan.query_changes
    assert change.reason == Reason.OPERATOR_REQUEST and change.to_params.max_rows_per_batch == 500
    assert d.cluster.queries["q"].params.max_rows_per_batch == 500
    d.tick(400)  # the next observation shows the new settings and the rescale's outcome
    assert d.client.get("/api/v1/queries/q").json()["params"]["max_rows_per_batch"] == 500
    text = d.client.get("/metrics").text
    assert 'spark_autoscaler_query_max_rows_per_batch{application="harness",query="q"} 500.0' in text
    assert 'spark_autoscaler_query_rescales_total{application="harness",query="q",result="ok"} 1.0' in text


def test_a_query_shows_the_lag_it_is_scaled_for_the_slo_or_two_triggers_when_longer(d):
    d.run_for(20, rate=400)
    slo = d.reconciler.settings.slo.target_lag.total_seconds()
    q = d.client.get("/api/v1/queries/q").json()
    assert q["params"]["trigger_interval_seconds"] * 2 < slo and q["target_lag_seconds"] == slo
    r = d.client.patch("/api/v1/queries/q", json={"trigger_interval_seconds": slo * 0.75}, headers=d.auth_header)
    assert r.status_code == 200, r.text
    d.tick(400)
    d.tick(400)  # restarted with the new trigger: a query that keeps up now lags up to 1.5 x the SLO
    [q] = d.client.get("/api/v1/status").json()["queries"]
    assert q["params"]["trigger_interval_seconds"] == slo * 0.75 and q["target_lag_seconds"] == slo * 1.5


@pytest.mark.parametrize(
    "name, body, status, where",
    [
        pytest.param("nope", {"parallelism": 2}, 404, ("path", "name"), id="unknown-query"),
        pytest.param("q", {"parallelism": 9}, 422, ("body", "parallelism"), id="above-max-parallelism"),
        pytest.param("q", {"parallelism": 0}, 422, ("body", "parallelism"), id="zero-parallelism"),
        pytest.param("q", {"parallelism": None}, 422, ("body", "parallelism"), id="null-parallelism"),
        pytest.param("q", {"max_rows_per_batch": -5}, 422, ("body", "max_rows_per_batch"), id="negative-rate-limit"),
        pytest.param("q", {"max_rows_per_batch": 2**63}, 422, ("body", "max_rows_per_batch"), id="rate-limit-beyond-a-java-long"),
        pytest.param("q", {"trigger_interval_seconds": 0}, 422, ("body", "trigger_interval_seconds"), id="zero-trigger"),
        pytest.param("q", {"trigger_interval_seconds": "fast"}, 422, ("body", "trigger_interval_seconds"), id="string-trigger"),
        pytest.param("q", {"trigger_interval_seconds": "5"}, 422, ("body", "trigger_interval_seconds"), id="numeric-text-trigger"),
        pytest.param("q", {"rate": 5}, 422, ("body", "rate"), id="unknown-field"),
        pytest.param("q", {}, 422, ("body",), id="empty"),
    ],
)
def test_an_invalid_query_change_names_the_field(d, name, body, status, where):
    d.tick(400)
    r = d.client.patch(f"/api/v1/queries/{name}", json=body, headers=d.auth_header)
    assert r.status_code == status, r.text
    assert where in loc(r)
    assert d.reconciler.control.query_requests == {}


def test_a_shuffle_change_the_checkpoint_pins_is_a_409_naming_the_field():
    daemon = build(query=False)
    daemon.cluster.add_query(query_view("q", parallelism=8, max_parallelism=8, stateful=True, state_store="hdfs"))
    for d in serve(daemon):
        d.tick()
        r = d.client.patch("/api/v1/queries/q", json={"shuffle_partitions": 16}, headers=d.auth_header)
        assert r.status_code == 409 and loc(r) == [("body", "shuffle_partitions")]
        assert r.json()["detail"][0]["msg"].startswith("StatePinsShufflePartitions: the checkpoint pins spark.sql.shuffle.partitions")
        assert d.reconciler.control.query_requests == {}


def test_a_pending_query_request_can_be_withdrawn(d):
    d.reconciler.update_control(lambda c: c)  # nothing pending yet
    d.tick(400)
    d.client.patch("/api/v1/queries/q", json={"parallelism": 4}, headers=d.auth_header)
    assert d.client.delete("/api/v1/queries/q/request", headers=d.auth_header).status_code == 200
    r = d.client.delete("/api/v1/queries/q/request", headers=d.auth_header)
    assert r.status_code == 404


@pytest.mark.parametrize("name", ["a/b", "x/request", "/lead/and/trail/", "50%", "a%2Fb", "ünï cödé"])
def test_a_query_named_with_slashes_is_reached_by_its_encoded_name(name):
    # Spark lets an attached query have any name; the operator's client sends it as one segment, %2F for /
    for d in serve(build(query_name=name)):
        d.tick(400)
        path = f"/api/v1/queries/{urllib.parse.quote(name, safe='')}"
        r = d.client.get(path)
        assert r.status_code == 200 and r.json()["name"] == name, r.text
        r = d.client.patch(path, json={"parallelism": 4}, headers=d.auth_header)
        assert r.status_code == 200 and list(r.json()["control"]["query_requests"]) == [name], r.text
        r = d.client.delete(f"{path}/request", headers=d.auth_header)
        assert r.status_code == 200 and d.reconciler.control.query_requests == {}, r.text


def test_a_query_s_request_path_is_not_read_as_a_query_name(d):
    # /queries/q/request is query q's pending request, which only DELETE withdraws
    r = d.client.patch("/api/v1/queries/q/request", json={"parallelism": 4}, headers=d.auth_header)
    assert r.status_code == 405 and r.headers["allow"] == "DELETE"
    assert d.client.get("/api/v1/queries/q/request").status_code == 405


def test_a_request_is_routed_once_not_first_by_the_control_gate_and_again_by_the_router(monkeypatch):
    # the gate knows the control routes from when the app is built; it does not route each
    # request (every /metrics scrape included) ahead of Starlette
    from collections import Counter

    import httpx

    from autoscaler.ops.api import create_app
    from autoscaler.ops.server import HttpServer

    d = build()
    d.tick(400)
    app = create_app(reconciler=d.reconciler, loop=d.loop, registry=d.registry, auth=ApiAuth({TOKEN: "alice"}), clock=d.clock)
    tried: Counter[int] = Counter()
    for i, route in enumerate(app.routes):
        monkeypatch.setattr(route, "matches", lambda scope, i=i, matches=route.matches: (tried.update([i]), matches(scope))[1])
    requests = [
        ("GET", "/metrics", {}, 200),
        ("GET", "/api/v1/queries/q", {}, 200),
        ("PATCH", "/api/v1/control", {"json": {"paused": True}}, 200),
        ("POST", "/api/v1/control/resume", {}, 200),
        ("PATCH", "/api/v1/queries/q%2Fx", {"json": {"parallelism": 4}}, 404),
        ("DELETE", "/api/v1/queries/q/request", {}, 404),
    ]
    with HttpServer(app, "127.0.0.1", 0) as server, httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for method, path, kw, status in requests:
            tried.clear()
            r = client.request(method, path, **kw)
            assert r.status_code == status, (method, path, r.text)
            assert tried and max(tried.values()) == 1, (method, path, tried)


def test_the_gate_picks_the_control_route_starlette_serves_for_every_method_and_path():
    # the reference: Starlette's own matching, the first route matching path and method; %2F and
    # %25 as _SegmentPaths leaves them in a query name
    from starlette.routing import Match

    from autoscaler.ops.api import _ControlGate, create_app

    app = create_app(reconciler=lambda: None, registry=build().registry, auth=ApiAuth({TOKEN: "alice"}))
    control = next(m.kwargs["control"] for m in app.user_middleware if m.cls is _ControlGate)

    def served(scope):
        route = next((r for r in app.router.routes if r.matches(scope)[0] == Match.FULL), None)
        needs_token = route is not None and any(dep.call.__name__ == "operator" for dep in getattr(getattr(route, "dependant", None), "dependencies", ()))
        return route if needs_token else None

    paths = ["/metrics", "/healthz", "/docs", "/openapi.json", "/api/v1/control", "/api/v1/control/", "/api/v1/control/pause",
             "/api/v1/control/resume", "/api/v1/control/other", "/api/v1/log-level", "/api/v1/queries", "/api/v1/queries/q",
             "/api/v1/queries/a%2Fb", "/api/v1/queries/50%25", "/api/v1/queries/q/request", "/api/v1/queries/x%2Frequest",
             "/api/v1/queries/q%2Fx/request", "/api/v1/queries/q/other", "/api/v1/queries/", "/nope"]
    picked = 0
    for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]:
        for path in paths:
            scope = {"type": "http", "method": method, "path": path, "root_path": ""}
            assert control.route(scope) is served(scope), (method, path)
            picked += served(scope) is not None
    assert picked == 10  # PATCH on 4 query names, DELETE on 2 requests, PATCH control, POST pause and resume, PUT log level


def test_the_log_level_changes_at_once(d):
    logger = logging.getLogger("autoscaler.reconciler")
    before = logger.level
    try:
        r = d.client.put("/api/v1/log-level", json={"level": "DEBUG", "logger": "autoscaler.reconciler"}, headers=d.auth_header)
        assert r.status_code == 200 and logger.level == logging.DEBUG
        r = d.client.put("/api/v1/log-level", json={"level": "warning", "logger": "autoscaler.reconciler"}, headers=d.auth_header)
        assert r.status_code == 200 and logger.level == logging.WARNING, r.text  # any case ("warning" was a 422)
        r = d.client.put("/api/v1/log-level", json={"level": "verbose", "logger": "autoscaler.reconciler"}, headers=d.auth_header)
        assert r.status_code == 422 and loc(r) == [("body", "level")]
        r = d.client.put("/api/v1/log-level", json={"level": "DEBUG", "logger": "no.such"}, headers=d.auth_header)
        assert r.status_code == 422 and loc(r) == [("body", "logger")]
    finally:
        logger.setLevel(before)


def test_the_daemons_loggers_can_be_set_before_they_have_logged():
    # stdlib loggers were made at a module's first line: on a quiet daemon the log-level route
    # refused the very logger someone wanted DEBUG from ("no logger named 'autoscaler.reconciler'")
    code = (
        "import logging, autoscaler.app.driver; from autoscaler.runtime.commands import LOG_LEVELS; "
        "names = ('autoscaler', 'autoscaler.reconciler', 'autoscaler.loop', 'autoscaler.spark.host', 'autoscaler.server'); "
        "print([n for n in names if n not in logging.root.manager.loggerDict])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_schema_is_served_and_documents_auth():
    for d in serve(build()):
        schema = d.client.get("/openapi.json").json()
        assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
        patch = schema["paths"]["/api/v1/control"]["patch"]
        assert patch["security"] == [{"HTTPBearer": []}] and {"401", "403", "413", "415", "422"} <= set(patch["responses"])
        assert "security" not in schema["paths"]["/api/v1/status"]["get"]


def test_a_change_the_state_store_cannot_save_is_refused_and_not_applied():
    from tests.fakes import FlakyStateStore

    store = FlakyStateStore()
    for d in serve(build(state_store=store)):
        d.tick()
        store.broken = True
        r = d.client.post("/api/v1/control/pause", json={"note": "disk full"}, headers=d.auth_header)
        assert r.status_code == 503
        assert "the change was not applied" in r.json()["detail"][0]["msg"] and "No space left" in r.json()["detail"][0]["msg"]
        assert d.client.get("/api/v1/control").json()["overrides"]["paused"] is False and not d.reconciler.control.paused
        assert d.client.get("/api/v1/decisions", params={"kind": "operator"}).json()["entries"] == []
        d.clock.advance(60)  # the next save is due (a tick that changed only the scale-down window waits a minute)
        d.tick()  # ticks go on; the status says why nothing is saved
        assert "No space left" in d.client.get("/api/v1/status").json()["loop"]["state_error"]
        store.broken = False
        d.tick()
        assert d.client.get("/api/v1/status").json()["loop"]["state_error"] is None
