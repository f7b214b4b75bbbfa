"""The daemon's HTTP server: uvicorn serving the API app in a background thread.

One process, one thread for HTTP next to the reconcile loop (prometheus-client is
thread-safe; its multiprocess mode is not needed). ``start()`` returns once the socket
listens, or raises :class:`HttpServerError` naming the address when it cannot bind.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from autoscaler.core.settings import HttpSettings
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.net import listen_problem

log = get_logger("autoscaler.server")

# seconds a request's headers may take to arrive, from the connection's opening (its first
# request) or the request's first byte (a later one on a kept-alive connection) to the end of the
# headers: uvicorn (h11) bounds the wait between requests
# (keep-alive) and our app a control request's body (api.MAX_BODY_SECONDS), but not headers that
# trickle in, nor a connection that sends nothing (a slowloris held such sockets open for good)
MAX_HEADER_SECONDS = 10.0
_HEADER_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


class HeaderBoundH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a bound on the time a request's headers take to arrive
    (``MAX_HEADER_SECONDS``): past it the connection is answered 408 and closed."""

    _header_timer: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_header_timer()  # a connection that sends nothing is bounded too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._waiting_on_client() and not self.transport.is_closing():
            self._arm_header_timer()  # bytes of a request's headers: the clock runs from the first
        else:
            self._disarm_header_timer()  # the headers are in (the body has the app's own bound)

    def _waiting_on_client(self) -> bool:
        """Bytes are arriving that no request being served reads: a request's headers, or the rest
        of a body after the answer was sent without reading it (uvicorn cancels its keep-alive
        timer on any data, so a body trickled after the answer held the connection open)."""
        their = self.conn.their_state
        return their is h11.IDLE or (their is h11.SEND_BODY and self.conn.our_state is h11.DONE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(MAX_HEADER_SECONDS, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._waiting_on_client():
            return
        if self.conn.their_state is h11.IDLE:  # else the request was answered: nothing more to say
            message = f"the request's headers did not all arrive within {MAX_HEADER_SECONDS:g} seconds".encode()
            self.transport.write(_HEADER_TIMEOUT % (len(message), message))
        self.transport.close()


class HttpServerError(RuntimeError):
    pass


# connections served at once unless told (`http.max_connections`): the daemon's own clients are
# a few scrapers, the operator, health probes and people; a flood of connections beyond it is
# answered 503 instead of each one taking a share of the driver's CPU and memory
MAX_CONNECTIONS: int = HttpSettings.model_fields["max_connections"].default


class HttpServer:
    """uvicorn serving ``app`` on ``host:port`` from a thread; at most ``max_connections`` open
    connections are served at once, a request on one more is answered 503 (``None``: no limit)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8090, max_connections: int | None = MAX_CONNECTIONS) -> None:
        self.host = host
        self.requested_port = port
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,  # keep the daemon's logging (structlog) configuration
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            http=HeaderBoundH11Protocol,
            # uvicorn answers 503 once the open connections, the one asking included, reach
            # limit_concurrency: one more than the connections to serve
            limit_concurrency=None if max_connections is None else max_connections + 1,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        servers = getattr(self._server, "servers", None) or []
        for server in servers:
            for sock in server.sockets or ():
                return int(sock.getsockname()[1])
        return self.requested_port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 15.0) -> HttpServer:
        self._thread = threading.Thread(target=self._run, name="spark-autoscaler-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                # the reason the system gives (uvicorn logs it and exits): a guess of "in use"
                # misled when the address was no address of this machine
                problem = listen_problem(self.host, self.requested_port) or f"cannot listen on {self.host}:{self.requested_port}"
                raise HttpServerError(problem)
            if time.monotonic() > deadline:
                self.stop()
                raise HttpServerError(f"HTTP server on {self.host}:{self.requested_port} did not start within {timeout:.0f}s")
            time.sleep(0.02)
        log.info("http_listening", url=self.url)
        return self

    def _run(self) -> None:
        try:
            self._server.run()
        except SystemExit:  # uvicorn exits when it cannot bind; start() reports it
            pass

    def stop(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _token_file_told(metrics: Any) -> Any:
    """Log and count each change of the token file's state (a bad rotation fails closed)."""

    def told(problem: str | None) -> None:
        if problem is None:
            log.info("token_file_valid", detail="control changes are accepted again")
        else:
            log.error("token_file_invalid", error=problem, detail="every control change is refused until the file is fixed")
        if metrics is not None:
            metrics.token_file_state(problem)

    return told


def serve_daemon(
    settings: Any,
    *,
    reconciler: Any,
    loop: Any,
    registry: Any,
    metrics: Any,
    clock: Any,
    application: str,
    stopping: Any = lambda: False,
    auth: Any = None,
    live_status: Any = None,
) -> HttpServer:
    """Start the HTTP server of a daemon (driver mode, attach mode) on ``http.host:http.port``.

    ``reconciler`` and ``loop`` may be callables returning ``None`` while the daemon starts;
    ``live_status`` returns each hosted query's status now (the query host's ``statuses``).
    """
    from autoscaler.ops.api import create_app
    from autoscaler.ops.auth import ApiAuth

    h = settings.http
    auth = auth or ApiAuth.from_settings(h.token_file, h.token_env, token_files=h.token_files)
    if auth.on_problem is None:
        auth.on_problem = _token_file_told(metrics)
        if (auth.token_file is not None or auth.token_files) and metrics is not None:
            metrics.token_file_state(None)
    app = create_app(
        reconciler=reconciler,
        loop=loop,
        registry=registry,
        auth=auth,
        metrics=metrics,
        clock=clock,
        application=application,
        stopping=stopping,
        live_status=live_status,
    )
    server = HttpServer(app, h.host, h.port, h.max_connections).start()
    if not auth.enabled:
        log.info("control_api_disabled", detail=f"no token configured (http.token_file or ${h.token_env}); read-only API")
    return server
