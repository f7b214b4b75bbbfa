"""Loopback ports: a free one, and why one cannot be listened on."""

import socket

from autoscaler.runtime.net import free_port, listen_problem


def test_a_free_port_can_be_listened_on_and_a_taken_one_cannot():
    port = free_port()
    assert listen_problem("127.0.0.1", port) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert listen_problem("127.0.0.1", port) == f"cannot listen on 127.0.0.1:{port}: Address already in use"


def test_an_address_that_is_not_this_machines_is_named_with_the_reason():
    # TEST-NET-1 (RFC 5737): never an address of this machine
    problem = listen_problem("192.0.2.1", free_port())
    assert problem is not None and problem.startswith("cannot listen on 192.0.2.1:") and "assign" in problem


def test_a_host_that_does_not_resolve_is_named():
    problem = listen_problem("no-such-host.invalid", 8090)
    assert problem is not None and problem.startswith("cannot listen on no-such-host.invalid:8090: ")
