"""The controller: a keyed work queue, workers, a resync, and the watches feeding them.

Each app (``namespace/name``) is one key. A key is processed by one worker at a time (a key
added while it is being processed is processed again afterwards, once); the queue holds it
once however often it is added. A pass that fails is retried after a per-key back-off
(1, 2, 4 ... s up to the resync interval); a pass that succeeds asks for its next one (the
resync interval, sooner while a daemon starts). Every key is also added every
``resync_interval``: that is the daemon poll.

Watch events of an app whose ``metadata.generation`` did not change are status writes (ours)
or label changes: the cache takes them, no pass is queued for them; otherwise every status
write would trigger the next pass at once.
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import Any, Callable

from autoscaler.k8s.gateway import KubeGateway, WatchEvent
from autoscaler.operator.config import AppRef
from autoscaler.operator.reconcile import AppReconciler
from autoscaler.operator.settings import OperatorSettings
from autoscaler.operator.watch import AppWatch
from autoscaler.runtime.logs import get_logger

log = get_logger("autoscaler.operator")


class WorkQueue:
    """Keys to process, each at most once at a time; ``add_after`` delays one."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._cond = threading.Condition()
        self._ready: list[str] = []
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._again: set[str] = set()  # added while active
        self._delayed: list[tuple[float, str]] = []
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._active:
                self._again.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            heapq.heappush(self._delayed, (self._now() + delay, key))
            self._cond.notify()

    def _promote(self) -> float | None:
        """Move due keys to ready; the seconds until the next one is due."""
        now = self._now()
        while self._delayed and self._delayed[0][0] <= now:
            _, key = heapq.heappop(self._delayed)
            if key in self._active:
                self._again.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
        return self._delayed[0][0] - now if self._delayed else None

    def get(self, timeout: float | None = None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                wait = self._promote()
                if self._ready:
                    key = self._ready.pop(0)
                    self._queued.discard(key)
                    self._active.add(key)
                    return key
                if self._closed:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(min(x for x in (wait, left, 1.0) if x is not None))

    def done(self, key: str) -> None:
        with self._cond:
            self._active.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._queued.add(key)
                self._ready.append(key)
                self._cond.notify()

    def due(self) -> list[str]:
        """Keys ready now (tests)."""
        with self._cond:
            self._promote()
            return list(self._ready)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Controller:
    def __init__(
        self,
        gateway: KubeGateway,
        reconciler: AppReconciler,
        settings: OperatorSettings,
        *,
        queue: WorkQueue | None = None,
        on_pass: Callable[[str, float, BaseException | None], None] | None = None,
    ) -> None:
        self.gateway = gateway
        self.reconciler = reconciler
        self.settings = settings
        self.queue = queue or WorkQueue()
        self.on_pass = on_pass
        self.cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- what the watches report ------------------------------------------------------------------

    def on_list(self, namespace: str, items: list[dict[str, Any]]) -> None:
        keys = {AppRef.of(i).key for i in items}
        with self._lock:
            for gone in [k for k in self.cache if k.startswith(f"{namespace}/") and k not in keys]:
                self._deleted(self.cache.pop(gone))
            for item in items:
                self.cache[AppRef.of(item).key] = item
        for key in sorted(keys):
            self.queue.add(key)

    def on_event(self, namespace: str, event: WatchEvent) -> None:
        obj = event.object
        key = AppRef.of(obj).key
        with self._lock:
            old = self.cache.get(key)
            if event.type == "DELETED":
                self.cache.pop(key, None)
                self._deleted(obj)
                return
            self.cache[key] = obj
        if old is None or (old.get("metadata") or {}).get("generation") != (obj.get("metadata") or {}).get("generation"):
            self.queue.add(key)

    def _deleted(self, obj: dict[str, Any]) -> None:
        ref = AppRef.of(obj)
        log.info("app_deleted", app=ref.key, detail="its children are garbage-collected with it; the operator deletes nothing")
        self.reconciler.forget(ref)
        self._failures.pop(ref.key, None)

    # --- passes -------------------------------------------------------------------------------------

    def process(self, key: str) -> None:
        """One pass of one key (the workers' loop body; tests call it directly)."""
        with self._lock:
            app = self.cache.get(key)
        if app is None:
            return
        started = time.monotonic()
        try:
            outcome = self.reconciler.reconcile(app)
        except Exception as exc:  # any failure of one app must not stop the others
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = min(self.settings.resync_interval.total_seconds(), 2.0 ** (failures - 1))
            log.warning("reconcile_failed", app=key, error=str(exc), retry_in_seconds=delay, exc_info=True)
            self.queue.add_after(key, delay)
            if self.on_pass is not None:
                self.on_pass(key, time.monotonic() - started, exc)
            return
        self._failures.pop(key, None)
        if outcome.written is not None:
            with self._lock:  # our status, unless a newer version arrived meanwhile (resourceVersions are opaque: compared for equality only)
                held = self.cache.get(key)
                if held is not None and held["metadata"].get("resourceVersion") == app["metadata"].get("resourceVersion"):
                    self.cache[key] = outcome.written
        self.queue.add_after(key, outcome.requeue_after.total_seconds())
        if self.on_pass is not None:
            self.on_pass(key, time.monotonic() - started, None)

    def resync(self) -> None:
        with self._lock:
            keys = sorted(self.cache)
        for key in keys:
            self.queue.add(key)

    # --- threads --------------------------------------------------------------------------------------

    def start(self) -> None:
        """Watches (one per namespace), workers and the resync ticker, as daemon threads."""
        for ns in self.settings.namespaces:
            watch = AppWatch(self.gateway, ns, on_list=self.on_list, on_event=self.on_event, stop=self.stop_event,
                             timeout_seconds=int(self.settings.watch_timeout.total_seconds()))
            self._spawn(f"watch-{ns}", watch.run)
        for i in range(self.settings.workers):
            self._spawn(f"worker-{i}", self._work)
        self._spawn("resync", self._resync_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=f"operator-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _work(self) -> None:
        while not self.stop_event.is_set():
            key = self.queue.get(timeout=1.0)
            if key is None:
                continue
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def _resync_loop(self) -> None:
        interval = self.settings.resync_interval.total_seconds()
        while not self.stop_event.wait(interval):
            self.resync()

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        self.queue.close()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    @property
    def running(self) -> bool:
        return bool(self._threads) and not self.stop_event.is_set()


__all__ = ["Controller", "WorkQueue"]
