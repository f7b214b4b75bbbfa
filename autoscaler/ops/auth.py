"""Bearer tokens of the control API.

Tokens come from a file (``http.token_file``: one ``TOKEN`` or ``NAME TOKEN`` per line, ``#``
comments; ``NAME`` is the identity written to the audit trail, ``operator`` by default) and
from one environment variable (``http.token_env``). The file is re-read when it changes, so
a rotated Kubernetes Secret takes effect without a restart. Without any token the control
endpoints are disabled (403), never open. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

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

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._file_tokens: dict[str, str] = {}
        self._file_stamp: tuple[int, int] | None = None
        self._reload()

    @classmethod
    def from_settings(cls, token_file: Path | None, token_env: str, environ: Mapping[str, str] | None = None) -> ApiAuth:
        env = os.environ if environ is None else environ
        value = (env.get(token_env) or "").strip()
        return cls({value: DEFAULT_IDENTITY} if value else {}, token_file)

    @classmethod
    def disabled(cls) -> ApiAuth:
        return cls({})

    def _reload(self) -> None:
        if self.token_file is None:
            return
        try:
            stat = self.token_file.stat()
        except FileNotFoundError:
            self._file_tokens, self._file_stamp = {}, None  # a removed file disables its tokens
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._file_stamp:
            self._file_tokens = parse_tokens(self.token_file.read_text(encoding="utf-8"), f"token file {str(self.token_file)!r}")
            self._file_stamp = stamp

    def tokens(self) -> dict[str, str]:
        with self._lock:
            try:
                self._reload()
            except (OSError, TokenFileError):
                pass  # keep the tokens read last time
            return {**self._file_tokens, **self.static}

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
