"""The daemon's state in a Kubernetes ConfigMap (``state.configmap``), behind the ``StateStore`` port.

The state (scaling history, rate history for the forecasts, pending scale-downs, operator
overrides) is the same versioned JSON the file store writes, gzip-compressed into
``binaryData["state.json.gz"]``: a week of rates is 2,304 points per query, some 150 KB of
JSON, and a ConfigMap holds at most 1 MiB (the API server's limit on ``data`` plus
``binaryData``). A state that would still be larger than :data:`MAX_BYTES` compressed is
refused with :class:`StateStoreError` naming the ConfigMap, the size and the limit: the tick
goes on, the REST API's changes answer 503, as with a file that cannot be written.

Writes are optimistic: a replace carries the ``resourceVersion`` last read or written. When
another writer changed the ConfigMap meanwhile (409), the store reads it again and writes
once more on the fresh version, and logs who it overwrote: the daemon is the only writer of
its state (one pod, a StatefulSet), so the other writer was the operator applying the
ConfigMap's labels, or a previous pod of the same app. A second conflict in a row is an
error: two daemons are writing one state. An unchanged state is not written again.

The operator creates the ConfigMap (with an owner reference to the app, so it is deleted
with it); the daemon creates it itself when it does not exist.
"""

from __future__ import annotations

import base64
import gzip
import threading
from typing import Any

from autoscaler.k8s.errors import Conflict, KubeError, NotFound
from autoscaler.k8s.gateway import ConfigMapApi
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.state.base import StateStoreError, decode_state, encode_state

log = get_logger("autoscaler.k8s.state")

KEY = "state.json.gz"
# below the API server's 1 MiB (1,048,576 bytes) for data plus binaryData, as Flink's
# Kubernetes state store caps at 1,000,000; our ConfigMap holds nothing else
MAX_BYTES = 1_000_000


def compress(text: str) -> bytes:
    """gzip with no timestamp: the same state gives the same bytes."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


class ConfigMapStateStore:
    def __init__(self, api: ConfigMapApi, namespace: str, name: str, *, max_bytes: int = MAX_BYTES) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._object: dict[str, Any] | None = None  # the ConfigMap as last read or written
        self._last_text: str | None = None

    def __repr__(self) -> str:
        return f"ConfigMapStateStore({self.namespace!r}, {self.name!r})"

    def __str__(self) -> str:
        return f"state ConfigMap {self.namespace}/{self.name}"

    # --- the port -----------------------------------------------------------------------------

    def load(self) -> dict[str, Any] | None:
        with self._lock:
            obj = self._read()
            raw = (obj or {}).get("binaryData", {}).get(KEY)
            if raw is None:
                return None  # absent, or created empty by the operator
            try:
                text = gzip.decompress(base64.b64decode(raw, validate=True)).decode("utf-8")
            except (ValueError, OSError, EOFError, UnicodeDecodeError) as exc:
                raise StateStoreError(f"{self}: {KEY} is not gzip-compressed UTF-8 JSON ({exc}); remove the key to start afresh") from None
            state = decode_state(text, str(self))
            self._last_text = text
            return state

    def save(self, state: dict[str, Any]) -> None:
        text = encode_state(state)  # fails (TypeError, ValueError) before anything is sent
        data = compress(text)
        if len(data) > self.max_bytes:
            raise StateStoreError(
                f"{self}: the state is {len(data):,} bytes compressed, more than the {self.max_bytes:,} a ConfigMap can hold; "
                "shorten history.rate_max_age or history.max_age, or host fewer queries in one daemon"
            )
        with self._lock:
            if text == self._last_text:
                return
            self._write(data)
            self._last_text = text

    def check_writable(self) -> None:
        """A server-side dry run of the next write: RBAC, admission and the namespace are checked,
        nothing is stored."""
        with self._lock:
            obj = self._object if self._object is not None else self._read()
            try:
                if obj is None:
                    self.api.create_config_map(self.namespace, self._body(None, b""), dry_run=True)
                else:
                    self.api.replace_config_map(self.namespace, self.name, obj, dry_run=True)
            except KubeError as exc:
                raise StateStoreError(f"{self}: cannot be written: {exc}") from exc

    # --- plumbing -----------------------------------------------------------------------------

    def _read(self) -> dict[str, Any] | None:
        try:
            obj = self.api.read_config_map(self.namespace, self.name)
        except KubeError as exc:
            raise StateStoreError(f"{self}: cannot be read: {exc}") from exc
        self._object = obj
        return obj

    def _body(self, current: dict[str, Any] | None, data: bytes) -> dict[str, Any]:
        """``current`` with the new state; its labels, owner references and other keys kept."""
        body: dict[str, Any] = dict(current) if current is not None else {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": self.name}}
        binary: dict[str, str] = dict(body.get("binaryData") or {})
        binary[KEY] = base64.b64encode(data).decode("ascii")
        body["binaryData"] = binary
        return body

    def _write(self, data: bytes) -> None:
        for attempt in (1, 2):
            current = self._object
            try:
                if current is None:
                    self._object = self.api.create_config_map(self.namespace, self._body(None, data))
                else:
                    self._object = self.api.replace_config_map(self.namespace, self.name, self._body(current, data))
                return
            except NotFound as exc:  # deleted since it was read: create it again
                if attempt == 2:
                    raise StateStoreError(f"{self}: cannot be written: {exc}") from exc
                self._object = None
            except Conflict as exc:
                if attempt == 2:
                    raise StateStoreError(f"{self}: changed by another writer twice in a row ({exc}); is a second daemon running on this state?") from exc
                fresh = self._read()
                log.warning("state_configmap_conflict", configmap=f"{self.namespace}/{self.name}", error=str(exc),
                            overwritten_by=_last_manager(fresh))
            except KubeError as exc:
                raise StateStoreError(f"{self}: cannot be written: {exc}") from exc


def _last_manager(obj: dict[str, Any] | None) -> str | None:
    """The field manager that wrote the ConfigMap last (``metadata.managedFields``), for the log."""
    fields = (obj or {}).get("metadata", {}).get("managedFields") or []
    latest = max(fields, key=lambda f: f.get("time") or "", default=None)
    return latest.get("manager") if latest else None
