"""``spark-dra``: Spark's core dynamic allocation (``spark.dynamicAllocation.*``) as a baseline.

Published behaviour (Spark ``ExecutorAllocationManager``, docs/job-scheduling.md):

* the signal is tasks: ``maxNeeded = ceil((pending + running tasks) x allocationRatio /
  tasksPerExecutor)`` (:func:`max_needed`), within ``[minExecutors, maxExecutors]``;
* when tasks have been pending for ``schedulerBacklogTimeout`` (1 s), the target grows by 1,
  then by 2, 4, 8 ... every ``sustainedSchedulerBacklogTimeout`` (1 s) while the backlog lasts,
  from the executors running when it is below them (:func:`ramp_target`), never above
  ``maxNeeded``; the target restarts from the minimum once nothing is pending (between
  micro-batches), and a lower target never kills executors;
* an executor is removed only after ``executorIdleTimeout`` (60 s) without a task, down to the
  minimum.

``tests/unit/test_spark_dra_fidelity.py`` runs the numeric cases of Spark's
``ExecutorAllocationManagerSuite`` through these functions.

On a micro-batch query every batch briefly queues its tasks, so the target jumps towards the
batch's task count, and executors are idle only when no batch runs for the whole timeout
(the scheduler spreads each batch's tasks over all executors): measured on Spark 4.3,
``../shared/notes/spark-dra-on-streaming-baseline.md``.

From the snapshot: the running batch's pending tasks (``batch_tasks``) and, for batches that
finished since the previous decision, the time their last wave waited (``(waves - 1) x task
time``). A backlog of ``b`` seconds has ``r = floor(b - timeout) / sustained + 1`` add rounds,
which take the target to ``min(maxNeeded, 2^r)``.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, ClassVar, Mapping

from pydantic import Field

from autoscaler.core.model import BatchSample, Proposal, QueryStatus, QueryView, Reason
from autoscaler.core.policy import NO_EXTRA_SAFETY, Policy, PolicyInput, PolicyParams
from autoscaler.core.settings import Duration
from policies.registry import register


def add_rounds(backlog: float, timeout: float, sustained: float) -> int:
    """Add rounds Spark runs during a task backlog of ``backlog`` seconds."""
    if backlog <= timeout:
        return 0
    return int((backlog - timeout) // max(sustained, 1e-9)) + 1


def max_needed(tasks: int, ratio: float, cores_per_executor: int) -> int:
    """``maxNumExecutorsNeeded``: executors for the unfinished tasks at the allocation ratio."""
    return math.ceil(tasks * ratio / max(1, cores_per_executor))


def ramp_target(rounds: int, max_needed: int, running: int = 1) -> int:
    """Target after ``rounds`` add rounds (``addExecutors``): from the executors running (or the
    target, whichever is more), each round adds 1, 2, 4 ...: ``running + 2^r - 1``, never above
    ``max_needed``; 0 without a round (no ramp)."""
    if rounds <= 0:
        return 0
    if running >= max_needed:
        return running  # numExecutorsTarget >= maxNumExecutorsNeeded: nothing to add
    return min(max_needed, running + 2 ** min(rounds, 30) - 1)


def finished_batch_backlog(sample: BatchSample) -> float:
    """Seconds the last wave of a finished batch waited for a free slot: ``(waves - 1) x task time``."""
    if not sample.cores or not sample.parallelism:
        return 0.0
    waves = math.ceil(sample.parallelism / sample.cores)
    if waves <= 1:
        return 0.0
    fixed = sample.fixed_overhead.total_seconds() if sample.fixed_overhead is not None else 0.0
    task = max(0.0, sample.duration.total_seconds() - fixed) / waves
    return (waves - 1) * task


@register("spark-dra")
class SparkDynamicAllocationPolicy(Policy):
    """Spark's batch dynamic allocation: exponential ramp on pending tasks, removal after an idle timeout."""

    settings_profile: ClassVar[Mapping[str, Any]] = NO_EXTRA_SAFETY
    needs_cost_model: ClassVar[bool] = False

    class Params(PolicyParams):
        scheduler_backlog_timeout: Duration = Field(timedelta(seconds=1), description="schedulerBacklogTimeout")
        sustained_backlog_timeout: Duration = Field(
            timedelta(seconds=1), description="sustainedSchedulerBacklogTimeout"
        )
        executor_idle_timeout: Duration = Field(timedelta(seconds=60), description="executorIdleTimeout")
        allocation_ratio: float = Field(1.0, gt=0, le=1, description="executorAllocationRatio")

    def __init__(self, params: Params) -> None:
        self.p = params

    def _max_needed(self, tasks: int, inp: PolicyInput) -> int:
        return min(inp.max_executors, max(inp.min_executors, max_needed(tasks, self.p.allocation_ratio, inp.cores_per_executor)))

    def _ramp(self, view: QueryView, inp: PolicyInput) -> int:
        """Highest target the add rounds reached since the previous decision."""
        timeout = self.p.scheduler_backlog_timeout.total_seconds()
        sustained = self.p.sustained_backlog_timeout.total_seconds()
        best = 0
        now = inp.now
        running = max(inp.min_executors, inp.current_executors)
        since = now - (inp.interval or timedelta(0))
        for s in reversed(view.samples):
            if s.ended_at <= since:
                break
            if s.ended_at <= now:
                rounds = add_rounds(finished_batch_backlog(s), timeout, sustained)
                best = max(best, ramp_target(rounds, self._max_needed(s.parallelism or 0, inp), running))
        if view.batch_running and view.batch_tasks is not None:
            done, total = view.batch_tasks
            remaining = total - done
            if remaining > inp.current_cores:
                started = _running_batch_start(view, now)
                rounds = add_rounds((now - started).total_seconds(), timeout, sustained)
                best = max(best, ramp_target(rounds, self._max_needed(remaining, inp), running))
        return best

    def _idle(self, view: QueryView, now: datetime) -> bool:
        """No task for the idle timeout: no batch running and none ended within it."""
        if view.batch_running:
            return False
        last = view.samples[-1].ended_at if view.samples else view.run_started_at
        return last is None or now - last >= self.p.executor_idle_timeout

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        views = [v for v in inp.snapshot.queries if v.status == QueryStatus.RUNNING]
        current = inp.target_executors
        if not views:
            return Proposal(executors=None, reason=Reason.NO_METRICS, message="no running query")
        ramp = max(self._ramp(v, inp) for v in views)
        if ramp > current:
            return Proposal(ramp, Reason.SCALE_UP_FOR_BACKLOG, f"tasks pending: add rounds reach {ramp} executor(s)")
        if all(self._idle(v, inp.now) for v in views):
            return Proposal(
                inp.min_executors, Reason.EXECUTORS_IDLE, f"no task for {self.p.executor_idle_timeout}: remove idle executors"
            )
        return Proposal(current, Reason.WITHIN_TARGET, "no pending tasks and no idle executor")


def _running_batch_start(view: QueryView, now: datetime) -> datetime:
    """When the batch in flight started: after the previous batch and its trigger interval."""
    if not view.samples:
        return view.run_started_at or now
    last = view.samples[-1]
    trigger = view.params.trigger_interval or timedelta(0)
    start = max(last.ended_at, last.started_at + trigger)
    if view.run_started_at is not None and view.run_started_at > last.ended_at:
        start = view.run_started_at
    return min(start, now)
