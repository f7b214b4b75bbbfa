"""Bearer tokens of the control API.

Tokens come from files (``http.token_file`` and ``http.token_files``: one ``TOKEN`` or ``NAME
TOKEN`` per line, ``#`` comments; ``NAME`` is the identity written to the audit trail,
``operator`` by default) and from one environment variable (``http.token_env``). A file is
re-read when it changes, so a rotated Kubernetes Secret takes effect without a restart. Without any token the control
endpoints are disabled (403), never open. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

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

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._paths = tuple(dict.fromkeys([*([self.token_file] if self.token_file is not None else []), *self.token_files]))
        self._file_tokens: dict[Path, dict[str, str]] = {}
        self._file_stamps: dict[Path, tuple[int, int]] = {}
        for path in self._paths:
            self._reload(path)

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

    def _reload(self, path: Path) -> None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._file_tokens.pop(path, None)  # a removed file disables its tokens
            self._file_stamps.pop(path, None)
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._file_stamps.get(path):
            self._file_tokens[path] = parse_tokens(path.read_text(encoding="utf-8"), f"token file {str(path)!r}")
            self._file_stamps[path] = stamp

    def tokens(self) -> dict[str, str]:
        with self._lock:
            merged: dict[str, str] = {}
            for path in self._paths:
                try:
                    self._reload(path)
                except (OSError, TokenFileError):
                    pass  # keep the tokens read last time
                merged.update(self._file_tokens.get(path, {}))
            return {**merged, **self.static}

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
