"""Checks of the HTTP servers the daemon and the operator run, shared by their tests."""

from __future__ import annotations

import httpx


def assert_head_answers_as_get(client: httpx.Client, statuses: dict[str, int]) -> None:
    """HEAD (uptime checkers, load balancers) is answered with GET's status and headers and no body (it was a 405)."""
    for path, status in statuses.items():
        head, get = client.head(path), client.get(path)
        assert (head.status_code, get.status_code) == (status, status), path
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"], path
        assert int(head.headers["content-length"]) > 0, path
