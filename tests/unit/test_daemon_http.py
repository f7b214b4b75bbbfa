"""The daemon's HTTP wiring and command line, without starting Spark."""

from __future__ import annotations

import asyncio
import http.client
import socket
import time

import httpx
import pytest
from fastapi import FastAPI, Request

from autoscaler.app.driver import DriverDaemon
from autoscaler.cli import build_parser, main
from autoscaler.core.model import Executor, ExecutorView, Mode, Reason
from autoscaler.ops.server import HttpServer, HttpServerError
from autoscaler.runtime.config import SettingsError, load_settings
from tests.http_checks import assert_head_answers_as_get
from tests.unit.test_api import answered
from tests.waiting import wait_until


def test_the_daemon_serves_health_and_metrics_before_spark_is_up(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_AUTOSCALER_API_TOKEN", "daemon-token-123456")
    settings = load_settings(None, {"http.port": 0, "state.path": str(tmp_path / "state.json")}, environ={})
    daemon = DriverDaemon(settings, specs=[])
    server = daemon.start_http()
    try:
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/healthz").status_code == 200
            assert client.get("/readyz").json() == {"status": "not ready", "reason": "starting: the reconciler is not running yet"}
            assert_head_answers_as_get(client, {"/healthz": 200, "/readyz": 503, "/metrics": 200})
            text = client.get("/metrics").text
            assert 'spark_autoscaler_build_info{application="spark-autoscaler",policy="default",version="0.1.0"} 1.0' in text
            assert 'spark_autoscaler_slo_target_lag_seconds{application="spark-autoscaler"} 60.0' in text
            r = client.post("/api/v1/control/pause", headers={"Authorization": "Bearer daemon-token-123456"})
            assert r.status_code == 503  # authenticated, but nothing to pause yet
            daemon._stopped.set()
            assert client.get("/readyz").json()["reason"] == "stopping"
    finally:
        daemon.stop_http()
    assert daemon.state_store is not None and daemon.state_store.path == tmp_path / "state.json"


class RecordingExecutors:
    """The executor calls the daemon makes while it starts, on one registered executor."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def observe(self, now):
        return ExecutorView((Executor("0", 1),), 1, True, Reason.CAN_REQUEST_EXECUTORS)

    def set_target(self, total, now):
        self.calls.append(f"set_target {total}")
        return True

    def remove(self, ids, now):
        self.calls.append(f"remove {list(ids)}")
        return True

    def wait_for(self, count, timeout, clock, stop=None):
        self.calls.append(f"wait_for {count}")
        return count


@pytest.mark.parametrize("stopped", [False, True], ids=["running", "stopped-while-spark-started"])
def test_a_stop_asked_for_while_spark_starts_requests_no_executors(stopped):
    settings = load_settings(None, {"mode": "active", "http.enabled": False, "executors.initial": 3}, environ={})
    daemon = DriverDaemon(settings, specs=[])
    daemon.executors = executors = RecordingExecutors()  # type: ignore[assignment]
    if stopped:
        daemon.request_stop()
    report = daemon._wait_for_resources()
    if stopped:
        assert executors.calls == [] and (report.executors, report.waited.total_seconds()) == (1, 0.0)
        assert report.mode_reason == "stopped while Spark started"
    else:
        assert executors.calls == ["set_target 3", "wait_for 3"] and report.executors == 3
    assert report.mode == Mode.ACTIVE


def test_a_port_in_use_is_a_clear_error():
    with HttpServer(FastAPI(), "127.0.0.1", 0) as first:
        with pytest.raises(HttpServerError, match=f"cannot listen on 127.0.0.1:{first.port}: Address already in use"):
            HttpServer(FastAPI(), "127.0.0.1", first.port).start()


def test_an_address_not_of_this_machine_is_told_as_the_system_tells_it():
    # it was a guess, "address in use or not available?", for an address no interface has
    with pytest.raises(HttpServerError) as info:
        HttpServer(FastAPI(), "192.0.2.1", 0).start()  # TEST-NET-1: no machine's
    assert str(info.value).startswith("cannot listen on 192.0.2.1:0: ") and "assign" in str(info.value) and "?" not in str(info.value)


def test_run_and_demo_take_http_flags():
    run = build_parser().parse_args(["run", "--http-host", "0.0.0.0", "--http-port", "9000", "--state-file", "s.json"])
    assert (run.http_host, run.http_port, str(run.state_file)) == ("0.0.0.0", 9000, "s.json")
    default_run = build_parser().parse_args(["run"])
    assert (default_run.http_host, default_run.http_port) == (None, None)  # the configuration decides
    demo = build_parser().parse_args(["demo"])
    assert (demo.http_host, demo.http_port, demo.record, demo.no_http) == ("127.0.0.1", 8090, None, False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--http-port", "70000"])


def test_dashboard_render_command(tmp_path, capsys):
    from tests.harness import record_scenario

    record_scenario(tmp_path / "run.jsonl")
    assert main(["dashboard", "render", "--recording", str(tmp_path / "run.jsonl"), "--output", str(tmp_path / "d.png")]) == 0
    assert (tmp_path / "d.png").stat().st_size > 50_000
    assert main(["dashboard", "render", "--recording", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "x.png")]) == 2
    assert "--recording" in capsys.readouterr().err


def test_dashboard_render_names_a_missing_dashboard(tmp_path, capsys):
    code = main(["dashboard", "render", "--recording", str(tmp_path / "r.jsonl"), "--output", str(tmp_path / "x.png"),
                 "--dashboard", str(tmp_path / "nope.json")])
    assert code == 2 and "--dashboard" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["--warmup", "-3"], "argument --warmup: '-3' must be >= 0", id="negative-warmup"),
        pytest.param(["--duration", "nan"], "argument --duration: 'nan' must be a finite number", id="nan-duration"),
        pytest.param(["--peak-rate", "inf"], "argument --peak-rate: 'inf' must be a finite number", id="infinite-rate"),
    ],
)
def test_bad_demo_numbers_are_refused_before_anything_starts(capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        main(["demo", *args])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("command", [["demo"], ["benchmark", "step-load"]])
def test_a_workdir_that_cannot_be_created_is_refused_before_spark_starts(tmp_path, capsys, command):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main([*command, "--workdir", str(blocker / "sub")]) == 2
    assert f"--workdir {str(blocker / 'sub')!r}: cannot be created: Not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("phases", ["1,2", "0,1,1", "nan,1,1", "1,inf,1", "a,b,c"])
def test_bad_step_load_phases_are_refused_before_spark_starts(capsys, phases):
    assert main(["benchmark", "step-load", "--phases", phases]) == 2
    assert "--phases:" in capsys.readouterr().err


def test_the_daemon_refuses_given_pipelines_on_one_checkpoint_before_spark_starts(tmp_path):
    # the demo, the benchmarks and the tests hand their specs in: a's checkpoint= was b's default (<checkpoint_root>/b)
    from autoscaler.spark.pipelines import PipelineError, PipelineSpec

    settings = load_settings(None, {"http.enabled": False, "pipelines.checkpoint_root": str(tmp_path / "ck")}, environ={})
    specs = [PipelineSpec("a", lambda s, c: None, checkpoint=str(tmp_path / "ck" / "b")), PipelineSpec("b", lambda s, c: None)]
    with pytest.raises(PipelineError, match="a, b share the checkpoint"):
        DriverDaemon(settings, specs=specs)


# --- request headers bounded in time (a slowloris held a socket open for good) ------------------


@pytest.fixture
def slow_server(monkeypatch):
    """A server whose headers bound is 0.5 s, with a route that reads its body as it comes."""
    from autoscaler.ops import server as server_module

    monkeypatch.setattr(server_module, "MAX_HEADER_SECONDS", 0.5)
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict:
        return {"pong": True}

    @app.delete("/ping")
    def forget() -> dict:  # answers without reading the body it was sent
        return {"forgot": True}

    @app.post("/echo")
    async def echo(request: Request) -> dict:
        try:  # the body's own bound, as the control API has (api.MAX_BODY_SECONDS), here 2 s
            return {"got": len(await asyncio.wait_for(request.body(), 2.0))}
        except asyncio.TimeoutError:
            return {"got": "late"}

    with HttpServer(app, "127.0.0.1", 0) as server:
        yield server


def _connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def _read_all(sock) -> bytes:
    """Everything the server sends until it closes the connection (or 5 s pass)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_a_connection_that_sends_nothing_is_answered_408_and_closed_after_the_header_bound(slow_server):
    started = time.monotonic()
    with _connect(slow_server) as sock:
        data = _read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and b"did not all arrive within 0.5 seconds" in data
    assert 0.4 <= time.monotonic() - started < 3


def test_headers_trickled_in_are_cut_off_when_the_whole_of_them_is_late_not_each_piece(slow_server):
    head = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 60 + b"\r\n\r\n"
    started, sent = time.monotonic(), 0
    with _connect(slow_server) as sock:
        # one byte every 0.05 s: each well within 0.5 s, the whole would take 4 s
        while sent < len(head) and not answered(sock, 0.05):
            sock.sendall(head[sent:sent + 1])
            sent += 1
        data = _read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and sent < len(head)
    assert time.monotonic() - started < 3


def test_the_header_bound_leaves_keep_alive_bodies_and_the_next_request_alone(slow_server):
    with _connect(slow_server) as sock:
        # two requests on one connection, the second after longer than the header bound (the
        # wait between requests is uvicorn's keep-alive timeout, 5 s)
        for _ in range(2):
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert (response.status, response.read()) == (200, b'{"pong":true}')
            time.sleep(0.8)
        # a body slower than the header bound is the route's to bound (2 s here), not the headers'
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{}")
        time.sleep(1.0)
        sock.sendall(b"  ")
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert (response.status, response.read()) == (200, b'{"got":4}')
        # the next request's headers, trickled after a response, are bounded again
        started = time.monotonic()
        sock.sendall(b"GET /pi")
        data = _read_all(sock)
    assert data.startswith(b"HTTP/1.1 408 ") and 0.4 <= time.monotonic() - started < 3


def test_a_body_trickled_after_an_answer_that_did_not_read_it_does_not_hold_the_connection(slow_server):
    with _connect(slow_server) as sock:
        sock.sendall(b"DELETE /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        started, sent, data = time.monotonic(), 0, b""
        # a byte every 0.05 s: uvicorn's keep-alive timer, cancelled by each, never fired
        while sent < 100 and time.monotonic() - started < 4:
            if answered(sock, 0.05):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
                continue
            try:
                sock.sendall(b" ")
            except OSError:
                break
            sent += 1
    assert data.startswith(b"HTTP/1.1 200 ") and b'{"forgot":true}' in data
    assert time.monotonic() - started < 3 and sent < 100


# --- connections bounded in number (uvicorn's limit_concurrency) ---------------------------------


def test_a_request_on_one_connection_more_than_the_bound_is_answered_503_and_served_once_one_closes():
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict:
        return {"pong": True}

    def get(sock) -> tuple[int, bytes]:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.read()

    with HttpServer(app, "127.0.0.1", 0, max_connections=2) as server:
        first, second = _connect(server), _connect(server)
        try:
            # two connections held open, their headers half sent: the bound's two
            for sock in (first, second):
                sock.sendall(b"GET /ping HTTP/1.1\r\n")
            with _connect(server) as third:
                status, body = get(third)
                assert status == 503 and b"Service Unavailable" in body
            # the two being served are answered
            for sock in (first, second):
                sock.sendall(b"Host: x\r\n\r\n")
                response = http.client.HTTPResponse(sock)
                response.begin()
                assert (response.status, response.read()) == (200, b'{"pong":true}')
        finally:
            first.close()
        # one closed: a new connection is served (once the server has seen the close)
        def served() -> bool:
            with _connect(server) as sock:
                return get(sock)[0] == 200

        wait_until(served, 5, "a new connection to be served after one of the two closed", interval=0.1)
        second.close()


def test_the_daemon_serves_at_most_http_max_connections_and_refuses_a_bound_under_one():
    settings = load_settings(None, {"http.port": 0, "http.max_connections": 1}, environ={})
    daemon = DriverDaemon(settings, specs=[])
    server = daemon.start_http()
    try:
        with _connect(server) as held:
            held.sendall(b"GET /healthz HTTP/1.1\r\n")
            with httpx.Client(base_url=server.url) as client:
                assert client.get("/healthz").status_code == 503
    finally:
        daemon.stop_http()
    with pytest.raises(SettingsError, match="http.max_connections: Input should be greater than or equal to 1"):
        load_settings(None, {"http.max_connections": 0}, environ={})


def test_the_bounds_the_docs_give_are_the_ones_in_force():
    # README and docs/operations.md: a body of at most 1 MiB within 10 s of its headers, headers
    # within 10 s, 100 connections (the tests above set them smaller to run fast)
    from autoscaler.core.settings import HttpSettings
    from autoscaler.ops import api, server

    assert (api.MAX_BODY_BYTES, api.MAX_BODY_SECONDS, server.MAX_HEADER_SECONDS) == (1024 * 1024, 10.0, 10.0)
    assert HttpSettings().max_connections == server.MAX_CONNECTIONS == 100
