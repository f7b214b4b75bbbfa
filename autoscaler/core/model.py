"""Typed, immutable values that flow through one reconcile tick.

Sources build a :class:`Snapshot`; the pure core turns it into :class:`QueryLoad` values,
a :class:`Proposal` (policy), an :class:`ExecutorDecision` (normalization) and a :class:`Plan`
(actions); the realizer's :class:`ActionResult` values and all of these make the tick's
:class:`TickRecord`, the unit of the audit trail. ``None`` always means "unknown", never zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Mapping


class Mode(StrEnum):
    """How the daemon obtains capacity."""

    AUTO = "auto"
    REACTIVE = "reactive"
    ACTIVE = "active"


class Reason(StrEnum):
    """Machine-readable reason attached to every decision, hold and refusal."""

    # policy proposals
    NO_METRICS = "NoMetrics"
    WITHIN_TARGET = "WithinTarget"
    SCALE_UP_FOR_LOAD = "ScaleUpForLoad"
    SCALE_UP_FOR_BACKLOG = "ScaleUpForBacklog"
    SCALE_DOWN_FOR_LOAD = "ScaleDownForLoad"
    USE_AVAILABLE = "UseAvailable"
    STATIC_TARGET = "StaticTarget"
    MANUAL_TARGET = "ManualTarget"
    WAITING_FOR_INTERVAL = "WaitingForPolicyInterval"  # the policy decides on its own timer
    EXECUTORS_IDLE = "ExecutorsIdle"  # executors without tasks for the idle timeout
    SCALE_UP_FOR_FORECAST = "ScaleUpForForecast"  # the forecast load needs more soon
    # normalization holds and clamps
    BOUNDED_MIN = "BoundedByMin"
    BOUNDED_MAX = "BoundedByMax"
    DEAD_BAND = "DeadBand"
    STABILIZING = "StabilizingAfterRescale"
    SCALE_DOWN_DELAYED = "ScaleDownDelayed"
    BACKLOG_BLOCKS_SCALE_DOWN = "BacklogBlocksScaleDown"
    MAX_STEP_UP = "ScaleUpLimit"
    MAX_STEP_DOWN = "ScaleDownLimit"
    ACTION_IN_FLIGHT = "ActionInFlight"
    PAUSED = "Paused"
    DRY_RUN = "DryRun"
    # mode and resources
    MODE_CONFIGURED = "ModeConfigured"
    CAN_REQUEST_EXECUTORS = "CanRequestExecutors"
    CANNOT_REQUEST_EXECUTORS = "CannotRequestExecutors"
    DYNAMIC_ALLOCATION_ON = "DynamicAllocationOn"
    REQUEST_NOT_GRANTED = "RequestNotGranted"
    EXECUTORS_LOST = "ExecutorsLost"
    # queries
    PARTITIONS_BELOW_CORES = "PartitionsBelowCores"
    UNEVEN_WAVES = "UnevenTaskWaves"
    POLICY_PARALLELISM = "PolicyParallelism"
    RATE_LIMIT_OUTGROWN = "RateLimitOutgrown"  # a managed rate limit holds back what the cores can do
    OPERATOR_REQUEST = "OperatorRequest"
    STATE_PINS_SHUFFLE_PARTITIONS = "StatePinsShufflePartitions"
    QUERY_NOT_RESCALABLE = "QueryNotRescalable"
    BOUNDED_QUERY_TRIGGER = "BoundedQueryTrigger"  # an availableNow query takes no trigger interval
    QUERY_BUSY = "QueryBusy"
    QUERY_COOLDOWN = "QueryRescaleCooldown"
    EXECUTORS_SETTLING = "ExecutorsSettling"
    QUERY_FAILED = "QueryFailed"


class QueryStatus(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RESCALING = "rescaling"
    RESTARTING = "restarting"  # waiting to restart after a failure (back-off)
    FINISHED = "finished"  # bounded source done (availableNow)
    STOPPED = "stopped"
    FAILED = "failed"  # gave up, or not managed by us


# --- observation ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Executor:
    id: str
    cores: int
    active_tasks: int = 0
    added_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ExecutorPods:
    """The executor pods of a Spark application on Kubernetes, summarized to explain a wait.

    Spark's Kubernetes backend accepts every executor request at once (it only sets the number
    of pods it wants), so "accepted" never means "granted": a pod the scheduler cannot place
    stays ``Pending``. The daemon keeps its time rule for "not granted" (``request_timeout``)
    and uses this summary only to say why it waits.
    """

    pending: int  # pods in phase Pending (being scheduled, pulling the image, or unschedulable)
    unschedulable: int  # Pending pods whose PodScheduled condition is False with reason Unschedulable
    message: str | None = None  # the scheduler's message for one of them, e.g. "0/5 nodes are available: 5 Insufficient cpu."

    def describe(self) -> str:
        """``3 executor pods Pending, 3 Unschedulable: 0/5 nodes are available: ...``."""
        text = f"{self.pending} executor pod{'' if self.pending == 1 else 's'} Pending"
        if self.unschedulable:
            text += f", {self.unschedulable} Unschedulable"
        if self.message:
            text += f": {self.message}"
        return text


@dataclass(frozen=True, slots=True)
class ExecutorView:
    """What the driver knows about executors at one instant."""

    alive: tuple[Executor, ...]
    cores_per_executor: int
    can_request: bool
    can_request_reason: Reason
    requested_total: int | None = None  # the absolute target we last asserted; None: never
    # since when more executors have been requested than registered (None: not waiting);
    # changing the target while still waiting keeps the original time
    waiting_since: datetime | None = None
    pending_removal: tuple[str, ...] = ()  # asked to remove, still registered
    lost: tuple[str, ...] = ()  # disappeared since the previous observation, not removed by us
    pods: ExecutorPods | None = None  # on Kubernetes: the executor pods (None: not on Kubernetes, or unknown)
    cores: int = field(init=False, repr=False, compare=False)  # of the executors alive

    def __post_init__(self) -> None:
        object.__setattr__(self, "cores", sum([e.cores for e in self.alive]))

    @property
    def count(self) -> int:
        return len(self.alive)

    @property
    def pending_executors(self) -> int:
        """Requested but not (yet) registered."""
        if self.requested_total is None:
            return 0
        return max(0, self.requested_total - (self.count - len(self.pending_removal)))


@dataclass(frozen=True, slots=True)
class RunningRead:
    """What the finished tasks of a running batch have read of its input, as Spark reports it
    while the batch runs (its stages' ``inputRecords`` and task counts, updated as each task ends)."""

    rows: int  # input rows read by the finished tasks
    tasks_done: int  # finished tasks of the stages that read input
    tasks: int  # all tasks of those stages

    def batch_rows(self) -> float | None:
        """The rows of the whole batch, the unfinished tasks reading as many as the finished
        ones on average; None before a task has finished. A task that stalls (a straggler, a
        lost executor) does not change it: rows are counted, not inferred from time."""
        if self.tasks_done <= 0 or self.tasks <= 0:
            return None
        return self.rows * max(self.tasks, self.tasks_done) / self.tasks_done


@dataclass(frozen=True, slots=True)
class BatchSample:
    """One completed micro-batch, read from a progress event."""

    batch_id: int
    started_at: datetime  # trigger start (progress ``timestamp``)
    duration: timedelta  # ``batchDuration``
    input_rows: int
    input_rate: float | None  # rows/s arriving (``inputRowsPerSecond``)
    processing_rate: float | None  # rows/s while executing (``processedRowsPerSecond``)
    backlog_rows: int | None  # latestOffset - endOffset where the source reports it
    cores: int | None = None  # executor cores registered when the batch ended
    parallelism: int | None = None  # source partitions (tasks) the batch ran with
    fixed_overhead: timedelta | None = None  # planning, offset log, commit: triggerExecution - addBatch
    cold: bool = False  # warming up (first batches of a run, or executors just changed): not for fits
    ended_at: datetime = field(init=False, repr=False, compare=False)  # started_at + duration

    def __post_init__(self) -> None:
        object.__setattr__(self, "ended_at", self.started_at + self.duration)


JAVA_LONG_MAX = 2**63 - 1  # source options such as maxOffsetsPerTrigger are parsed as Java longs
JAVA_INT_MAX = 2**31 - 1  # partition counts (a source's partitions, spark.sql.shuffle.partitions) are Java ints


@dataclass(frozen=True, slots=True)
class QueryParams:
    """Settings a query runs with; changing any of them needs a restart from the checkpoint."""

    parallelism: int
    shuffle_partitions: int | None = None
    trigger_interval: timedelta | None = None
    max_rows_per_batch: int | None = None

    def to_json(self) -> dict[str, int | float | None]:
        """The one JSON form (state file, REST API, audit trail, logs): the trigger in seconds."""
        return {
            "parallelism": self.parallelism,
            "shuffle_partitions": self.shuffle_partitions,
            "trigger_interval_seconds": self.trigger_interval.total_seconds() if self.trigger_interval is not None else None,
            "max_rows_per_batch": self.max_rows_per_batch,
        }


@dataclass(frozen=True, slots=True)
class QueryView:
    name: str
    status: QueryStatus
    params: QueryParams
    min_parallelism: int = 1
    max_parallelism: int = 1024
    partitions_per_core: int = 1
    rescalable: bool = True  # hosted by us (we can rebuild it) vs attached
    # an ``available_now`` pipeline: each run processes what is there, commits and finishes, so
    # a trigger interval does not apply (the host starts it with ``availableNow`` whatever it is)
    bounded: bool = False
    # its source honours ``max_rows_per_batch`` and the operator set none: the daemon bounds its
    # batches when it restarts it (``normalize.max_batch_triggers``)
    managed_rate_limit: bool = False
    stateful: bool = False
    state_store: str | None = None  # "rocksdb", "hdfs" or None when stateless/unknown
    # oldest first, by start and so by end (a query runs one batch at a time); the evaluation and
    # the policies rely on it (SampleWindow keeps it, a late event included)
    samples: tuple[BatchSample, ...] = ()
    run_started_at: datetime | None = None
    last_error: str | None = None
    restarts: int = 0
    batch_running: bool = False  # a trigger is executing right now (``status.isTriggerActive``)
    batch_tasks: tuple[int, int] | None = None  # (completed, total) tasks of the running batch
    batch_read: RunningRead | None = None  # the input its finished tasks read (None: not reported)
    # the running batch's rows as its checkpoint's offset log planned them, for a source whose
    # offsets count rows (None: not read, or the source's offsets do not count rows)
    batch_planned_rows: int | None = None
    warming: bool = False  # a new run or changed executors: batches are slow because cold
    # what the query's pipeline declares (trigger, rate limit, shuffle partitions; parallelism:
    # its initial one on one core); None for a query the daemon does not host
    declared: QueryParams | None = None
    # the latest trigger that found no new rows, as Spark reports it (``QueryIdleEvent``: at most
    # one every ``spark.sql.streaming.noDataProgressEventInterval``, 1 s in the daemon's session);
    # kept across a restart (a new run reports its first idle trigger only an interval after it started,
    # and the source had no rows then whichever run asked); None: none seen
    idle_at: datetime | None = None

    @property
    def running_batch_rows(self) -> float | None:
        """The running batch's rows: planned (the offset log, exact from the batch's start) or
        else counted from what its finished tasks read (None: neither reported, or no task
        finished yet)."""
        if self.batch_planned_rows is not None:
            return float(self.batch_planned_rows)
        return self.batch_read.batch_rows() if self.batch_read is not None else None

    @property
    def quiet(self) -> bool:
        """A trigger after the newest batch found no new rows: the batches before it tell the
        load before a quiet stretch, not the load now."""
        return self.idle_at is not None and (not self.samples or self.idle_at >= self.samples[-1].ended_at)

    @property
    def idle(self) -> bool:
        """Spark's latest word on the query is that no new rows arrived: :attr:`quiet`, and no
        batch running since."""
        return self.quiet and not self.batch_running


class OutcomeKind(StrEnum):
    """What an asynchronous action that completed was."""

    RESCALE = "rescale"  # a query restarted from its checkpoint with new settings
    RESTART = "restart"  # a failed query restarted after its back-off
    FINISH = "finish"  # a bounded query processed its input and stopped


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """Completion of an asynchronous action (e.g. a query rescale), reported by the shell."""

    subject: str
    kind: OutcomeKind
    ok: bool
    started_at: datetime
    finished_at: datetime
    message: str = ""
    pause: timedelta | None = None  # stop -> first batch done at the new settings
    from_params: QueryParams | None = None
    to_params: QueryParams | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: datetime
    executors: ExecutorView
    queries: tuple[QueryView, ...] = ()
    outcomes: tuple[ActionOutcome, ...] = ()

    def query(self, name: str) -> QueryView | None:
        return next((q for q in self.queries if q.name == name), None)


# --- evaluation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchCostModel:
    """How long a micro-batch takes at a given scale, fitted from its query's batches
    (:mod:`autoscaler.core.costmodel`).

    A batch of ``R`` rows on ``P`` partitions and ``C`` cores runs ``ceil(P / C)`` waves of
    ``min(P, C)`` tasks; each task pays ``w + k x min(P, C)`` besides its ``R / P`` rows at ``mu``
    rows/s, and the batch pays ``o`` once::

        duration(P, C, R) = o + ceil(P / C) x (w + k x min(P, C) + R / (P x mu))
    """

    per_slot: float  # mu: rows/s one task slot processes
    per_task: float = 0.0  # w: seconds of overhead per task (repeats per wave)
    fixed: float = 0.0  # o: seconds per batch for planning, offset log and commit
    contention: float = 0.0  # k: extra seconds per task for each concurrent task
    points: int = 0  # warm batches the fit used
    cold: bool = False  # fitted on cold batches only (a new run, new executors): too pessimistic

    def waves(self, partitions: int, cores: int) -> int:
        return math.ceil(partitions / max(1, cores))

    def duration(self, partitions: int, cores: int, rows: float) -> float:
        """Seconds a batch of ``rows`` takes on ``partitions`` tasks and ``cores`` slots."""
        if partitions <= 0 or cores <= 0 or self.per_slot <= 0:
            return math.inf
        c = max(1, cores)
        per_task = self.per_task + self.contention * min(partitions, c) + rows / (partitions * self.per_slot)
        return self.fixed + math.ceil(partitions / c) * per_task

    def rows_in(self, partitions: int, cores: int, seconds: float) -> float:
        """Rows a batch that takes ``seconds`` must hold (inverse of :meth:`duration`)."""
        c = max(1, cores)
        per_wave = (seconds - self.fixed) / math.ceil(partitions / c) - (self.per_task + self.contention * min(partitions, c))
        return max(0.0, per_wave * partitions * self.per_slot)

    def throughput(self, partitions: int, cores: int) -> float:
        """Rows/s at large batches, where the fixed and per-task costs vanish."""
        return partitions * self.per_slot / self.waves(partitions, cores)


@dataclass(frozen=True, slots=True)
class QueryLoad:
    """Workload of one query, evaluated over its metric window."""

    name: str
    samples: int
    input_rate: float | None = None  # rows/s arriving
    processing_rate: float | None = None  # rows/s while busy, at the observed slots
    model: BatchCostModel | None = None  # how long a batch takes at a given scale
    busy_fraction: float | None = None  # share of wall time spent executing batches
    backlog_rows: float | None = None
    # the age of the oldest row not yet processed: since the latest trigger that left no row
    # behind (the newest batch's start, or a trigger that found no rows) plus the backlog that
    # batch left, in seconds of input; 0 while the query is idle
    lag: timedelta | None = None
    batch_duration: timedelta | None = None
    parallelism: int | None = None
    # rows/s over the latest completed batches, while rows arrived; or the running batch's counted
    # rows when the newest is a burst's first (it under-reads the burst: evaluate.first_after_quiet)
    recent_rate: float | None = None
    live_rate: float | None = None  # rows/s implied by a batch running unusually long
    # live_rate is only a lower bound, told by how long the batch has run before its tasks told
    # its rows (evaluate.RunningRate): it rises every tick the batch runs
    live_rate_lower_bound: bool = False
    idle: bool = False  # Spark reported a trigger that found no rows since the newest batch: rate and lag 0

    @property
    def known(self) -> bool:
        return self.samples > 0 and self.input_rate is not None

    @property
    def capacity_per_slot(self) -> float | None:
        return self.model.per_slot if self.model else None


# --- decision -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proposal:
    """What a policy wants, before normalization."""

    executors: int | None  # None: the policy does not drive the executor count
    reason: Reason
    message: str = ""
    parallelism: Mapping[str, int] = field(default_factory=dict)
    details: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExecutorDecision:
    current: int
    proposed: int | None
    target: int | None
    reason: Reason
    limits: tuple[Reason, ...] = ()  # every normalization step that changed or held the value
    message: str = ""

    @property
    def changes(self) -> bool:
        return self.target is not None and self.target != self.current


@dataclass(frozen=True, slots=True)
class EffectiveMode:
    configured: Mode
    mode: Mode  # active or reactive
    reason: Reason
    fallback: bool = False  # active requested but running reactively on what exists
    message: str = ""

    @property
    def requesting(self) -> bool:
        """Executors are being requested (active mode, not fallen back to reactive behaviour)."""
        return self.mode == Mode.ACTIVE and not self.fallback


@dataclass(frozen=True, slots=True)
class QueryChange:
    name: str
    from_params: QueryParams
    to_params: QueryParams
    reason: Reason
    message: str = ""


@dataclass(frozen=True, slots=True)
class QueryRefusal:
    name: str
    wanted: QueryParams
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Plan:
    set_target: int | None = None  # absolute executor target to assert
    remove: tuple[str, ...] = ()  # executors to remove, chosen by rule
    query_changes: tuple[QueryChange, ...] = ()
    refusals: tuple[QueryRefusal, ...] = ()

    @property
    def empty(self) -> bool:
        return self.set_target is None and not self.remove and not self.query_changes


# --- acting and recording -----------------------------------------------------------------------


class ActionKind(StrEnum):
    """What the realizer did to the cluster."""

    SET_TARGET = "set_target"  # asserted the absolute executor target
    REMOVE = "remove"  # removed executors (and lowered the target by as many)
    RESCALE = "rescale"  # started restarting a query from its checkpoint with new settings


@dataclass(frozen=True, slots=True)
class ActionResult:
    action: ActionKind
    subject: str  # "executors", the removed executors' ids, or a query name
    ok: bool
    message: str = ""


@dataclass(frozen=True, slots=True)
class TickRecord:
    """Everything one tick saw, wanted and did: the unit of the audit trail."""

    at: datetime
    mode: EffectiveMode
    executors_alive: int
    executors_cores: int
    executors_requested: int | None
    executors_pending: int
    executors_lost: tuple[str, ...]
    loads: tuple[QueryLoad, ...]
    proposal: Proposal
    decision: ExecutorDecision
    plan: Plan
    results: tuple[ActionResult, ...]
    paused: bool
    dry_run: bool
    duration: timedelta
    # the snapshot's queries (their batch samples are the snapshot's, not copies), and
    # asynchronous actions that completed
    queries: tuple[QueryView, ...] = ()
    outcomes: tuple[ActionOutcome, ...] = ()
    min_executors: int | None = None  # effective bounds this tick (settings or operator override)
    max_executors: int | None = None
    executor_pods: ExecutorPods | None = None  # on Kubernetes: why requested executors wait

    @property
    def acted(self) -> bool:
        """Removed executors, restarted a query, or changed the executor target."""
        return any(r.ok and (r.action != ActionKind.SET_TARGET or self.decision.changes) for r in self.results)

    @property
    def notable(self) -> bool:
        """Changed (or, paused or in dry run, would change) something, or held or refused a wanted change."""
        decision = self.decision
        wanted = decision.proposed is not None and decision.proposed != decision.current
        return bool(self.acted or wanted or decision.changes or self.plan.refusals or self.plan.query_changes or self.executors_lost)
