"""An in-memory cluster behind the same ports as real Spark, for reconciler scenario tests.

It models what the reconciler depends on: executors that register some seconds after a
request (or never, when requests are not granted), removals that take effect after a delay,
executors lost without notice, and queries whose batches are scripted by the test.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Sequence

from autoscaler.core.model import (
    ActionOutcome,
    BatchSample,
    Executor,
    ExecutorView,
    OutcomeKind,
    QueryChange,
    QueryParams,
    QueryStatus,
    QueryView,
    Reason,
    Snapshot,
)
from autoscaler.core.plan import request_waiting_since


@dataclass
class _Pending:
    ready_at: datetime


class FakeCluster:
    def __init__(
        self,
        now: datetime,
        *,
        executors: int = 1,
        cores: int = 1,
        can_request: bool = True,
        grant: bool = True,
        start_delay: timedelta = timedelta(seconds=3),
        remove_delay: timedelta = timedelta(seconds=5),
        rescale_pause: timedelta = timedelta(seconds=2),
        slow_rescales: bool = False,
    ) -> None:
        self.cores = cores
        self.can_request = can_request
        self.grant = grant
        self.start_delay = start_delay
        self.remove_delay = remove_delay
        self.rescale_pause = rescale_pause
        # slow_rescales: a query restarts over rescale_pause (RESCALING, old params), as on Spark;
        # otherwise at once
        self.slow_rescales = slow_rescales
        self.restarting: dict[str, tuple[datetime, QueryChange]] = {}
        self.fail_rescales: set[str] = set()  # queries whose restarts fail (and go back to their old params)
        self.pinned_shuffle: int | None = None  # shuffle partitions a checkpoint pins: what a restarted query reports
        self._next_id = 0
        self.alive: dict[str, Executor] = {}
        for _ in range(executors):
            self._add(now)
        self.requested_total: int | None = None
        self.waiting_since: datetime | None = None
        self._seen_ids: set[str] = set(self.alive)
        self.last_set_target_at: datetime | None = None
        self.pending: list[_Pending] = []
        self.removing: dict[str, datetime] = {}
        self.lost_since_observe: list[str] = []
        self.queries: dict[str, QueryView] = {}
        self.outcomes: list[ActionOutcome] = []
        self.calls: list[tuple[str, object]] = []
        self.fail_next_observe: Exception | None = None
        self.fail_next_set_target: Exception | None = None

    # --- test controls ---------------------------------------------------------------------

    def _add(self, now: datetime) -> Executor:
        e = Executor(id=str(self._next_id), cores=self.cores, added_at=now)
        self._next_id += 1
        self.alive[e.id] = e
        return e

    def add_worker(self, now: datetime) -> Executor:
        """An executor appears without being requested (reactive: a worker joined)."""
        return self._add(now)

    def lose(self, executor_id: str) -> None:
        """An executor disappears without notice (spot loss, worker killed)."""
        del self.alive[executor_id]
        self.removing.pop(executor_id, None)
        self.lost_since_observe.append(executor_id)

    def add_query(self, view: QueryView) -> None:
        self.queries[view.name] = view

    def add_batch(self, name: str, sample: BatchSample) -> None:
        view = self.queries[name]
        self.queries[name] = replace(view, samples=view.samples + (sample,))

    # --- ports -----------------------------------------------------------------------------

    def _advance(self, now: datetime) -> None:
        for name, (done_at, change) in list(self.restarting.items()):
            if done_at <= now:
                del self.restarting[name]
                self._restarted(change, done_at - self.rescale_pause)
        for p in [p for p in self.pending if p.ready_at <= now]:
            self.pending.remove(p)
            self._add(p.ready_at)
        for eid, gone_at in list(self.removing.items()):
            if gone_at <= now:
                self.alive.pop(eid, None)
                del self.removing[eid]

    def observe(self, now: datetime) -> Snapshot:
        if self.fail_next_observe is not None:
            exc, self.fail_next_observe = self.fail_next_observe, None
            raise exc
        self._advance(now)
        ids = set(self.alive)
        self.waiting_since = request_waiting_since(
            self.waiting_since,
            registered=len(self.alive) - len(self.removing),
            requested=self.requested_total,
            arrived=bool(ids - self._seen_ids),
            asked_at=self.last_set_target_at,
            now=now,
        )
        self._seen_ids = ids
        lost, self.lost_since_observe = tuple(self.lost_since_observe), []
        outcomes, self.outcomes = tuple(self.outcomes), []
        view = ExecutorView(
            alive=tuple(self.alive.values()),
            cores_per_executor=self.cores,
            can_request=self.can_request,
            can_request_reason=Reason.CAN_REQUEST_EXECUTORS if self.can_request else Reason.CANNOT_REQUEST_EXECUTORS,
            requested_total=self.requested_total,
            waiting_since=self.waiting_since,
            pending_removal=tuple(self.removing),
            lost=lost,
        )
        return Snapshot(at=now, executors=view, queries=tuple(self.queries.values()), outcomes=outcomes)

    def set_target(self, total: int, now: datetime) -> bool:
        self.calls.append(("set_target", total))
        self.last_set_target_at = now
        if self.fail_next_set_target is not None:
            exc, self.fail_next_set_target = self.fail_next_set_target, None
            raise exc
        if not self.can_request:
            return False
        self.requested_total = total
        missing = total - (len(self.alive) - len(self.removing)) - len(self.pending)
        if self.grant:
            for _ in range(max(0, missing)):
                self.pending.append(_Pending(now + self.start_delay))
        return True

    def remove(self, ids: Sequence[str], now: datetime) -> bool:
        self.calls.append(("remove", tuple(ids)))
        for eid in ids:
            self.removing[eid] = now + self.remove_delay
        if self.requested_total is not None:
            self.requested_total = max(0, self.requested_total - len(ids))
        return True

    def rescale(self, change: QueryChange, now: datetime) -> bool:
        self.calls.append(("rescale", (change.name, change.to_params.parallelism)))
        if self.slow_rescales:
            self.queries[change.name] = replace(self.queries[change.name], status=QueryStatus.RESCALING)
            self.restarting[change.name] = (now + self.rescale_pause, change)
        else:
            self._restarted(change, now)
        return True

    def _restarted(self, change: QueryChange, started: datetime) -> None:
        view = self.queries[change.name]
        ok = change.name not in self.fail_rescales
        params = change.to_params if ok else change.from_params
        if self.pinned_shuffle is not None:
            params = replace(params, shuffle_partitions=self.pinned_shuffle)
        self.queries[change.name] = replace(view, params=params, status=QueryStatus.RUNNING, run_started_at=started)
        self.outcomes.append(
            ActionOutcome(
                subject=change.name,
                kind=OutcomeKind.RESCALE,
                ok=ok,
                started_at=started,
                finished_at=started + self.rescale_pause,
                message="" if ok else "the new run failed to start",
                pause=self.rescale_pause if ok else None,
                from_params=change.from_params,
                to_params=change.to_params,
            )
        )


def steady_batches(
    *,
    start: datetime,
    count: int,
    rate: float,
    per_slot: float = 900.0,
    cores: int = 4,
    parallelism: int = 8,
    per_task: float = 0.05,
    fixed: float = 0.2,
    trigger: timedelta = timedelta(seconds=2),
    backlog: int | None = 0,
) -> list[BatchSample]:
    """Batches of a query receiving ``rate`` rows/s, timed by the batch cost model."""
    from autoscaler.core.model import BatchCostModel

    model = BatchCostModel(per_slot=per_slot, per_task=per_task, fixed=fixed)
    out = []
    t = start
    for i in range(count):
        rows = int(rate * trigger.total_seconds())
        seconds = model.duration(parallelism, cores, rows)
        out.append(
            BatchSample(
                batch_id=i,
                started_at=t,
                duration=timedelta(seconds=seconds),
                input_rows=rows,
                input_rate=rate,
                processing_rate=rows / seconds if seconds else None,
                backlog_rows=backlog,
                cores=cores,
                parallelism=parallelism,
                fixed_overhead=timedelta(seconds=fixed),
            )
        )
        t += max(trigger, timedelta(seconds=seconds))
    return out


def query_view(name: str = "q", parallelism: int = 8, **kw: object) -> QueryView:
    return QueryView(
        name=name,
        status=kw.pop("status", QueryStatus.RUNNING),  # type: ignore[arg-type]
        params=QueryParams(parallelism=parallelism, trigger_interval=kw.pop("trigger", timedelta(seconds=2))),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


class LoadFeeder:
    """Appends the batches a query would have run since the last call, at the current scale.

    Rows arrive at ``rate``; a batch starting at ``t`` takes every row that arrived before
    ``t`` and lasts as the batch cost model says for the partitions and the cores alive; a
    batch longer than the 2 s trigger delays the next one, so batches grow when behind.
    """

    def __init__(
        self,
        cluster: FakeCluster,
        name: str,
        start: datetime,
        per_slot: float = 900.0,
        per_task: float = 0.02,
        fixed: float = 0.2,
        report_backlog: bool = False,
    ):
        from autoscaler.core.model import BatchCostModel

        self.cluster, self.name = cluster, name
        self.model = BatchCostModel(per_slot=per_slot, per_task=per_task, fixed=fixed)
        self.fixed = fixed
        self.t = start + timedelta(seconds=2)  # next batch start
        self.gen_time = start
        self.generated = 0.0
        self.processed = 0
        self.batch_id = 0
        self.report_backlog = report_backlog  # rows that arrived while the batch ran, as a source with offsets reports

    def run_until(self, now: datetime, rate: float) -> None:
        while True:
            view = self.cluster.queries[self.name]
            cores = sum(e.cores for e in self.cluster.alive.values())
            self.generated += rate * (self.t - self.gen_time).total_seconds()
            self.gen_time = self.t
            rows = int(self.generated) - self.processed
            seconds = self.model.duration(view.params.parallelism, cores, rows) if cores else 3600.0
            if self.t + timedelta(seconds=seconds) > now:
                return  # this batch has not finished yet
            self.processed += rows
            self.cluster.add_batch(
                self.name,
                BatchSample(
                    batch_id=self.batch_id,
                    started_at=self.t,
                    duration=timedelta(seconds=seconds),
                    input_rows=rows,
                    input_rate=rate,
                    processing_rate=rows / seconds,
                    backlog_rows=int(rate * seconds) if self.report_backlog else None,
                    cores=cores,
                    parallelism=view.params.parallelism,
                    fixed_overhead=timedelta(seconds=self.fixed),
                ),
            )
            self.batch_id += 1
            self.t += timedelta(seconds=max(2.0, seconds))


class FlakyStateStore:
    """A state store whose writes fail while ``broken`` (a full disk, a revoked permission)."""

    def __init__(self) -> None:
        from autoscaler.runtime.state import MemoryStateStore

        self.inner, self.broken = MemoryStateStore(), False

    def load(self) -> Any:
        return self.inner.load()

    def save(self, state: Any) -> None:
        self.check_writable()
        self.inner.save(state)

    def check_writable(self) -> None:
        from autoscaler.runtime.state import StateStoreError

        if self.broken:
            raise StateStoreError("state file '/var/lib/x/state.json': cannot be written: [Errno 28] No space left on device")

    def __str__(self) -> str:
        return "flaky state store"
