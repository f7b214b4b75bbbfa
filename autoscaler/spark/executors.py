"""Executors of a running Spark application: observed through the driver, requested through it.

Observation uses the driver's REST API (``/api/v1/applications/<id>/executors``: ids, cores,
active tasks, add time) and falls back to py4j ``getExecutorIds()`` when the UI is off.
Actuation uses Spark's own executor-request API in the driver, the path Spark takes on
standalone, Kubernetes and YARN alike: ``requestTotalExecutors(n)`` pins an absolute target,
``killExecutors(ids)`` removes named executors (and lowers the target by as many).
"""

from __future__ import annotations

import re
import threading
from datetime import datetime, timedelta
from typing import Any, Sequence

from autoscaler.core.model import Executor, ExecutorView, Reason
from autoscaler.core.plan import request_waiting_since
from autoscaler.runtime.logs import get_logger
from autoscaler.runtime.ports import NotReady
from autoscaler.spark.rest import driver_api, get_json

log = get_logger("autoscaler.spark.executors")

# failed reads of the driver's executors REST API in a row before a warning (then not again
# until it has answered)
REST_FAILURES_TO_WARN = 3

_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]")
REMOVAL_TIMEOUT = timedelta(seconds=120)


class ExecutorRequestError(RuntimeError):
    """An executor request the cluster manager did not take (it raised rather than said no)."""


def java_error(exc: BaseException) -> str:
    """A JVM exception in one line: its innermost cause (``IOException: Failed to send RPC ...``),
    not the stack trace py4j carries along."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None and java.getCause() != java:
                java = java.getCause()
            return str(java.toString())
        except Exception:  # the JVM is going away: the Python side's first line is the best there is
            pass
    try:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:  # a Java exception whose JVM is gone cannot even say what it was
        first = ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def driver_runs_tasks(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N, F]``: one JVM whose driver runs the tasks, where no
    executor ever registers (``local-cluster`` starts real executors)."""
    master = master.strip()
    return master == "local" or master.startswith("local[")


def request_capability(master: str, dynamic_allocation: bool) -> tuple[bool, Reason]:
    """Whether the driver can ask the cluster manager for executors."""
    if dynamic_allocation:
        return False, Reason.DYNAMIC_ALLOCATION_ON
    if master.startswith(("local-cluster", "spark://", "k8s://", "yarn")):
        return True, Reason.CAN_REQUEST_EXECUTORS
    return False, Reason.CANNOT_REQUEST_EXECUTORS  # local[*]: one JVM, nothing to request


def cores_per_executor(master: str, conf: dict[str, str], configured: int | None) -> int:
    if configured:
        return configured
    if "spark.executor.cores" in conf:
        return int(conf["spark.executor.cores"])
    m = _LOCAL_CLUSTER.match(master)
    return int(m.group(2)) if m else 1


def parse_executors(payload: list[dict[str, Any]]) -> tuple[Executor, ...]:
    """Active executors (not the driver) from the REST ``/executors`` payload."""
    out = []
    for e in payload:
        if e.get("id") == "driver" or not e.get("isActive", True):
            continue
        added = e.get("addTime")
        out.append(
            Executor(
                id=str(e["id"]),
                cores=int(e.get("totalCores") or e.get("maxTasks") or 1),
                active_tasks=int(e.get("activeTasks") or 0),
                added_at=_parse_spark_time(added) if added else None,
            )
        )
    return tuple(out)


def _id_order(eid: str) -> tuple[int, str]:
    return (int(eid), eid) if eid.isdigit() else (-1, eid)


def _parse_spark_time(text: str) -> datetime | None:
    # Spark writes e.g. "2026-11-22T08:12:04.893GMT"
    try:
        return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        return None


