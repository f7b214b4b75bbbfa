"""List+watch of the SparkStreamingApps in one namespace, on resourceVersions.

1. List: every app is handed over (``on_list``), the list's ``resourceVersion`` remembered.
2. Watch from it (with bookmarks, which move the version on without an object); each event is
   handed over (``on_event``) and moves the version.
3. The server ends a watch after its timeout: watch again from the last version.
4. 410 Gone (the version was compacted away): list again (1).
5. Other errors: back off (1, 2, 4 ... s up to a minute) and watch again; they are counted.

Not the client's ``SharedInformer``: in v37 its first list takes ``getattr(resp, "items")`` of
the dict that ``CustomObjectsApi`` returns, which is ``dict.items`` (a method), fails, and it
retries that every 5 s forever; its other watch errors reconnect with no back-off.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from autoscaler.k8s.errors import Gone, KubeError
from autoscaler.k8s.gateway import KubeGateway, WatchEvent
from autoscaler.runtime.logs import get_logger

log = get_logger("autoscaler.operator.watch")
MAX_BACKOFF = 60.0


class AppWatch:
    def __init__(
        self,
        gateway: KubeGateway,
        namespace: str,
        *,
        on_list: Callable[[str, list[dict[str, Any]]], None],
        on_event: Callable[[str, WatchEvent], None],
        stop: threading.Event,
        timeout_seconds: int = 300,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.gateway = gateway
        self.namespace = namespace
        self.on_list = on_list
        self.on_event = on_event
        self.stop = stop
        self.timeout_seconds = timeout_seconds
        self.on_error = on_error
        self.resource_version: str | None = None
        self.lists = 0  # how often it listed (the first, then after each 410)

    def run(self) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch()
                failures = 0
            except Gone as exc:
                log.info("watch_expired", namespace=self.namespace, error=str(exc))
                self.resource_version = None  # relist
            except KubeError as exc:
                failures += 1
                delay = min(MAX_BACKOFF, 2.0 ** (failures - 1))
                log.warning("watch_failed", namespace=self.namespace, error=str(exc), retry_in_seconds=delay)
                if self.on_error is not None:
                    self.on_error(exc)
                self.stop.wait(delay)

    def run_once(self) -> None:
        """One list (when needed) and one watch until the server ends it (tests)."""
        try:
            if self.resource_version is None:
                self._list()
            self._watch()
        except Gone:
            self.resource_version = None

    def _list(self) -> None:
        listed = self.gateway.list_apps(self.namespace)
        self.lists += 1
        self.on_list(self.namespace, listed.items)
        self.resource_version = listed.resource_version

    def _watch(self) -> None:
        assert self.resource_version is not None
        for event in self.gateway.watch_apps(self.namespace, self.resource_version, self.timeout_seconds):
            if event.resource_version:
                self.resource_version = event.resource_version
            if event.type != "BOOKMARK":
                self.on_event(self.namespace, event)
            if self.stop.is_set():
                return
