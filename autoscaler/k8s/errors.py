"""Typed errors of the Kubernetes API, so callers tell "gone" from "conflict" without HTTP codes."""

from __future__ import annotations

import json
from typing import Any


class KubeError(RuntimeError):
    """A Kubernetes API call failed; the message names the call, the status and the server's reason."""

    def __init__(self, what: str, status: int | None, reason: str = "", message: str = "", retry_after: float | None = None) -> None:
        self.what = what
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        code = f"{status} {reason}".strip() if status is not None else "no answer"
        super().__init__(f"{what}: {code}" + (f": {message}" if message else ""))


class NotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class Conflict(KubeError):
    """409: a write carried a stale ``resourceVersion``, or the object already exists."""


class Gone(KubeError):
    """410: the ``resourceVersion`` a watch asked for is too old; list again."""


class Forbidden(KubeError):
    """403: RBAC does not allow the call (never retried: the Role must change)."""


class Invalid(KubeError):
    """422 (or 400): the API server rejected the object; the message says which field."""


_BY_STATUS: dict[int, type[KubeError]] = {404: NotFound, 409: Conflict, 410: Gone, 403: Forbidden, 422: Invalid, 400: Invalid}


def status_error(what: str, status: int, body: Any, headers: Any = None) -> KubeError:
    """The typed error of a failed call from its status, its ``Status`` body and headers."""
    reason, message = "", ""
    if isinstance(body, (str, bytes)) and body:
        try:
            body = json.loads(body)
        except ValueError:
            message = (body.decode(errors="replace") if isinstance(body, bytes) else body)[:300]
    if isinstance(body, dict):
        reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
    retry_after = None
    if headers is not None:
        raw = headers.get("Retry-After")
        try:
            retry_after = float(raw) if raw is not None else None
        except ValueError:
            retry_after = None  # an HTTP date: the back-off decides
    return _BY_STATUS.get(status, KubeError)(what, status, reason, message, retry_after)
