"""The operator's client of a daemon's REST API (``autoscaler/ops/api.py``): read its status,
send control changes, with retries where a retry can help.

Connection errors and 5xx answers of reads are retried with back-off (tenacity); a daemon that
still does not answer raises :class:`DaemonUnavailable` and the app is polled again later.
Writes are never resent blindly: a 503 (starting, or its state cannot be saved: nothing was
applied) and a 401 (a rotated token not propagated yet) are :class:`WriteRefused`, a
:class:`DaemonUnavailable` (told as such once it lasts);
403 and 422/409/404 are a :class:`Rejected` answer naming the daemon's problems, not retried
until the spec changes. The token is read from the mounted file on every request, so a
rotation needs no restart.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import tenacity

from autoscaler.ops.auth import TokenFileError, parse_tokens


class DaemonUnavailable(RuntimeError):
    """No usable answer now (down, starting, overloaded, token not accepted yet): try again later."""


class WriteRefused(DaemonUnavailable):
    """The daemon answers but takes no change now: 401 (the operator's token is not among its
    tokens) or 503 (its token file is broken, or its state cannot be saved)."""


@dataclass(frozen=True)
class Rejected:
    status: int
    problems: tuple[str, ...]  # ``field: message``, from the daemon's ``detail`` (``loc`` names the field)

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


@dataclass(frozen=True)
class Applied:
    audit_id: int | None
    changes: dict[str, Any]


def token_from_file(path: Path, identity: str) -> Callable[[], str | None]:
    """The token of ``identity`` in a token file (the chart's Secret), read on every call."""

    def read() -> str | None:
        try:
            tokens = parse_tokens(path.read_text(encoding="utf-8"), f"token file {str(path)!r}")
        except (OSError, TokenFileError):
            return None
        return next((token for token, who in tokens.items() if who == identity), None)

    return read


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, _Transient)


class _Transient(Exception):
    pass


class DaemonClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: Callable[[], str | None],
        timeout: float = 5.0,
        attempts: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        observe: Callable[[str, int | None], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.attempts = attempts
        self.sleep = sleep
        self._observe = observe

    # --- reads ------------------------------------------------------------------------------

    def ready(self) -> tuple[bool, str | None]:
        status, body = self._request("GET", "/readyz", retry=True, accept=(200, 503))
        return status == 200, (body or {}).get("reason") if status != 200 else None

    def status(self) -> dict[str, Any]:
        return self._ok(self._request("GET", "/api/v1/status", retry=True))

    def control(self) -> dict[str, Any]:
        return self._ok(self._request("GET", "/api/v1/control", retry=True))

    def queries(self) -> list[dict[str, Any]]:
        body = self._ok(self._request("GET", "/api/v1/queries", retry=True))
        return list(body) if isinstance(body, list) else []

    def decisions(self, limit: int = 50) -> list[dict[str, Any]]:
        body = self._ok(self._request("GET", f"/api/v1/decisions?limit={limit}", retry=True))
        return list(body.get("entries") or [])

    # --- writes -------------------------------------------------------------------------------

    def patch_control(self, changes: dict[str, Any], note: str) -> Applied | Rejected:
        return self._write("PATCH", "/api/v1/control", {**changes, "note": note})

    def patch_query(self, name: str, changes: dict[str, Any], note: str) -> Applied | Rejected:
        return self._write("PATCH", f"/api/v1/queries/{urllib.parse.quote(name, safe='')}", {**changes, "note": note})

    def put_log_level(self, level: str, note: str) -> Applied | Rejected:
        return self._write("PUT", "/api/v1/log-level", {"level": level, "note": note})

    # --- plumbing -------------------------------------------------------------------------------

    def _write(self, method: str, path: str, body: dict[str, Any]) -> Applied | Rejected:
        status, answer = self._request(method, path, body, retry=False, accept=(200, 401, 403, 404, 409, 422, 503))
        if status == 200:
            return Applied(answer.get("audit_id"), dict(answer.get("changes") or {}))
        if status in (401, 503):
            raise WriteRefused(f"{method} {path}: {status}: {_problems(answer)[0] if _problems(answer) else 'no detail'}")
        return Rejected(status, tuple(_problems(answer)))

    @staticmethod
    def _ok(answer: tuple[int, Any]) -> Any:
        return answer[1]

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None, *, retry: bool, accept: tuple[int, ...] = (200,)) -> tuple[int, Any]:
        def once() -> tuple[int, Any]:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(self.base_url + path, data=data, method=method)
            request.add_header("Accept", "application/json")
            if data is not None:
                request.add_header("Content-Type", "application/json")
            if method != "GET" and (token := self.token()):
                request.add_header("Authorization", f"Bearer {token}")
            endpoint = _endpoint(path)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    status, raw = response.status, response.read()
            except urllib.error.HTTPError as exc:
                status, raw = exc.code, exc.read()
            except (OSError, TimeoutError) as exc:  # refused, reset, timed out, unknown host
                self._seen(endpoint, None)
                raise _Transient(f"{method} {self.base_url}{path}: {exc}") from None
            self._seen(endpoint, status)
            parsed = json.loads(raw) if raw else None
            if status not in accept:
                if status >= 500:
                    raise _Transient(f"{method} {path}: {status}")
                raise DaemonUnavailable(f"{method} {path}: unexpected {status}: {_problems(parsed)}")
            return status, parsed

        try:
            if not retry:
                return once()
            return tenacity.Retrying(
                retry=tenacity.retry_if_exception(_retryable),
                wait=tenacity.wait_exponential_jitter(multiplier=0.2, max=2.0, jitter=0.1),
                stop=tenacity.stop_after_attempt(self.attempts),
                sleep=self.sleep,
                reraise=True,
            )(once)
        except _Transient as exc:
            raise DaemonUnavailable(str(exc)) from None

    def _seen(self, endpoint: str, status: int | None) -> None:
        if self._observe is not None:
            self._observe(endpoint, status)


def _endpoint(path: str) -> str:
    """The path as a bounded metrics label: ``/api/v1/queries/clicks`` -> ``/api/v1/queries/{name}``."""
    path = path.split("?")[0]
    if path.startswith("/api/v1/queries/"):
        return "/api/v1/queries/{name}"
    return path


def _problems(body: Any) -> list[str]:
    """``field: message`` for each problem of the daemon's ``{"detail": [{"loc", "msg"}]}``."""
    out = []
    for d in (body or {}).get("detail") or () if isinstance(body, dict) else ():
        loc = [str(p) for p in d.get("loc") or () if p not in ("body", "path", "header")]
        out.append(f"{'.'.join(loc)}: {d.get('msg')}" if loc else str(d.get("msg")))
    return out
