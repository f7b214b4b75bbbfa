"""Turn a decision into actions: which executors to remove, which queries to rescale.

Pure functions; the reconciler hands the resulting :class:`Plan` to the actuators.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from autoscaler.core.capacity import aligned_parallelism, wave_efficiency
from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import (
    BatchCostModel,
    Executor,
    ExecutorDecision,
    ExecutorView,
    Mode,
    QueryChange,
    QueryParams,
    QueryRefusal,
    QueryStatus,
    QueryView,
    Reason,
)
from autoscaler.core.settings import NormalizeSettings


def removal_order(alive: Sequence[Executor]) -> list[Executor]:
    """Executors in the order we remove them: idle first, then newest, then highest id.

    Idle executors lose no running task; among equals the newest has the least cached state
    and the coldest Python workers. The id breaks ties so the choice is deterministic.
    """

    def key(e: Executor) -> tuple[int, float, tuple[int, str]]:
        added = e.added_at.timestamp() if e.added_at else 0.0
        numeric = int(e.id) if e.id.isdigit() else -1
        return (e.active_tasks, -added, (-numeric, e.id))

    return sorted(alive, key=key)


def choose_removals(view: ExecutorView, target: int) -> tuple[str, ...]:
    """Executors to remove so that ``target`` stay, skipping those already being removed."""
    if len(view.alive) <= target:
        return ()  # the usual tick: nothing to remove
    staying = [e for e in view.alive if e.id not in view.pending_removal]
    excess = len(staying) - target
    if excess <= 0:
        return ()
    return tuple(e.id for e in removal_order(staying)[:excess])


@dataclass(frozen=True, slots=True)
class ExecutorPosition:
    current: int  # where we are, or are heading while a request is outstanding
    in_flight: bool
    not_granted: bool  # requested more than registered for longer than the request timeout


def request_waiting_since(
    since: datetime | None, *, registered: int, requested: int | None, arrived: bool, asked_at: datetime | None, now: datetime
) -> datetime | None:
    """Since when an executor request has waited without progress (None: nothing outstanding).

    A request counts as not granted once no requested executor has registered for the request
    timeout: executors that keep arriving, however slowly (a loaded node, image pulls), mean
    the cluster manager is granting it.
    """
    if requested is None or registered >= requested:
        return None
    if arrived:
        return now
    return since if since is not None else (asked_at or now)


def executor_position(view: ExecutorView, now: datetime, request_timeout: timedelta, mode: Mode) -> ExecutorPosition:
    alive = view.count - len(view.pending_removal)
    if mode != Mode.ACTIVE or view.requested_total is None:
        return ExecutorPosition(alive, bool(view.pending_removal), False)
    waiting = view.requested_total > alive
    timed_out = waiting and view.waiting_since is not None and now - view.waiting_since > request_timeout
    if timed_out:
        # keep heading for the outstanding request (re-asserted every tick) but stop waiting for it
        return ExecutorPosition(view.requested_total, bool(view.pending_removal), True)
    return ExecutorPosition(view.requested_total, waiting or bool(view.pending_removal), False)


def plan_executors(decision: ExecutorDecision, view: ExecutorView, mode: Mode) -> tuple[int | None, tuple[str, ...]]:
    """Absolute target to assert and executors to remove (active mode only)."""
    if mode != Mode.ACTIVE or decision.target is None:
        return None, ()
    return decision.target, choose_removals(view, decision.target)


@dataclass(frozen=True, slots=True)
class QueryPlanInput:
    now: datetime
    queries: Sequence[QueryView]
    cores: int  # cores available to the queries now
    executors_settling: bool  # an executor change is still in flight
    wanted: Mapping[str, tuple[QueryParams, Reason]]  # explicit requests: policy or operator
    history: ScalingHistory
    settings: NormalizeSettings
    models: Mapping[str, BatchCostModel] = field(default_factory=dict)  # each query's batch cost model, where fitted
    # cores a managed rate limit is sized for: those one scale-up step can reach from ``cores``
    # (0: ``cores``), so a bound set at the floor does not hold back the executors a burst adds
    limit_cores: int = 0


def managed_rate_limit(view: QueryView, params: QueryParams, cores: int, model: BatchCostModel | None, triggers: float) -> int | None:
    """The rate limit the daemon gives a query it restarts: the rows ``params``' partitions on
    ``cores`` process in ``triggers`` trigger intervals, by the cost model; None to leave it (the
    source takes none, the operator set one, no warm model or no trigger yet). The limit changes
    only with a restart (a source option), so ``cores`` are those the next scale-up step can reach.

    Spark plans a batch with every row that arrived; behind, a batch grows without bound and
    progress is reported only when it ends. A bounded batch ends within a few triggers, and the
    rows it left behind show as the source's backlog.
    """
    trigger = params.trigger_interval
    if not view.managed_rate_limit or triggers <= 0 or model is None or model.cold or not trigger or cores <= 0:
        return None
    rows = model.rows_in(params.parallelism, cores, triggers * trigger.total_seconds())
    return max(1, int(rows)) if rows > 0 else None


# a managed rate limit is raised once the cores process this many times more within its bound,
# and the batches are full: one restart at least doubles it (a few restarts across any growth)
OUTGROWN_FACTOR = 2.0
FULL_BATCH = 0.9  # a batch this close to the limit was held back by it


def outgrown_rate_limit(view: QueryView, cores: int, model: BatchCostModel | None, triggers: float) -> tuple[QueryParams, Reason] | None:
    """A restart that raises the rate limit the daemon gave the query, when its batches are full
    and the ``cores`` now process ``OUTGROWN_FACTOR`` times more within ``triggers`` triggers;
    None otherwise, and for a limit its pipeline declares.

    The limit is set at a restart for the cores then in reach. The executors can grow past them
    without a restart (the partitions stay), and a cost model fitted on a slow start can set it
    low: full batches would then hold the query at the limit while its lag grows for as long as
    the load stays high."""
    limit = view.params.max_rows_per_batch
    if not view.managed_rate_limit or limit is None or (view.declared is not None and view.declared.max_rows_per_batch == limit):
        return None
    if not view.samples or view.samples[-1].input_rows < FULL_BATCH * limit:
        return None
    raised = managed_rate_limit(view, view.params, cores, model, triggers)
    if raised is None or raised < OUTGROWN_FACTOR * limit:
        return None
    return replace(view.params, max_rows_per_batch=None), Reason.RATE_LIMIT_OUTGROWN


def aligned_params(view: QueryView, cores: int, min_efficiency: float) -> tuple[QueryParams, Reason] | None:
    """New params when the partitions do not fit the cores, else None."""
    p = view.params.parallelism
    if cores <= 0:
        return None
    if p < cores and p < view.max_parallelism:
        reason = Reason.PARTITIONS_BELOW_CORES
    elif wave_efficiency(p, cores) < min_efficiency:
        reason = Reason.UNEVEN_WAVES
    else:
        return None
    new_p = aligned_parallelism(cores, view.partitions_per_core, view.min_parallelism, view.max_parallelism)
    if new_p == p:
        return None
    return replace(view.params, parallelism=new_p), reason


def refusal_for(view: QueryView, wanted: QueryParams) -> tuple[Reason, str] | None:
    """Why a query cannot take ``wanted`` now, or None if it can."""
    if not view.rescalable:
        return Reason.QUERY_NOT_RESCALABLE, "query is attached, not hosted: the daemon cannot rebuild it"
    if view.bounded and wanted.trigger_interval != view.params.trigger_interval:
        return (
            Reason.BOUNDED_QUERY_TRIGGER,
            "the query's pipeline is available_now (it processes what is there, commits and finishes): a trigger interval does not apply",
        )
    if view.status != QueryStatus.RUNNING:
        return Reason.QUERY_BUSY, f"query is {view.status.value}"
    shuffle_changes = wanted.shuffle_partitions is not None and wanted.shuffle_partitions != view.params.shuffle_partitions
    if view.stateful and shuffle_changes and view.state_store != "rocksdb":
        return (
            Reason.STATE_PINS_SHUFFLE_PARTITIONS,
            f"the checkpoint pins spark.sql.shuffle.partitions={view.params.shuffle_partitions} for its state "
            f"({view.state_store or 'unknown'} state store); only the RocksDB state store can be repartitioned",
        )
    return None


def plan_queries(inp: QueryPlanInput) -> tuple[tuple[QueryChange, ...], tuple[QueryRefusal, ...]]:
    changes: list[QueryChange] = []
    refusals: list[QueryRefusal] = []
    for view in inp.queries:
        if view.status != QueryStatus.RUNNING and view.name not in inp.wanted:
            continue
        explicit = inp.wanted.get(view.name)
        limit_cores = inp.limit_cores or inp.cores
        model = inp.models.get(view.name)
        want = (
            explicit
            or aligned_params(view, inp.cores, inp.settings.min_wave_efficiency)
            or outgrown_rate_limit(view, limit_cores, model, inp.settings.max_batch_triggers)
        )
        if want is None or want[0] == view.params:
            continue
        params, reason = want
        refused = refusal_for(view, params)
        if refused is None and explicit is None:
            last = inp.history.last_change_at(view.name)
            if last is not None and inp.now - last < inp.settings.query_rescale_cooldown:
                refused = (Reason.QUERY_COOLDOWN, "rescaled recently; waiting for the cooldown")
            elif inp.executors_settling:
                refused = (Reason.EXECUTORS_SETTLING, "waiting for executor changes to settle before rescaling")
        if refused is not None:
            refusals.append(QueryRefusal(view.name, params, refused[0], refused[1]))
            continue
        if reason == Reason.RATE_LIMIT_OUTGROWN:
            msg = f"rate limit {view.params.max_rows_per_batch} rows a batch outgrown by {inp.cores} core(s)"
        else:
            msg = f"partitions {view.params.parallelism} -> {params.parallelism} for {inp.cores} core(s)"
        limit = managed_rate_limit(view, params, limit_cores, model, inp.settings.max_batch_triggers)
        if limit is not None and (explicit is None or explicit[1] != Reason.OPERATOR_REQUEST):  # an operator's request says what it wants
            params = replace(params, max_rows_per_batch=limit)
            msg += f", at most {limit} rows a batch"
        changes.append(QueryChange(view.name, view.params, params, reason, msg))
    return tuple(changes), tuple(refusals)


@dataclass(frozen=True, slots=True)
class QueryResume:
    """What a daemon keeps of a hosted query to start it again as it ran: the settings it ran
    with, and what its pipeline declared then (to tell the daemon's and the operators' changes
    from a new pipeline definition)."""

    running: QueryParams
    declared: QueryParams


def resumed_params(
    declared: QueryParams, saved: QueryResume | None, min_parallelism: int, max_parallelism: int
) -> tuple[QueryParams, tuple[str, ...]]:
    """The settings a hosted query starts with after a daemon restart, and the fields resumed.

    The partitions it last ran with (within the pipeline's range: the daemon chose them). A
    trigger, rate limit or shuffle partitions it ran with differently from what its pipeline
    declared (an operator's change), unless the pipeline now declares something else than it
    did then (a new definition wins). Everything else as declared.
    """
    if saved is None:
        return declared, ()
    changes: dict[str, Any] = {}
    if min_parallelism <= saved.running.parallelism <= max_parallelism and saved.running.parallelism != declared.parallelism:
        changes["parallelism"] = saved.running.parallelism
    for name in ("trigger_interval", "max_rows_per_batch", "shuffle_partitions"):
        ran, was, now = getattr(saved.running, name), getattr(saved.declared, name), getattr(declared, name)
        if ran != was and was == now:
            changes[name] = ran
    return replace(declared, **changes), tuple(changes)
