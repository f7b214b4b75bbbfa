"""What every state store shares: the error type, JSON encoding and an in-memory store."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

FORMAT_VERSION = 1


class StateStoreError(RuntimeError):
    """The stored state cannot be read or written; the message names the store and the problem."""


def encode_state(state: dict[str, Any]) -> str:
    """The state as JSON text in a versioned envelope; raises TypeError/ValueError if it is not JSON."""
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict, got {type(state).__name__}")
    return json.dumps({"version": FORMAT_VERSION, "state": state}, allow_nan=False, sort_keys=True, indent=1)


def decode_state(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StateStoreError(f"{where}: not valid JSON ({exc}); fix or remove it to start afresh") from None
    except RecursionError:  # no state the daemon writes nests more than a few levels
        raise StateStoreError(f"{where}: not valid state (nested too deeply); fix or remove it to start afresh") from None
    if not isinstance(data, dict) or not isinstance(data.get("state"), dict):
        raise StateStoreError(f"{where}: expected an object with a 'state' object; fix or remove it to start afresh")
    if data.get("version") != FORMAT_VERSION:
        raise StateStoreError(f"{where}: unsupported state format version {data.get('version')!r} (this daemon reads {FORMAT_VERSION})")
    state: dict[str, Any] = data["state"]
    return state


class MemoryStateStore:
    """Keeps the state in memory (tests; a daemon without ``state.path`` simply has no store)."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return "memory state store"

    def load(self) -> dict[str, Any] | None:
        with self._lock:
            return None if self._text is None else decode_state(self._text, str(self))

    def save(self, state: dict[str, Any]) -> None:
        text = encode_state(copy.deepcopy(state))
        with self._lock:
            self._text = text

    def check_writable(self) -> None:
        """Memory can always be written."""
