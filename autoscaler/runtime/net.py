"""Loopback ports for the processes this package starts on one machine (the demo's standalone
cluster, a Prometheus server for the dashboard, the tests' servers)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port no one listens on now, chosen by the kernel. Another process may take it before the
    caller binds it; the callers start at once and a collision fails loudly."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
