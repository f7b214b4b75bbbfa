"""Ports for the servers this package starts: free loopback ports for the processes it runs on
one machine (the demo's standalone cluster, a Prometheus server for the dashboard, the tests'
servers), and whether a configured address can be listened on before minutes of start-up."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port no one listens on now, chosen by the kernel. Another process may take it before the
    caller binds it; the callers start at once and a collision fails loudly."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listen_problem(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now (in use, not this machine's address), or None.

    A command that starts minutes of work before its HTTP server (the demo starts a Spark
    cluster first) asks this first, so a port in use is told at once rather than after Spark
    started. Bound as uvicorn binds (``SO_REUSEADDR``), then let go: another process may still
    take the port in between, and the server then says so itself."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(address)
            s.listen()
    except OSError as exc:
        return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None
