"""Hosting streaming queries: start, supervise, rescale from the checkpoint, stop at batch boundaries.

Rescale protocol (one worker thread per rescale, so the reconcile loop never blocks):

1. **Stop at a batch boundary.** If no trigger is active the query is stopped at once;
   otherwise the host waits for the next progress event of the run (the batch in flight has
   committed) and stops right after it. A batch that had just started is aborted and replayed
   from the offset log on restart, so sinks must be idempotent per batch id.
2. **Repartition state, only if asked and only with RocksDB.** ``spark.sql.shuffle.partitions``
   is pinned in the checkpoint. A stateful query on the RocksDB state store is drained with a
   one-shot ``availableNow`` run (offsets == commits), then repartitioned with Spark 4.3's
   ``StreamingCheckpointManager.repartition``; a failed repartition's dangling offsets are
   removed. Any other stateful shuffle change is refused before anything stops.
3. **Restart from the same checkpoint** with the new parameters.
4. **Measure**: the pause runs from the stop to the end of the first batch of the new run.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autoscaler.core.model import (
    ActionOutcome,
    OutcomeKind,
    QueryChange,
    QueryParams,
    QueryStatus,
    QueryView,
    RunningRead,
)
from autoscaler.core.plan import QueryResume, resumed_params
from autoscaler.runtime.clock import Clock
from autoscaler.runtime.logs import get_logger
from autoscaler.spark.checkpoint import (
    CheckpointInfo,
    CheckpointUnreadable,
    FileSystem,
    hadoop_files,
    read_checkpoint,
    remove_offsets_after,
)
from autoscaler.spark.pipelines import PipelineContext, PipelineError, PipelineSpec, checkpoint_locations
from autoscaler.spark.planned import PlannedRows
from autoscaler.spark.progress import SampleWindow, parse_progress, parse_timestamp, state_partitions
from autoscaler.spark.stages import StageInput

log = get_logger("autoscaler.spark.host")

SHUFFLE = "spark.sql.shuffle.partitions"
WARMUP_BATCHES = 2  # batches of a new run not used to fit the cost model


class RescaleError(RuntimeError):
    pass


@dataclass(frozen=True)
class StopReport:
    """How a hosted query stopped, read back from its checkpoint."""

    name: str
    last_committed: int | None  # the last batch whose output is committed
    replayed: int | None = None  # a batch left planned but not committed: replayed at the next start
    finished: int | None = None  # a batch the stop cut short and the daemon ran to its end before exiting
    unreadable: str | None = None  # why the checkpoint could not be read back: what is committed is unknown

    def describe(self) -> str:
        if self.unreadable is not None:
            return f"query {self.name} stopped (which batch is committed is unknown: {self.unreadable})"
        committed = "no batch committed yet" if self.last_committed is None else f"batch {self.last_committed} committed"
        if self.replayed is not None:
            return f"query {self.name} stopped ({committed}; batch {self.replayed} is not, and is replayed at the next start)"
        if self.finished is not None:
            return f"query {self.name} stopped at a batch boundary ({committed}: the stop cut it short and it was run to its end)"
        return f"query {self.name} stopped at a batch boundary ({committed})"


def _last_progress(query: Any) -> object:
    """Which progress the JVM reported last for ``query`` (its batch and time, ``None`` before the
    first); a value equal to no other when it cannot be read (the query is stopping)."""
    try:
        last = query.lastProgress
    except Exception:
        return object()
    return None if last is None else (last["batchId"], last["timestamp"])


def _reported_progress(query: Any) -> bool:
    """Whether the JVM reported a progress of this run of ``query`` (False when it cannot tell)."""
    return isinstance(_last_progress(query), tuple)


def trigger_interval(query: Any) -> timedelta | None:
    """The processing-time trigger a running query was started with (None: batches back to back,
    a one-shot trigger, or not readable).

    PySpark does not expose a query's trigger; the JVM's ``StreamExecution.trigger`` does
    (``ProcessingTimeTrigger(intervalMs)``; a query started without ``.trigger()`` has 0 ms).
    The policies need it for queries the user started: a query that keeps up lags up to two
    triggers, and its batches' busy share is measured against the trigger.
    """
    try:
        interval_ms = int(query._jsq.streamingQuery().trigger().intervalMs())
    except Exception as exc:  # availableNow/once (no interval), Spark Connect (no JVM), a stopped session
        log.debug("trigger_unknown", query=getattr(query, "name", None), error=str(exc))
        return None
    return timedelta(milliseconds=interval_ms) if interval_ms > 0 else None


@dataclass
class _PendingOutcome:
    change: QueryChange
    decided_at: datetime
    stopped_at: datetime


@dataclass
class _Run:
    """Mutable state of one hosted (or attached) query; guarded by the host lock."""

    name: str
    spec: PipelineSpec | None  # None: attached, owned by the user
    params: QueryParams
    window: SampleWindow
    checkpoint: str | None
    status: QueryStatus = QueryStatus.STARTING
    query: Any = None
    run_id: str | None = None
    run_started_at: datetime | None = None
    batches_in_run: int = 0
    last_cores: int = 0
    cores_changed_recently: bool = False
    progress_count: int = 0
    failures: int = 0
    restarts: int = 0
    next_restart_at: datetime | None = None
    last_error: str | None = None
    stateful: bool = False
    state_store: str | None = None
    # its checkpoint could not be read at the latest attempt (warned once, not at every batch)
    checkpoint_unreadable: bool = False
    # the read of its checkpoint for the state store it pins, while one runs (one at a time)
    state_store_read: threading.Thread | None = None
    pending: _PendingOutcome | None = None
    # the latest trigger that found no new rows (Spark's QueryIdleEvent), kept across runs
    idle_at: datetime | None = None
    # its running batch's rows from the offset log (window.planned_batch_rows; None: off, or attached)
    planned: PlannedRows | None = None
    cv: threading.Condition = field(default_factory=threading.Condition)


class QueryHost:
    def __init__(
        self,
        spark: Any,
        specs: Sequence[PipelineSpec],
        *,
        checkpoint_root: Path | str,
        clock: Clock,
        registered_cores: Callable[[], int],
        max_samples: int = 240,
        stop_timeout: timedelta = timedelta(seconds=120),
        restart_backoff_max: timedelta = timedelta(minutes=5),
        max_failures: int = 10,
        running_batch_rows: bool = False,
        planned_batch_rows: bool = False,
        remote_checkpoints: FileSystem | None = None,
    ) -> None:
        """``remote_checkpoints``: how a checkpoint on remote storage (``s3a://``, ``gs://``,
        ``hdfs://``...) is read and its dangling offsets removed; by default through ``spark``'s
        own JVM and Hadoop file systems, those Spark writes the checkpoint with. A local one is
        read from the disk."""
        self.spark = spark
        self._remote_checkpoints = remote_checkpoints if remote_checkpoints is not None else hadoop_files(spark)
        # a running batch's input read from the driver's REST API each tick (window.running_batch_rows)
        self._stage_input = StageInput(spark) if running_batch_rows else None
        self.clock = clock
        self.checkpoint_root = checkpoint_root  # a URI as written, a local directory resolved: by checkpoint_locations
        self.registered_cores = registered_cores
        self.max_samples = max_samples
        self.stop_timeout = stop_timeout
        self.restart_backoff_max = restart_backoff_max
        self.max_failures = max_failures  # failures in a row before a query is given up (0: never)
        self._lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._outcomes: list[ActionOutcome] = []
        self._stopping = False
        self._supervisor: threading.Thread | None = None
        self._stop_supervisor = threading.Event()
        self._rescales: list[threading.Thread] = []
        checkpoints = checkpoint_locations(specs, self.checkpoint_root)  # two on one checkpoint: refused before any listener
        for spec in specs:
            run = self._runs[spec.name] = _Run(spec.name, spec, spec.initial_params(1), SampleWindow(max_samples), checkpoints[spec.name])
            if planned_batch_rows:
                run.planned = PlannedRows(checkpoints[spec.name], self._remote_checkpoints)
        self._listener = _make_listener(self)
        spark.streams.addListener(self._listener)

    # --- lifecycle -------------------------------------------------------------------------

    def prepare(self, cores: int, resumed: Mapping[str, QueryResume] | None = None) -> None:
        """Choose initial params and build every pipeline once without starting anything.

        ``resumed``: the queries as a previous daemon last ran them (from its saved state): each
        starts with the partitions it ran with and an operator's trigger or rate limit
        (:func:`~autoscaler.core.plan.resumed_params`). A pipeline that raises is reported by
        name and nothing is started.
        """
        for run in self._runs.values():
            assert run.spec is not None
            spec = run.spec
            params, kept = resumed_params(spec.initial_params(max(1, cores)), (resumed or {}).get(run.name), spec.min_parallelism, spec.max_parallelism)
            if kept:
                log.info("query_resumed", query=run.name, fields=list(kept), params=params.to_json())
            try:
                run.params = self._pinned(run, params)
            except CheckpointUnreadable as exc:  # Spark could not start it either: nothing is started
                raise PipelineError(f"pipeline {run.name!r}: {exc}") from exc
            try:
                writer = run.spec.build(self.spark, self._context(run, run.params))
            except Exception as exc:
                raise PipelineError(f"pipeline {run.name!r} raised while building: {type(exc).__name__}: {exc}") from exc
            if writer is None or not hasattr(writer, "start"):
                raise PipelineError(
                    f"pipeline {run.name!r} must return a DataStreamWriter (df.writeStream...), got {type(writer).__name__}"
                )

    def start_all(self) -> None:
        for run in self._runs.values():
            if run.spec is not None:
                self._start(run, run.params)
        self._supervisor = threading.Thread(target=self._supervise_loop, name="query-supervisor", daemon=True)
        self._supervisor.start()

    def attach(self, query: Any, parallelism: int) -> None:
        """Track a query the user started and owns (metrics only; it is never restarted)."""
        name = query.name or str(query.id)
        params = QueryParams(parallelism=parallelism, trigger_interval=trigger_interval(query))
        with self._lock:
            run = _Run(name, None, params, SampleWindow(self.max_samples), None)
            run.query, run.run_id, run.status = query, str(query.runId), QueryStatus.RUNNING
            run.run_started_at = self.clock.now()
            self._runs[name] = run

    def stop_all(self, *, finish_cut_batches: bool = True) -> list[StopReport]:
        """Stop every query at a batch boundary (SIGTERM); safe to call twice. One report (and one
        ``query_stopped`` log line) per hosted query that was running. ``finish_cut_batches``: run
        a batch the stop cut short to its end (see :meth:`_finish_cut_batch`), unless the caller
        replays the checkpoint itself."""
        with self._lock:
            self._stopping = True
            runs = list(self._runs.values())
            rescales = list(self._rescales)
        self._stop_supervisor.set()
        for t in rescales:  # let a rescale in flight finish (it will not start a new run)
            t.join(self.stop_timeout.total_seconds() + 10)
        reports: dict[str, StopReport] = {}
        threads = [threading.Thread(target=self._stop_run, args=(r, reports, finish_cut_batches), daemon=True) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.stop_timeout.total_seconds() + 10)
        try:
            self.spark.streams.removeListener(self._listener)
        except Exception:  # the session may already be gone
            pass
        return [reports[r.name] for r in runs if r.name in reports]

    def _stop_run(self, run: _Run, reports: dict[str, StopReport], finish: bool) -> None:
        if run.spec is None:
            return  # attached queries belong to the user
        with self._lock:
            was_running = run.status in (QueryStatus.RUNNING, QueryStatus.RESCALING, QueryStatus.RESTARTING)
            running = run.status == QueryStatus.RUNNING
            # batches back to back leave no boundary to wait for: the batch after the running one
            # is planned as it commits and the stop cuts that one instead, run again whole by the
            # replay (or the next start). Cutting the running batch leaves the same checkpoint and
            # saves waiting for its end (measured on `run`'s SIGTERM: 5.5 -> 4.5 s to exit)
            back_to_back = self._back_to_back(run)
        try:
            self._stop_at_boundary(run, wait=not back_to_back)
        except Exception as exc:
            log.warning("stop_failed", query=run.name, error=str(exc))
        # a batch of this run ended, by the listener's events or, as they come after the commit
        # (0.1-1 s here), by the JVM's own record
        progressing = running and (run.batches_in_run > 0 or _reported_progress(run.query))
        with self._lock:
            if run.status not in (QueryStatus.FINISHED, QueryStatus.FAILED):
                run.status = QueryStatus.STOPPED
        if not was_running or run.checkpoint is None:
            return
        finished = self._finish_cut_batch(run) if finish and progressing else None
        try:
            info = self._read_checkpoint(run)
            report = StopReport(run.name, info.last_commit, None if info.clean else info.last_offset, finished)
        except CheckpointUnreadable as exc:  # never "no batch committed yet": that is not known
            report = StopReport(run.name, None, finished=finished, unreadable=str(exc))
        reports[run.name] = report
        if report.unreadable is not None:  # which batch is committed is unknown: said as such, not as None
            log.warning("query_stopped", query=run.name, checkpoint_unreadable=report.unreadable, detail=report.describe())
            return
        log.info("query_stopped", query=run.name, last_committed_batch=report.last_committed,
                 replayed_batch=report.replayed, detail=report.describe())

    def _finish_cut_batch(self, run: _Run) -> int | None:
        """Run the batch a stop cut short to its end (the one a restart would replay first), so the
        checkpoint is left with every planned batch committed; its id, or None.

        When batches run back to back (a query behind, or batches longer than the trigger), the
        next batch is planned the moment the previous one commits, before its progress event
        arrives: a stop at that boundary always cuts one short. A one-batch run (``once``) replays
        exactly the planned batch with its logged offsets. Only for a query that was making
        progress: a batch that failed the run it was planned in would fail again.
        """
        try:
            info = self._read_checkpoint(run)
        except CheckpointUnreadable as exc:  # whether a batch was cut short is unknown: left to replay
            log.warning("stop_replay_skipped", query=run.name, error=str(exc))
            return None
        if info.clean:
            return None
        try:
            query = self._start(run, run.params, once=True, track=False)
            if not query.awaitTermination(self.stop_timeout.total_seconds()):
                query.stop()
        except Exception as exc:
            log.warning("stop_replay_failed", query=run.name, batch=info.last_offset, error=str(exc)[:500])
            return None
        try:
            return info.last_offset if self._read_checkpoint(run).clean else None
        except CheckpointUnreadable as exc:
            log.warning("stop_replay_unconfirmed", query=run.name, batch=info.last_offset, error=str(exc))
            return None

    # --- observation -----------------------------------------------------------------------

    def views(self) -> tuple[QueryView, ...]:
        with self._lock:
            runs = list(self._runs.values())
        try:
            cores = self.registered_cores()
        except Exception:
            cores = 0
        return tuple(self._view(r, *self._running_batch(r), warming=self._warming(r, cores)) for r in runs)

    def statuses(self) -> dict[str, QueryStatus]:
        """Each hosted query's status now (the views are a tick old: a restart quicker than the
        reconcile interval never shows in them)."""
        with self._lock:
            return {run.name: run.status for run in self._runs.values()}

    @staticmethod
    def _warming(run: _Run, cores: int) -> bool:
        return run.batches_in_run < WARMUP_BATCHES or run.cores_changed_recently or cores != run.last_cores

    def _running_batch(self, run: _Run) -> tuple[bool, tuple[int, int] | None, RunningRead | None, int | None]:
        """Whether a batch is executing, its (completed, total) tasks, with a stage reader
        (``window.running_batch_rows``) the input its finished tasks read and with an offset-log
        reader (``window.planned_batch_rows``) its rows as planned.

        Streaming runs each batch's jobs in the job group named by the run id, so the status
        tracker shows how far the batch in flight has got.
        """
        if run.status != QueryStatus.RUNNING or run.query is None or run.run_id is None:
            return False, None, None, None
        try:
            if not run.query.status.get("isTriggerActive"):
                return False, None, None, None
            tracker = self.spark.sparkContext.statusTracker()
            jobs = set(tracker.getActiveJobsIds()) & set(tracker.getJobIdsForGroup(run.run_id))
            done = total = 0
            stages = []
            for job in jobs:
                info = tracker.getJobInfo(job)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        stages.append(stage_id)
                        done += stage.numCompletedTasks
                        total += stage.numTasks
        except Exception:  # the query or the context is stopping
            return False, None, None, None
        read = self._stage_input.read(stages) if self._stage_input is not None else None
        planned = run.planned.running_batch_rows() if run.planned is not None else None
        return True, (done, total) if total else None, read, planned

    def _view(
        self,
        run: _Run,
        batch_running: bool,
        batch_tasks: tuple[int, int] | None,
        batch_read: RunningRead | None = None,
        batch_planned_rows: int | None = None,
        warming: bool = False,
    ) -> QueryView:
        spec = run.spec
        return QueryView(
            name=run.name,
            status=run.status,
            params=run.params,
            min_parallelism=spec.min_parallelism if spec else run.params.parallelism,
            max_parallelism=spec.max_parallelism if spec else run.params.parallelism,
            partitions_per_core=spec.partitions_per_core if spec else 1,
            rescalable=spec is not None,
            bounded=spec is not None and spec.available_now,
            managed_rate_limit=spec is not None and spec.manage_rate_limit and spec.max_rows_per_batch is None,
            stateful=run.stateful,
            state_store=run.state_store,
            samples=run.window.snapshot(),
            run_started_at=run.run_started_at,
            last_error=run.last_error,
            restarts=run.restarts,
            batch_running=batch_running,
            batch_tasks=batch_tasks,
            batch_read=batch_read,
            batch_planned_rows=batch_planned_rows,
            warming=warming,
            idle_at=run.idle_at,
            declared=spec.initial_params(1) if spec else None,
        )

    def take_outcomes(self) -> tuple[ActionOutcome, ...]:
        with self._lock:
            out, self._outcomes = tuple(self._outcomes), []
            return out

    def query(self, name: str) -> Any:
        return self._runs[name].query

    # --- starting --------------------------------------------------------------------------

    def _context(self, run: _Run, params: QueryParams) -> PipelineContext:
        assert run.checkpoint is not None
        return PipelineContext(
            name=run.name,
            parallelism=params.parallelism,
            checkpoint_location=run.checkpoint,
            max_rows_per_batch=params.max_rows_per_batch,
            trigger_interval=params.trigger_interval,
            shuffle_partitions=params.shuffle_partitions,
        )

    def _read_checkpoint(self, run: _Run) -> CheckpointInfo:
        """``run``'s checkpoint as it is now: from the local disk, or through the remote file
        system when it is on remote storage. Raises :class:`CheckpointUnreadable` (never a missing
        checkpoint) when it cannot be read."""
        assert run.checkpoint is not None
        return read_checkpoint(run.checkpoint, hadoop=self._remote_checkpoints)

    def _pinned(self, run: _Run, params: QueryParams) -> QueryParams:
        """Params as the checkpoint will really run them (its shuffle partitions win). An
        unreadable checkpoint raises :class:`CheckpointUnreadable`: the query is not started with
        partitions its checkpoint may override (Spark, writing to the same storage, could not
        run it either)."""
        info = self._read_checkpoint(run) if run.checkpoint else None
        if info is None or not info.exists:
            return params
        run.stateful = run.stateful or info.stateful
        run.state_store = info.state_store or run.state_store
        if info.shuffle_partitions is not None:
            return replace(params, shuffle_partitions=info.shuffle_partitions)
        return params

    def _start(
        self,
        run: _Run,
        params: QueryParams,
        *,
        available_now: bool = False,
        once: bool = False,
        track: bool = True,
        pending: _PendingOutcome | None = None,
    ) -> Any:
        """Start ``run`` with ``params``; with ``pending``, the rescale whose outcome the new run's
        first progress event reports (bound to the new run together with its id: a late event of
        the stopped run, still queued on the listener bus, must not end the rescale)."""
        assert run.spec is not None
        params = self._pinned(run, params)
        with self._start_lock:
            previous = self.spark.conf.get(SHUFFLE)
            if params.shuffle_partitions is not None:
                self.spark.conf.set(SHUFFLE, str(params.shuffle_partitions))
            try:
                writer = run.spec.build(self.spark, self._context(run, params))
                writer = writer.queryName(run.name).option("checkpointLocation", run.checkpoint)
                if once:
                    writer = writer.trigger(once=True)  # deprecated, but exactly one batch: the planned one
                elif available_now or run.spec.available_now:
                    writer = writer.trigger(availableNow=True)
                elif params.trigger_interval is not None:
                    writer = writer.trigger(processingTime=f"{int(params.trigger_interval.total_seconds() * 1000)} milliseconds")
                query = writer.start()
            finally:
                self.spark.conf.set(SHUFFLE, previous)
        if track:
            with self._lock:
                run.query, run.run_id, run.params = query, str(query.runId), params
                if pending is not None:
                    run.pending = pending
                run.status = QueryStatus.RUNNING
                run.run_started_at = self.clock.now()
                run.batches_in_run = 0
            log.info("query_started", query=run.name, parallelism=params.parallelism, run_id=run.run_id)
        return query

    # --- rescale ---------------------------------------------------------------------------

    def rescale(self, change: QueryChange, now: datetime) -> bool:
        with self._lock:
            run = self._runs.get(change.name)
            if run is None or run.spec is None or run.status != QueryStatus.RUNNING or self._stopping:
                return False
            run.status = QueryStatus.RESCALING
            thread = threading.Thread(target=self._rescale, args=(run, change, now), name=f"rescale-{run.name}", daemon=True)
            self._rescales = [t for t in self._rescales if t.is_alive()] + [thread]
        thread.start()
        return True

    def _rescale(self, run: _Run, change: QueryChange, decided_at: datetime) -> None:
        old, new = run.params, change.to_params
        repartition = new.shuffle_partitions is not None and new.shuffle_partitions != old.shuffle_partitions and run.stateful
        try:
            if repartition:
                self._check_repartitionable(run)
        except Exception as exc:  # refused before the query stops: it runs on as it was
            log.error("rescale_refused", query=run.name, error=f"{type(exc).__name__}: {exc}")
            self._record(ActionOutcome(run.name, OutcomeKind.RESCALE, False, decided_at, self.clock.now(), str(exc), None, old, new))
            with self._lock:
                run.pending = None
                if run.status == QueryStatus.RESCALING:
                    run.status = QueryStatus.RUNNING
            return
        try:
            stopped_at = self._stop_at_boundary(run)
            if repartition:
                assert new.shuffle_partitions is not None
                self._repartition_state(run, old, new.shuffle_partitions)
            with self._lock:
                if self._stopping:  # shutting down: stay stopped at this batch boundary
                    run.status = QueryStatus.STOPPED
                    return
            self._start(run, new, pending=_PendingOutcome(change, decided_at, stopped_at))
        except Exception as exc:
            log.error("rescale_failed", query=run.name, error=f"{type(exc).__name__}: {exc}")
            self._record(ActionOutcome(run.name, OutcomeKind.RESCALE, False, decided_at, self.clock.now(), str(exc), None, old, change.to_params))
            with self._lock:
                run.pending = None
            self._recover(run, old, str(exc))

    def _recover(self, run: _Run, params: QueryParams, error: str) -> None:
        """After a failed rescale, go back to the old params; on failure let the supervisor retry."""
        if self._stopping:
            return
        try:
            self._start(run, params)
        except Exception as exc:
            self._schedule_restart(run, f"{error}; restart with previous settings failed: {exc}")

    @staticmethod
    def _back_to_back(run: _Run) -> bool:
        """This run's latest batch took its trigger interval or longer (or the query has none):
        the next batch starts the moment one commits."""
        samples = run.window.snapshot()
        if run.batches_in_run <= 0 or not samples:
            return False
        trigger = run.params.trigger_interval
        return trigger is None or samples[-1].duration >= trigger

    def _stop_at_boundary(self, run: _Run, *, wait: bool = True) -> datetime:
        """Stop ``run``'s query once its running batch ends (``wait``), else at once."""
        q = run.query
        if q is None or not q.isActive:
            return self.clock.now()
        if wait and q.status.get("isTriggerActive"):
            # the trigger running now ends when the JVM's last progress changes (Spark commits the
            # batch before it reports it). Read after the trigger was seen active, so a batch that
            # ended in between costs one more batch, never a cut one. Not the listener's events:
            # they arrive 0.1-1 s after the commit, and the previous batch's event, come after the
            # stop began, ended this wait and cut the running batch (seen: the demo stopped by a
            # Ctrl-C just after its batch 0 committed)
            before = _last_progress(q)
            deadline = time.monotonic() + self.stop_timeout.total_seconds()
            with run.cv:
                while _last_progress(q) == before and q.isActive and time.monotonic() < deadline:
                    run.cv.wait(0.2)
        q.stop()
        return self.clock.now()

    def _check_repartitionable(self, run: _Run) -> None:
        """Raise :class:`RescaleError` unless ``run``'s state can be repartitioned (the RocksDB
        store), before anything stops: a refused change costs the query no restart."""
        if run.state_store is None:  # its checkpoint could not be read so far: an unreadable one refuses with the reason
            run.state_store = self._read_checkpoint(run).state_store
        if run.state_store != "rocksdb":
            raise RescaleError(
                f"refusing to change shuffle partitions of stateful query {run.name!r}: "
                f"its {run.state_store or 'unknown'} state store cannot be repartitioned"
            )

    def _repartition_state(self, run: _Run, params: QueryParams, partitions: int) -> None:
        drain = self._start(run, params, available_now=True, track=False)
        drain.awaitTermination(self.stop_timeout.total_seconds())
        info = self._read_checkpoint(run)
        if not info.clean:
            raise RescaleError(f"drain of {run.name!r} left batch {info.last_offset} uncommitted")
        try:
            self.spark._streamingCheckpointManager.repartition(run.checkpoint, partitions)
        except Exception as exc:
            try:
                removed = remove_offsets_after(run.checkpoint, info.last_offset, hadoop=self._remote_checkpoints)  # type: ignore[arg-type]
            except CheckpointUnreadable as unreadable:
                raise RescaleError(
                    f"repartition of {run.name!r} failed ({type(exc).__name__}: {exc}) and the batches it planned after "
                    f"{info.last_offset} could not be removed, so the next start fails with "
                    f"STREAMING_UNFINISHED_REPARTITION_DETECTED until they are: {unreadable}"
                ) from exc
            if removed:
                log.warning("dangling_offsets_removed", query=run.name, batches=removed)
            raise
        log.info("state_repartitioned", query=run.name, partitions=partitions)

    # --- listener callbacks ----------------------------------------------------------------

    def on_progress(self, progress_json: str, name: str | None, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(name or "")
            if run is None or run.run_id != run_id:
                return  # a drain run or a stale run
            params = run.params
        try:
            cores = self.registered_cores()
        except Exception:
            cores = 0
        with self._lock:
            # warming up: the first batches of a run, and those right after the cores changed
            # (new executors start their Python workers on their first tasks)
            cold = run.batches_in_run < WARMUP_BATCHES or cores != run.last_cores or run.cores_changed_recently
            run.cores_changed_recently = cores != run.last_cores
            run.last_cores = cores
            run.batches_in_run += 1
        data = json.loads(progress_json)
        if run.planned is not None:
            run.planned.on_progress(data)
        sample = parse_progress(data, cores=cores or None, parallelism=params.parallelism, cold=cold)
        partitions = state_partitions(data)
        now = self.clock.now()
        if partitions is not None and run.checkpoint:
            # the provider is pinned in the checkpoint's offset log from the first batch on
            self._look_up_state_store(run)
        with self._lock:
            run.window.add(sample)
            if partitions is not None:
                run.stateful = True
                run.params = replace(run.params, shuffle_partitions=partitions)
            if sample.input_rows > 0:
                run.failures = 0
            pending, run.pending = run.pending, None
        with run.cv:
            run.progress_count += 1
            run.cv.notify_all()
        if pending is not None:
            pause = sample.ended_at - pending.stopped_at if sample.ended_at > pending.stopped_at else now - pending.stopped_at
            c = pending.change
            self._record(
                ActionOutcome(c.name, OutcomeKind.RESCALE, True, pending.decided_at, now, c.message, pause, c.from_params, c.to_params)
            )
            log.info("rescale_done", query=c.name, parallelism=c.to_params.parallelism, pause_seconds=round(pause.total_seconds(), 3))

    def _look_up_state_store(self, run: _Run) -> None:
        """Read which state store ``run``'s checkpoint pins, on a thread of its own, unless it is
        known or a read is running. Progress events come on Spark's listener thread, one for
        every query, and a read of remote storage can take minutes (S3A retries each call with
        back-off through an outage): read there, it delayed every query's progress while it ran."""
        with self._lock:
            if run.state_store is not None or (run.state_store_read is not None and run.state_store_read.is_alive()):
                return
            run.state_store_read = threading.Thread(target=self._read_state_store, args=(run,), name=f"checkpoint-{run.name}", daemon=True)
            run.state_store_read.start()

    def _read_state_store(self, run: _Run) -> None:
        """Keep the state store ``run``'s checkpoint pins; while it cannot be read the store stays
        unknown (a shuffle change is then refused; read again at a later batch). An outage of the
        remote storage is warned once, with its reason, and its end once: not at every batch."""
        try:
            state_store = self._read_checkpoint(run).state_store or "hdfs"
        except CheckpointUnreadable as exc:
            with self._lock:
                warn, run.checkpoint_unreadable = not run.checkpoint_unreadable, True
            if warn:
                log.warning("checkpoint_unreadable", query=run.name, error=str(exc), retry="at a later batch, warned once")
            return
        except Exception as exc:  # a bug must not die unseen on this thread (read again at a later batch)
            log.warning("checkpoint_read_failed", query=run.name, error=f"{type(exc).__name__}: {exc}")
            return
        with self._lock:
            recovered, run.checkpoint_unreadable = run.checkpoint_unreadable, False
            run.state_store = run.state_store or state_store
        if recovered:
            log.info("checkpoint_readable_again", query=run.name, state_store=state_store)

    def on_idle(self, run_id: str, timestamp: str) -> None:
        """A trigger of ``run_id`` found no new rows (Spark 3.5+ posts ``QueryIdleEvent`` instead of
        a progress event, at most every ``spark.sql.streaming.noDataProgressEventInterval``)."""
        at = parse_timestamp(timestamp)
        with self._lock:
            for run in self._runs.values():
                if run.run_id == run_id and (run.idle_at is None or at > run.idle_at):
                    run.idle_at = at

    def on_terminated(self, run_id: str, exception: str | None) -> None:
        with self._lock:
            for run in self._runs.values():
                if run.run_id == run_id and exception:
                    run.last_error = exception[:2000]

    def _record(self, outcome: ActionOutcome) -> None:
        with self._lock:
            self._outcomes.append(outcome)

    # --- supervision -----------------------------------------------------------------------

    def _supervise_loop(self) -> None:
        while not self._stop_supervisor.wait(1.0):
            try:
                self.supervise_once()
            except Exception as exc:
                log.warning("supervise_failed", error=str(exc))

    def supervise_once(self) -> None:
        now = self.clock.now()
        with self._lock:
            if self._stopping:
                return
            runs = list(self._runs.values())
        for run in runs:
            if run.spec is None:
                continue
            if run.status == QueryStatus.RUNNING and run.query is not None and not run.query.isActive:
                self._on_query_ended(run, now)
            elif run.status == QueryStatus.RESTARTING and run.next_restart_at and now >= run.next_restart_at:
                try:
                    self._start(run, run.params)
                    with self._lock:
                        run.restarts += 1
                    log.info("query_restarted", query=run.name, attempt=run.failures)
                    self._record(ActionOutcome(run.name, OutcomeKind.RESTART, True, now, self.clock.now(),
                                               f"restarted from its checkpoint after failure {run.failures}: {run.last_error or ''}"[:300]))
                except Exception as exc:
                    self._schedule_restart(run, f"{type(exc).__name__}: {exc}")

    def _on_query_ended(self, run: _Run, now: datetime) -> None:
        exc = run.query.exception()
        if exc is None and run.spec is not None and run.spec.available_now:
            with self._lock:
                run.status = QueryStatus.FINISHED
            self._record(ActionOutcome(run.name, OutcomeKind.FINISH, True, run.run_started_at or now, now, "bounded input done"))
            log.info("query_finished", query=run.name)
            return
        self._schedule_restart(run, str(exc) if exc is not None else "query stopped outside the daemon")

    def _schedule_restart(self, run: _Run, error: str) -> None:
        """Restart a failed query after a back-off (2, 4, 8 ... s, capped), or give it up after
        ``max_failures`` failures in a row (its status stays ``failed``; the others go on)."""
        now = self.clock.now()
        with self._lock:
            run.failures += 1
            run.last_error = error[:2000]
            give_up = 0 < self.max_failures <= run.failures
            if give_up:
                run.status, run.next_restart_at = QueryStatus.FAILED, None
            else:
                delay = min(self.restart_backoff_max.total_seconds(), 2.0 ** min(run.failures, 20))
                run.next_restart_at = now + timedelta(seconds=delay)
                run.status = QueryStatus.RESTARTING
        if give_up:
            log.error("query_given_up", query=run.name, error=error_summary(error), failures=run.failures,
                      detail="no more restarts (pipelines.max_failures); the daemon and the other queries go on")
            self._record(ActionOutcome(run.name, OutcomeKind.RESTART, False, run.run_started_at or now, now,
                                       f"given up after {run.failures} failures in a row: {error_summary(error)}"[:300]))
            return
        log.error("query_failed", query=run.name, error=error_summary(error), retry_in_seconds=delay, failures=run.failures)


def error_summary(error: str, limit: int = 500) -> str:
    """What a person reads first about a failed query: for an error raised in Python (a
    ``foreachBatch``, a Python data source), the exception line of its Python traceback, which
    Spark's message buries under the traceback's frames; otherwise the message's first lines.
    The whole text stays in ``last_error`` (the status API)."""
    lines = error.splitlines()
    starts = [i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line]
    if starts:
        after = lines[starts[-1] + 1 :]
        raised = next((line for line in after if line and not line[0].isspace()), None)
        if raised:
            return raised[:limit]
    return error[:limit]


def _make_listener(host: QueryHost) -> Any:
    from pyspark.sql.streaming import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                p = event.progress
                host.on_progress(p.json, p.name, str(p.runId))
            except Exception as exc:  # never let a bad event kill the listener bus thread
                log.warning("progress_event_failed", error=str(exc))

        def onQueryIdle(self, event: Any) -> None:
            try:
                host.on_idle(str(event.runId), event.timestamp)
            except Exception as exc:
                log.warning("idle_event_failed", error=str(exc))

        def onQueryTerminated(self, event: Any) -> None:
            try:
                host.on_terminated(str(event.runId), event.exception)
            except Exception as exc:
                log.warning("terminated_event_failed", error=str(exc))

    return _Listener()
