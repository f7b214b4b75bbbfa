"""Bearer tokens of the control API.

Tokens come from a file (``http.token_file``: one ``TOKEN`` or ``NAME TOKEN`` per line, ``#``
comments; ``NAME`` is the identity written to the audit trail, ``operator`` by default) and
from one environment variable (``http.token_env``). The file is re-read when it changes, so
a rotated Kubernetes Secret takes effect without a restart. Without any token the control
endpoints are disabled (403), never open. Tokens are compared in constant time.

A file that cannot be read at start-up stops the daemon (the configuration is wrong). One that
becomes unreadable or malformed later (a rotation gone wrong) fails closed: its previous tokens
stop working at once, since the rotation may have been to revoke one, and :attr:`ApiAuth.problem`
says why until a good file arrives (the control API refuses every change meanwhile; the problem
is logged and counted through ``on_problem``).
"""

from __future__ import annotations

import hmac
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

DEFAULT_IDENTITY = "operator"


class TokenFileError(ValueError):
    pass


def parse_tokens(text: str, where: str) -> dict[str, str]:
    """``{token: identity}`` from token-file text; errors name the line."""
    tokens: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) == 1:
            identity, token = DEFAULT_IDENTITY, parts[0]
        elif len(parts) == 2:
            identity, token = parts
        else:
            raise TokenFileError(f"{where} line {number}: expected `TOKEN` or `NAME TOKEN`")
        tokens[token] = identity
    return tokens


@dataclass
class ApiAuth:
    """Who may change the daemon: ``identify(authorization_header) -> identity | None``."""

    static: Mapping[str, str]
    token_file: Path | None = None
    # told each time the token file's state changes: why it cannot be used, or None once it can
    on_problem: Callable[[str | None], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._file_tokens: dict[str, str] = {}
        self._file_stamp: tuple[int, int] | None = None
        self.problem: str | None = None  # why the token file cannot be used now (None: it can)
        if self.token_file is not None:
            self._file_tokens = self._read(self.token_file)  # a bad file at start-up is a configuration error
            self._file_stamp = _stamp(self.token_file)

    @classmethod
    def from_settings(cls, token_file: Path | None, token_env: str, environ: Mapping[str, str] | None = None) -> ApiAuth:
        env = os.environ if environ is None else environ
        value = (env.get(token_env) or "").strip()
        return cls({value: DEFAULT_IDENTITY} if value else {}, token_file)

    @classmethod
    def disabled(cls) -> ApiAuth:
        return cls({})

    @staticmethod
    def _read(path: Path) -> dict[str, str]:
        where = f"token file {str(path)!r}"
        try:
            return parse_tokens(path.read_text(encoding="utf-8"), where)
        except UnicodeDecodeError as exc:
            raise TokenFileError(f"{where} is not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise TokenFileError(f"{where} cannot be read: {exc.strerror or exc}") from None

    def _reload(self) -> None:
        """Read the token file again when it changed; a file that cannot be used revokes its tokens."""
        if self.token_file is None:
            return
        try:
            stamp = _stamp(self.token_file)
        except FileNotFoundError:
            self._file_tokens, self._file_stamp = {}, None  # a removed file disables its tokens
            self._set_problem(None)
            return
        except OSError as exc:
            stamp, self._file_stamp = None, None
            self._file_tokens = {}
            self._set_problem(f"token file {str(self.token_file)!r} cannot be read: {exc.strerror or exc}")
            return
        if stamp == self._file_stamp:
            return
        self._file_stamp = stamp
        try:
            self._file_tokens = self._read(self.token_file)
        except TokenFileError as exc:
            self._file_tokens = {}  # fail closed: the rotation may have been to revoke a token
            self._set_problem(str(exc))
        else:
            self._set_problem(None)

    def _set_problem(self, problem: str | None) -> None:
        if problem != self.problem:
            self.problem = problem
            if self.on_problem is not None:
                self.on_problem(problem)

    def tokens(self) -> dict[str, str]:
        with self._lock:
            self._reload()
            return {**self._file_tokens, **self.static}

    def check(self) -> str | None:
        """Why control changes are refused right now whatever the token (a token file that cannot
        be used), or None."""
        with self._lock:
            self._reload()
            return self.problem

    @property
    def enabled(self) -> bool:
        return bool(self.tokens())

    def identify(self, token: str | None) -> str | None:
        if not token:
            return None
        presented = token.encode()
        found = None
        for known, identity in self.tokens().items():
            if hmac.compare_digest(presented, known.encode()):  # no early exit: constant time over the set
                found = identity
        return found


def _stamp(path: Path) -> tuple[int, int]:
    """What changes when a file is replaced or rewritten: its modification time and size."""
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size
