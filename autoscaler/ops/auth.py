"""Bearer tokens of the control API.

Tokens come from files (``http.token_file`` and ``http.token_files``: one ``TOKEN`` or ``NAME
TOKEN`` per line, ``#`` comments; ``NAME`` is the identity written to the audit trail,
``operator`` by default) and from one environment variable (``http.token_env``). A file is
re-read when it changes, so a rotated Kubernetes Secret takes effect without a restart. Without any token the control
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
from typing import Callable, Mapping, Sequence

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
    """Who may change the daemon: ``identify(authorization_header) -> identity | None``.

    ``token_file`` and ``token_files`` are read alike; on Kubernetes each Secret is its own
    file (the operator's token, your own), mounted whole so that a rotation reaches it.
    """

    static: Mapping[str, str]
    token_file: Path | None = None
    token_files: Sequence[Path] = ()
    # told each time the token files' state changes: why one cannot be used, or None once all can
    on_problem: Callable[[str | None], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._paths = tuple(dict.fromkeys([*([self.token_file] if self.token_file is not None else []), *self.token_files]))
        self._file_tokens: dict[Path, dict[str, str]] = {}
        self._file_stamps: dict[Path, tuple[int, int]] = {}
        self._problems: dict[Path, str] = {}  # files that cannot be used now, and why
        self.problem: str | None = None  # why control is refused whatever the token (None: every file can be used)
        for path in self._paths:  # a bad file at start-up is a configuration error
            if path.exists():
                self._file_tokens[path] = self._read(path)
                self._file_stamps[path] = _stamp(path)

    @classmethod
    def from_settings(
        cls, token_file: Path | None, token_env: str, environ: Mapping[str, str] | None = None, token_files: Sequence[Path] = ()
    ) -> ApiAuth:
        env = os.environ if environ is None else environ
        value = (env.get(token_env) or "").strip()
        return cls({value: DEFAULT_IDENTITY} if value else {}, token_file, tuple(token_files))

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

    def _reload(self, path: Path) -> None:
        """Read a token file again when it changed; one that cannot be used revokes its tokens."""
        try:
            stamp = _stamp(path)
        except FileNotFoundError:
            self._file_tokens.pop(path, None)  # a removed file disables its tokens
            self._file_stamps.pop(path, None)
            self._problems.pop(path, None)
            return
        except OSError as exc:
            self._file_tokens.pop(path, None)
            self._file_stamps.pop(path, None)
            self._problems[path] = f"token file {str(path)!r} cannot be read: {exc.strerror or exc}"
            return
        if stamp == self._file_stamps.get(path):
            return
        self._file_stamps[path] = stamp
        try:
            self._file_tokens[path] = self._read(path)
            self._problems.pop(path, None)
        except TokenFileError as exc:
            self._file_tokens.pop(path, None)  # fail closed: the rotation may have been to revoke a token
            self._problems[path] = str(exc)

    def _refresh(self) -> None:
        for path in self._paths:
            self._reload(path)
        problem = "; ".join(self._problems[p] for p in self._paths if p in self._problems) or None
        if problem != self.problem:
            self.problem = problem
            if self.on_problem is not None:
                self.on_problem(problem)

    def tokens(self) -> dict[str, str]:
        with self._lock:
            self._refresh()
            merged: dict[str, str] = {}
            for path in self._paths:
                merged.update(self._file_tokens.get(path, {}))
            return {**merged, **self.static}

    def check(self) -> str | None:
        """Why control changes are refused right now whatever the token (a token file that cannot
        be used), or None."""
        with self._lock:
            self._refresh()
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