class SparkExecutors:
    """Executor observation and actuation for one SparkContext (``ExecutorActuator``)."""

    def __init__(self, spark: Any, configured_cores: int | None = None) -> None:
        sc = spark.sparkContext
        self._sc = sc
        self._jsc = sc._jsc.sc()
        self._jvm = sc._jvm
        conf = dict(sc.getConf().getAll())
        self.master = sc.master
        dyn = conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true"
        self.can_request, self.capability_reason = request_capability(self.master, dyn)
        self.cores = cores_per_executor(self.master, conf, configured_cores)
        self._rest = driver_api(spark, "executors")
        self._lock = threading.Lock()
        self.requested_total: int | None = None
        self._last_set_at: datetime | None = None
        self._waiting_since: datetime | None = None
        self._removing: dict[str, datetime] = {}  # asked to remove, still registered
        self._removed_by_us: set[str] = set()  # so their disappearance is not reported as lost
        self._previous: set[str] | None = None
        self._rest_failures = 0  # in a row

    # --- observation -----------------------------------------------------------------------

    def _fetch(self) -> tuple[Executor, ...]:
        if self._rest:
            try:
                executors = parse_executors(get_json(self._rest, 5))
                self._rest_failures = 0
                return executors
            except (OSError, ValueError) as exc:
                # the context's executor ids stand in; one slow answer from a loaded driver is
                # not worth a user's attention, a REST API that keeps failing is (said once)
                self._rest_failures += 1
                warn = self._rest_failures == REST_FAILURES_TO_WARN
                (log.warning if warn else log.debug)(
                    "executor_rest_failed", error=str(exc), failures_in_a_row=self._rest_failures, fallback="the context's executor ids"
                )
        try:
            ids = self._jsc.getExecutorIds()
            return tuple(Executor(id=str(ids.apply(i)), cores=self.cores) for i in range(ids.size()))
        except Exception as exc:  # the context is stopping or not started
            raise NotReady(f"cannot read executors: {exc}") from exc

    def observe(self, now: datetime) -> ExecutorView:
        alive = self._fetch()
        ids = {e.id for e in alive}
        with self._lock:
            for eid, since in list(self._removing.items()):
                if eid not in ids or now - since > REMOVAL_TIMEOUT:
                    del self._removing[eid]
            previous = self._previous if self._previous is not None else ids
            gone = previous - ids
            lost = tuple(sorted(gone - self._removed_by_us, key=_id_order))
            self._removed_by_us -= gone
            self._previous = ids
            self._waiting_since = request_waiting_since(
                self._waiting_since,
                registered=len(ids) - len(self._removing),
                requested=self.requested_total,
                arrived=bool(ids - previous),
                asked_at=self._last_set_at,
                now=now,
            )
            return ExecutorView(
                alive=alive,
                cores_per_executor=self.cores,
                can_request=self.can_request,
                can_request_reason=self.capability_reason,
                requested_total=self.requested_total,
                waiting_since=self._waiting_since,
                pending_removal=tuple(sorted(self._removing)),
                lost=lost,
            )

    # --- actuation -------------------------------------------------------------------------

    def set_target(self, total: int, now: datetime) -> bool:
        if not self.can_request:
            return False
        empty = self._jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(self._jvm.java.util.HashMap())
        failure = None
        try:
            ok = bool(self._jsc.requestTotalExecutors(int(total), 0, empty))
        except Exception as exc:  # the cluster manager did not answer (a standalone master down: the RPC fails)
            ok, failure = False, java_error(exc)
        with self._lock:
            # what we asked for, accepted or not: a refused request (the master down, say) is one
            # not granted, and its clock must run for the fallback to reactive behaviour
            if total != self.requested_total:
                self._last_set_at = now
            self.requested_total = total
        if failure is not None:
            raise ExecutorRequestError(f"the cluster manager did not take the request for {total} executor(s): {failure}")
        if not ok:
            log.warning("executor_request_refused", total=total, detail="the cluster manager refused the request; it is asserted again every tick")
        return ok

    def remove(self, ids: Sequence[str], now: datetime) -> bool:
        if not self.can_request or not ids:
            return False
        seq = self._jvm.org.apache.spark.api.python.PythonUtils.toSeq(list(ids))
        ok = bool(self._jsc.killExecutors(seq))
        with self._lock:
            if ok:
                self._removed_by_us |= set(ids)
                for eid in ids:
                    self._removing[eid] = now
                if self.requested_total is not None:
                    self.requested_total = max(0, self.requested_total - len(ids))
        return ok

    def registered_cores(self) -> int:
        """Cores of the executors registered right now (cheap py4j call, any thread)."""
        return int(self._jsc.getExecutorIds().size()) * self.cores

    def wait_for(self, count: int, timeout: timedelta, clock: Any, stop: threading.Event | None = None) -> int:
        """Block until ``count`` executors are registered or ``timeout`` passes; return how many are."""
        deadline = clock.now() + timeout
        alive = len(self._fetch())
        while alive < count and clock.now() < deadline:
            if clock.sleep(0.5, stop):
                break
            alive = len(self._fetch())
        return alive
