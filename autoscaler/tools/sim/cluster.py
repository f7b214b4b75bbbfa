"""A simulated Spark Structured Streaming application behind the reconciler's ports.

:class:`SimCluster` implements ``ClusterObserver``, ``ExecutorActuator`` and ``QueryActuator``
(:mod:`autoscaler.runtime.ports`), so the real :class:`~autoscaler.runtime.reconciler.Reconciler` drives it
exactly as it drives Spark. Between two observations it advances a discrete-event model:

* **input**: rows arrive as the :class:`~autoscaler.tools.sim.workload.Workload` says; Kafka-like
  offsets, so a batch takes every row that arrived before its trigger (or at most
  ``max_rows_per_batch``) and the backlog is ``latestOffset - endOffset`` at planning;
* **micro-batches** (Spark's ``ProcessingTime`` trigger): a batch starts at the next multiple
  of the trigger interval, or at once when the previous one overran; it costs
  ``o + ceil(P / C) x (w + k x min(P, C) + R / (P x mu))`` on ``C`` free task slots, with
  lognormal noise and occasional slow batches. Batches grow when behind. Executors that
  register during a batch pick up its remaining tasks; new executors pay a warm-up once;
* **idle triggers**: a trigger that finds no new rows runs no batch; as Spark 4 does, the query
  is reported idle (``QueryIdleEvent``) at such a trigger once ``no_data_progress_interval`` has
  passed since the last batch ended or the last idle report, and a batch's
  ``inputRowsPerSecond`` counts its rows over the time since the previous trigger, batch or not;
* **executors**: a request registers after the start-up latency (or never, beyond
  ``max_grantable_executors``); lowering the target cancels pending requests; a removed
  executor takes no new task and is gone after the removal delay; executors can be lost;
* **query rescale** (restart from the checkpoint): stop at the next batch boundary, restart
  after ``restart_delay``, the first batch of the new run is cold; the measured pause (stop to
  end of that first batch, or to the run's first trigger when no data waits: Spark reports that
  trigger's progress too) is reported as an :class:`~autoscaler.core.model.ActionOutcome`.

Batches are reported as the Spark listener reports them (:mod:`autoscaler.spark.host`): the
same cold rule (the first two batches of a run, and batches right after the cores changed),
``cores`` registered when the batch ended, ``fixed_overhead`` = triggerExecution - addBatch.

The simulator also keeps the truth the daemon cannot see (exact lag, executor-seconds), which
:mod:`autoscaler.tools.sim.metrics` turns into the benchmark's KPIs.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Sequence

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
    RunningRead,
    Snapshot,
)
from autoscaler.core.plan import request_waiting_since
from autoscaler.tools.sim.config import SimConfig
from autoscaler.tools.sim.workload import Workload

WARMUP_BATCHES = 2  # as autoscaler.spark.host: batches of a new run reported as cold
_EPS = 1e-9


@dataclass(slots=True)
class _Batch:
    batch_id: int
    start: float  # trigger time (planning starts)
    rows: int
    end_offset: int  # rows consumed once this batch commits
    available: int  # latest offset at planning
    tasks: int
    tau: float  # seconds per task
    fixed: float  # seconds of planning/commit
    work_start: float  # tasks start here
    remaining: float  # tasks left at seg_start
    seg_start: float
    slots: int
    end: float
    since_trigger: float | None = None  # seconds since the run's previous trigger (Spark's inputTimeSec)


@dataclass(slots=True)
class _Stop:
    change: QueryChange
    decided_at: float
    stopped_at: float | None = None


class SimCluster:
    """One simulated application with one query, driven through the reconciler's ports."""

    def __init__(
        self,
        *,
        config: SimConfig,
        workload: Workload,
        executors: int,
        partitions: int,
        query_name: str = "q",
        seed: int = 0,
        max_samples: int = 240,
        max_parallelism: int | None = None,
        partitions_per_core: int = 2,
        can_request: bool = True,
        report_batch_rows: bool = True,
        report_planned_rows: bool = True,
    ) -> None:
        self.cfg = config
        # the rows a running batch's finished tasks read, as the host reads them from Spark's
        # REST API with window.running_batch_rows (off: not reported, as with the host's reader off)
        self.report_batch_rows = report_batch_rows
        # a running batch's rows from its start, as the host reads them from the checkpoint's
        # offset log with window.planned_batch_rows (the simulated source's offsets count rows,
        # as Kafka's and the trace source's do)
        self.report_planned_rows = report_planned_rows
        self.workload = workload
        self.start = workload.start
        self.rng = random.Random(seed)
        self.t = 0.0
        self.can_request = can_request
        # executors
        self._next_id = 0
        self.alive: dict[str, float] = {}  # id -> registered at
        self.starting: list[float] = []  # ready times, ascending
        self.removing: dict[str, float] = {}  # id -> gone at
        self._gone: list[tuple[float, str]] = []  # heap of (gone at, id) of self.removing: the next first
        self.requested_total: int | None = None
        self._waiting_since: datetime | None = None
        self._last_set_at: datetime | None = None
        self._lost: list[str] = []
        self._next_loss = math.inf
        self._cold: set[str] = set()  # registered executors that have not run a task yet
        self._view_alive: tuple[Executor, ...] | None = None
        self._view: ExecutorView | None = None  # the last observed executors
        for _ in range(executors):
            self._register(0.0)
        self._cold.clear()  # the initial executors are warm
        self._observed_ids = self._next_id  # executor ids handed out before the last observation
        # the query
        self.name = query_name
        self.max_samples = max_samples
        self._set_params(QueryParams(parallelism=partitions, trigger_interval=timedelta(seconds=config.trigger_interval), max_rows_per_batch=config.max_rows_per_batch))
        self.min_parallelism = config.min_partitions
        self.max_parallelism = max(partitions, max_parallelism or partitions)
        self.partitions_per_core = partitions_per_core
        self.status = QueryStatus.RUNNING
        self.run_started = 0.0
        self._run_started_at = self.at(0.0)
        self.batches_in_run = 0
        self.last_cores = self.cores()
        self.cores_changed_recently = False
        self.samples: tuple[BatchSample, ...] = ()
        self.batch: _Batch | None = None
        self._batch_id = 0
        self.next_trigger: float | None = 0.0
        self.consumed = 0
        self.last_trigger: float | None = None  # the run's latest trigger, with or without a batch
        self._last_report: float | None = None  # the run's latest progress or idle event (Spark's rule for the next)
        self.idle_at: float | None = None  # the latest idle event (of any run: a fact about the source)
        self.stop: _Stop | None = None
        self.restart_at: float | None = None
        self._first_batch_outcome: _Stop | None = None
        self._outcomes: list[ActionOutcome] = []
        # truth kept for the metrics
        # (batch end, arrival time of the oldest unprocessed row); at first that is the first row,
        # not the start: a trace that begins quiet has no lag until rows arrive (inf: none ever)
        self.completions: list[tuple[float, float]] = [(0.0, workload.time_of(0))]
        self.executor_seconds = 0.0  # allocated: registered + starting
        self.allocation: list[tuple[float, int]] = [(0.0, self.allocated())]  # (t, allocated from t on), at each change
        self.registered_seconds = 0.0
        self._acct_t = 0.0
        self.batches = 0
        self.restarts = 0
        self.executors_started = 0
        self.executors_removed = 0
        self.executors_lost = 0
        self._schedule_loss()
        # what happens at each kind of event _next_event returns, in its order
        self._handlers = (self._executor_ready, self._executor_gone, self._lose_one, self._finish_batch, self._restart, self._trigger)

    # --- time ------------------------------------------------------------------------------

    def at(self, seconds: float) -> datetime:
        return self.start + timedelta(0, seconds)  # (days, seconds): positional is twice as fast

    def seconds(self, when: datetime) -> float:
        return (when - self.start).total_seconds()

    def advance_to(self, until: float) -> None:
        """Process every event up to ``until`` (seconds since the start)."""
        handlers = self._handlers
        while True:
            when, kind = self._next_event()
            if when > until:
                break
            self._account(when)
            self.t = when
            handlers[kind]()
        self._account(until)
        if until > self.t:
            self.t = until

    def _next_event(self) -> tuple[float, int]:
        """(time, kind) of the next event, the earliest; of events at the same time the kind
        listed first (the kinds index ``_handlers``)."""
        best, kind = math.inf, -1
        if self.starting and self.starting[0] < best:
            best, kind = self.starting[0], 0
        if self._gone and self._gone[0][0] < best:
            best, kind = self._gone[0][0], 1
        if self._next_loss < best:
            best, kind = self._next_loss, 2
        batch = self.batch
        if batch is not None and batch.end < best:
            best, kind = batch.end, 3
        if self.restart_at is not None and self.restart_at < best:
            best, kind = self.restart_at, 4
        if batch is None and self.next_trigger is not None and self.next_trigger < best:
            best, kind = self.next_trigger, 5
        return best, kind

    def _executor_ready(self) -> None:
        self.starting.pop(0)
        self._register(self.t)
        self._slots_changed()

    def _executor_gone(self) -> None:
        _, eid = heapq.heappop(self._gone)
        del self.removing[eid]
        self.alive.pop(eid, None)
        self._cold.discard(eid)
        self._view_alive = None
        self._schedule_loss()
        self._allocation_changed()

    def _allocation_changed(self) -> None:
        count = len(self.alive) + len(self.starting)
        last_t, last_count = self.allocation[-1]
        if count == last_count:
            return
        if last_t == self.t:
            self.allocation[-1] = (self.t, count)  # several changes at one instant: the last counts
        else:
            self.allocation.append((self.t, count))

    def _account(self, t: float) -> None:
        dt = t - self._acct_t
        if dt > 0:
            self.executor_seconds += (len(self.alive) + len(self.starting)) * dt
            self.registered_seconds += len(self.alive) * dt
            self._acct_t = t

    # --- executors -------------------------------------------------------------------------

    def _register(self, t: float) -> str:
        eid = str(self._next_id)
        self._next_id += 1
        self.alive[eid] = t
        self._cold.add(eid)
        self._view_alive = None
        self._schedule_loss()
        return eid

    def cores(self) -> int:
        """Cores of the registered executors (what the listener reports with a batch)."""
        return len(self.alive) * self.cfg.cores_per_executor

    def free_slots(self) -> int:
        """Task slots the scheduler can use: executors being removed take no new tasks."""
        return (len(self.alive) - len(self.removing)) * self.cfg.cores_per_executor

    def allocated(self) -> int:
        return len(self.alive) + len(self.starting)

    def _schedule_loss(self) -> None:
        p = self.cfg.executor_loss_per_hour
        exposed = len(self.alive) - len(self.removing)  # executors being removed are not lost
        if p <= 0 or exposed <= 0:
            self._next_loss = math.inf
            return
        self._next_loss = self.t + self.rng.expovariate(exposed * p / 3600.0)

    def _lose_one(self) -> None:
        candidates = sorted(e for e in self.alive if e not in self.removing)
        if candidates:
            eid = self.rng.choice(candidates)
            del self.alive[eid]
            self._cold.discard(eid)
            self._lost.append(eid)
            self._view_alive = None
            self.executors_lost += 1
            self._slots_changed()
            self._allocation_changed()
        self._schedule_loss()

    def _grantable(self) -> float:
        """Executors the cluster manager would still grant (inf: no limit)."""
        limit = self.cfg.max_grantable_executors
        live = len(self.alive) - len(self.removing) + len(self.starting)
        return math.inf if limit is None else max(0, limit - live)

    # --- ports: executors --------------------------------------------------------------------

    def set_target(self, total: int, now: datetime) -> bool:
        self.advance_to(self.seconds(now))
        if not self.can_request:
            return False
        if total != self.requested_total:
            self._last_set_at = now
        self.requested_total = total
        live = len(self.alive) - len(self.removing)
        missing = total - live - len(self.starting)
        if missing > 0:
            j = self.cfg.executor_startup_jitter
            for _ in range(int(min(missing, self._grantable()))):
                delay = self.cfg.executor_startup * (1.0 + j * (2.0 * self.rng.random() - 1.0)) if j else self.cfg.executor_startup
                self.starting.append(self.t + delay)
                self.executors_started += 1
            self.starting.sort()
        elif missing < 0 and self.starting:
            # Spark deletes pending executor pods beyond the target: the latest first
            drop = min(-missing, len(self.starting))
            del self.starting[len(self.starting) - drop :]
        self._allocation_changed()
        return True

    def remove(self, ids: Sequence[str], now: datetime) -> bool:
        self.advance_to(self.seconds(now))
        if not self.can_request or not ids:
            return False
        for eid in ids:
            if eid in self.alive and eid not in self.removing:
                self.removing[eid] = self.t + self.cfg.removal_delay
                heapq.heappush(self._gone, (self.removing[eid], eid))
                self.executors_removed += 1
        if self.requested_total is not None:
            self.requested_total = max(0, self.requested_total - len(ids))
        self._slots_changed()
        self._schedule_loss()  # executors being removed are no longer exposed to loss
        return True

    # --- ports: query ----------------------------------------------------------------------

    def rescale(self, change: QueryChange, now: datetime) -> bool:
        self.advance_to(self.seconds(now))
        if change.name != self.name or self.status != QueryStatus.RUNNING:
            return False
        self.status = QueryStatus.RESCALING
        self.stop = _Stop(change, self.t)
        if self.batch is None:
            self._stopped()
        return True

    def _stopped(self) -> None:
        assert self.stop is not None
        self.stop.stopped_at = self.t
        self.next_trigger = None
        self.restart_at = self.t + self.cfg.restart_delay

    def _restart(self) -> None:
        assert self.stop is not None
        self.restart_at = None
        self._set_params(self.stop.change.to_params)
        self._first_batch_outcome, self.stop = self.stop, None
        self.status = QueryStatus.RUNNING
        self.run_started = self.t
        self._run_started_at = self.at(self.t)
        self.batches_in_run = 0
        self.last_trigger = None
        self._last_report = None  # (idle_at stays: the source had no rows then, whichever run asked)
        self.next_trigger = self.t  # a new run triggers at once
        self.restarts += 1

    # --- micro-batches ---------------------------------------------------------------------

    def _set_params(self, params: QueryParams) -> None:
        """The query's settings, and its trigger interval in seconds (an operator may change it
        with a rescale; without one, the configured interval)."""
        self.params = params
        trigger = params.trigger_interval
        self.interval = trigger.total_seconds() if trigger else self.cfg.trigger_interval

    def _noise(self) -> float:
        c = self.cfg
        factor = math.exp(self.rng.gauss(0.0, c.duration_noise)) if c.duration_noise > 0 else 1.0
        if c.slow_batch_probability > 0 and self.rng.random() < c.slow_batch_probability:
            factor *= c.slow_batch_factor
        return factor

    def _trigger(self) -> None:
        c, t = self.cfg, self.t
        interval = self.interval
        # row n arrives at workload.time_of(n), when generation passes n: a partly generated
        # row has arrived (with floor() it would wait, lagging, through a pause in the trace)
        # (no epsilon below: a float sliver over a whole row count at a step boundary, say
        # 6305040.000000001 before a pause, is taken a moment early, which costs nothing; with
        # ceil(x - 1e-9) that row stayed behind and aged through the whole pause)
        available = math.ceil(self.workload.rows_before(t))
        rows = available - self.consumed
        if self.params.max_rows_per_batch is not None:
            rows = min(rows, self.params.max_rows_per_batch)
        if rows <= 0:
            # no new data: Spark skips the batch and waits for the next trigger; the first
            # trigger of a new run still posts a progress event, which ends a rescale's pause
            self._report_first_batch(t)
            self._idle_trigger(t)
            self.next_trigger = (math.floor(t / interval + _EPS) + 1) * interval
            return
        since_trigger = None if self.last_trigger is None else t - self.last_trigger
        self.last_trigger = t
        p = self.params.parallelism
        slots = self.free_slots()
        noise = self._noise()
        tau = (c.task_cost + c.contention * min(p, max(1, slots)) + rows / (p * c.rows_per_core_second)) * noise
        fixed = c.fixed_cost * noise
        if self.batches_in_run == 0:
            fixed += c.restart_cold_cost
        work_start = t + fixed
        b = _Batch(
            batch_id=self._batch_id,
            start=t,
            rows=rows,
            end_offset=self.consumed + rows,
            available=available,
            tasks=p,
            tau=tau,
            fixed=fixed,
            work_start=work_start,
            remaining=float(p),
            seg_start=work_start,
            slots=slots,
            end=math.inf,
            since_trigger=since_trigger,
        )
        self._batch_id += 1
        b.end = self._task_end(b, work_start, slots)
        self.batch = b
        self.next_trigger = None

    def _idle_trigger(self, t: float) -> None:
        """Spark's ``ProgressReporter.updateIdleness``: a trigger that found no rows reports the
        query idle once ``no_data_progress_interval`` has passed since the last batch ended or the
        last idle report (the first such trigger of a run that has run no batch reports nothing)."""
        self.last_trigger = t
        if self._last_report is None:
            self._last_report = t
        elif t - self._last_report >= self.cfg.no_data_progress_interval - _EPS:
            self._last_report = t
            self.idle_at = t

    def _task_end(self, b: _Batch, t: float, slots: int) -> float:
        if slots <= 0:
            return math.inf
        waves = math.ceil(b.remaining / slots - _EPS) if b.remaining > _EPS else 0
        end = t + waves * b.tau
        if waves and self._cold and (not self.removing or self._cold - self.removing.keys()):
            end += self.cfg.executor_warmup  # new executors start their Python workers
        return end

    def _slots_changed(self) -> None:
        self._view_alive = None
        b = self.batch
        if b is None:
            return
        slots = self.free_slots()
        if slots == b.slots:
            return
        t = self.t
        if t <= b.work_start:
            b.slots = slots
            b.end = self._task_end(b, b.work_start, slots)
            return
        if b.slots > 0:
            done = b.slots * (t - b.seg_start) / b.tau
            b.remaining = max(0.0, b.remaining - done)
        b.seg_start = t
        new_end = self._task_end(b, t, slots)
        # more slots never delay a batch; fewer never speed it up
        b.end = min(b.end, new_end) if slots > b.slots else max(b.end, new_end)
        b.slots = slots

    def _finish_batch(self) -> None:
        b = self.batch
        assert b is not None
        self.batch = None
        t = self.t
        self.consumed = b.end_offset
        self.batches += 1
        self.completions.append((t, self.workload.time_of(self.consumed)))
        self._cold.clear()  # every executor able to take tasks ran some
        cores = self.cores()
        # the listener's rule (autoscaler.spark.host.on_progress)
        cold = self.batches_in_run < WARMUP_BATCHES or cores != self.last_cores or self.cores_changed_recently
        self.cores_changed_recently = cores != self.last_cores
        self.last_cores = cores
        self.batches_in_run += 1
        since = b.since_trigger  # Spark's inputRowsPerSecond: over the time since the previous trigger
        duration = t - b.start
        sample = BatchSample(
            batch_id=b.batch_id,
            started_at=self.at(b.start),
            duration=timedelta(0, duration),
            input_rows=b.rows,
            input_rate=b.rows / since if since else 0.0,
            processing_rate=b.rows / duration if duration > 0 else None,
            backlog_rows=b.available - b.end_offset,
            cores=cores or None,
            parallelism=b.tasks,
            fixed_overhead=timedelta(0, b.fixed),
            cold=cold,
        )
        samples = self.samples + (sample,)
        self.samples = samples[-self.max_samples :] if len(samples) > self.max_samples else samples
        self._last_report = t
        if self._first_batch_outcome is not None:
            self._report_first_batch(t)
        if self.stop is not None:
            self._stopped()
            return
        interval = self.interval
        boundary = (math.floor(b.start / interval + _EPS) + 1) * interval
        self.next_trigger = max(t, boundary)

    def _report_first_batch(self, t: float) -> None:
        """The first trigger of a new run ended (a batch, or no data): report the rescale's outcome."""
        st = self._first_batch_outcome
        if st is None:
            return
        self._first_batch_outcome = None
        assert st.stopped_at is not None
        self._outcomes.append(
            ActionOutcome(
                subject=self.name,
                kind=OutcomeKind.RESCALE,
                ok=True,
                started_at=self.at(st.decided_at),
                finished_at=self.at(t),
                message=st.change.message,
                pause=timedelta(seconds=t - st.stopped_at),
                from_params=st.change.from_params,
                to_params=st.change.to_params,
            )
        )

    # --- ports: observation ------------------------------------------------------------------

    def observe(self, now: datetime) -> Snapshot:
        self.advance_to(self.seconds(now))
        # as the Spark adapter does: executors that keep arriving restart the wait
        arrived = self._next_id > self._observed_ids
        self._observed_ids = self._next_id
        self._waiting_since = request_waiting_since(
            self._waiting_since,
            registered=len(self.alive) - len(self.removing),
            requested=self.requested_total,
            arrived=arrived,
            asked_at=self._last_set_at,
            now=now,
        )
        if self._view_alive is None:
            k = self.cfg.cores_per_executor
            self._view_alive = tuple(
                Executor(id=e, cores=k, added_at=self.at(at)) for e, at in sorted(self.alive.items(), key=lambda x: int(x[0]))
            )
        lost, self._lost = tuple(self._lost), []
        outcomes, self._outcomes = tuple(self._outcomes), []
        pending = tuple(sorted(self.removing, key=int)) if self.removing else ()
        view = self._view
        if (
            view is None
            or view.alive is not self._view_alive
            or view.can_request != self.can_request
            or view.requested_total != self.requested_total
            or view.waiting_since != self._waiting_since
            or view.pending_removal != pending
            or view.lost != lost
        ):
            # a new view only when something in it changed (the usual tick reuses the last one,
            # which is immutable, with its cores already summed)
            view = self._view = ExecutorView(
                alive=self._view_alive,
                cores_per_executor=self.cfg.cores_per_executor,
                can_request=self.can_request,
                can_request_reason=Reason.CAN_REQUEST_EXECUTORS if self.can_request else Reason.CANNOT_REQUEST_EXECUTORS,
                requested_total=self.requested_total,
                waiting_since=self._waiting_since,
                pending_removal=pending,
                lost=lost,
            )
        return Snapshot(at=now, executors=view, queries=(self.query_view(),), outcomes=outcomes)

    def query_view(self) -> QueryView:
        cores = self.cores()
        b = self.batch
        running = b is not None
        tasks = None
        if b is not None and self.t > b.work_start and b.slots > 0:
            left = max(0.0, b.remaining - b.slots * (self.t - b.seg_start) / b.tau)
            tasks = (int(b.tasks - math.ceil(left - _EPS)), b.tasks)
        elif b is not None:
            tasks = (0, b.tasks)
        # Spark's live stage metrics: the finished tasks' input rows (the simulated partitions
        # split a batch's rows evenly)
        read = None
        if self.report_batch_rows and b is not None and tasks is not None:
            read = RunningRead(rows=b.rows * tasks[0] // b.tasks, tasks_done=tasks[0], tasks=b.tasks)
        return QueryView(
            name=self.name,
            status=self.status,
            params=self.params,
            min_parallelism=self.min_parallelism,
            max_parallelism=self.max_parallelism,
            partitions_per_core=self.partitions_per_core,
            rescalable=True,
            managed_rate_limit=self.cfg.max_rows_per_batch is None,  # a Kafka-like source (maxOffsetsPerTrigger)
            samples=self.samples,
            run_started_at=self._run_started_at,
            batch_running=running,
            batch_tasks=tasks,
            batch_read=read,
            batch_planned_rows=b.rows if self.report_planned_rows and b is not None else None,
            warming=self.batches_in_run < WARMUP_BATCHES or self.cores_changed_recently or cores != self.last_cores,
            idle_at=None if self.idle_at is None else self.at(self.idle_at),
        )

    # --- truth ---------------------------------------------------------------------------------

    def lag_now(self) -> float:
        """Seconds since the oldest unprocessed row arrived (0 when nothing waits)."""
        anchor = self.completions[-1][1]
        return max(0.0, self.t - anchor)

    def capacity_now(self) -> float:
        """Rows/s the current partitions and free slots sustain with batches one trigger long."""
        c = self.cfg
        p, slots = self.params.parallelism, self.free_slots()
        if slots <= 0 or self.status != QueryStatus.RUNNING:
            return 0.0
        waves = math.ceil(p / slots)
        interval = self.interval
        per_wave = (interval - c.fixed_cost) / waves - c.task_cost - c.contention * min(p, slots)
        return max(0.0, per_wave * p * c.rows_per_core_second / interval)
