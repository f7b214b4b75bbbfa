"""Metric windows: turn a query's recent batches into one :class:`QueryLoad`.

All functions are pure; the Spark adapter keeps a bounded buffer of :class:`BatchSample` per query
(:class:`~autoscaler.spark.progress.SampleWindow`) and the core evaluates the part that falls
inside the window.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional, Sequence

from autoscaler.core.costmodel import fit_cost_model
from autoscaler.core.history import RatePoint, ScalingHistory
from autoscaler.core.model import (
    BatchCostModel,
    BatchSample,
    Executor,
    QueryLoad,
    QueryStatus,
    QueryView,
)

MIN_SAMPLES = 2
_ENDED = operator.attrgetter("ended_at")  # the key a window is found by (bisection)
RECENT_BATCHES = 3
MIN_DONE_SHARE = 0.25  # extrapolate a running batch only once a quarter of its tasks are done
MAX_LIVE_FACTOR = 20.0  # a running batch implies at most 20x the rows of the comparable one
LIVE_ROWS_RATIO = 1.5  # a running batch counts once it holds (or runs) 1.5x the latest one


def schedule_lag(trigger: timedelta | None) -> timedelta:
    """The lag a query that keeps up has anyway: up to two trigger intervals.

    A row waits for the next trigger (up to one interval) and then for its batch (up to one
    more, as long as batches fit their interval). More executors cannot shorten this part of
    the lag; only the lag beyond it is a backlog that scaling can drain.
    """
    return 2 * trigger if trigger else timedelta(0)


def judged_lag(target_lag: timedelta, trigger: timedelta | None) -> timedelta:
    """The lag a query with ``trigger`` is scaled to stay under: the SLO's ``target_lag``, or its
    :func:`schedule_lag` when that is longer (no number of executors gets below it)."""
    return max(target_lag, schedule_lag(trigger))


def newest_start(samples: Sequence[BatchSample]) -> datetime | None:
    """When the newest buffered batch started (None: no batch yet)."""
    return samples[-1].started_at if samples else None


def batches_since(samples: Sequence[BatchSample], since: datetime | None) -> int:
    """Batches that started after ``since`` (from :func:`newest_start`). Counting the buffer itself
    would stop once it is full (a query's window keeps 240 batches): a wait for "two more"
    would then never end."""
    return sum(1 for s in samples if since is None or s.started_at > since)


def arrival_start(previous: BatchSample, sample: BatchSample) -> datetime:
    """The earliest the rows of ``sample`` can have arrived: the trigger before it.

    Spark reports ``inputRowsPerSecond`` as the rows over the time since the previous trigger,
    whether that trigger ran a batch or found no new rows; after quiet triggers the rows of a
    batch arrived within one trigger interval, not since the previous batch. Without a rate
    (the first batch of a run) the previous batch's start.
    """
    if sample.input_rate and sample.input_rows > 0:
        since = sample.started_at - timedelta(seconds=sample.input_rows / sample.input_rate)
        if since > previous.started_at:
            return since
    return previous.started_at


def first_after_quiet(view: QueryView, ended: Sequence[BatchSample]) -> bool:
    """Whether the newest of the ``ended`` batches is the first after a quiet stretch: Spark
    reported a trigger that found no rows after the batch before it ended and before it began."""
    if view.idle_at is None or not ended or view.idle_at >= ended[-1].started_at:
        return False
    return len(ended) < 2 or view.idle_at >= ended[-2].ended_at


def active_rate(samples: Sequence[BatchSample]) -> float | None:
    """Rows/s while rows arrived: the rows of the batches after the first over the time they
    arrived in (:func:`arrival_start`), plus backlog growth. Equal to :func:`arrival_rate` under a
    steady load; after quiet triggers it is the rate of the rows that came, not their average
    over the quiet time (a burst after an idle hour is a burst)."""
    if len(samples) < 2:
        return _own_rate(samples[0]) if samples else None
    rows = 0.0
    span = 0.0
    for previous, sample in itertools.pairwise(samples):
        rows += sample.input_rows
        span += (sample.started_at - arrival_start(previous, sample)).total_seconds()
    first, last = samples[0], samples[-1]
    if first.backlog_rows is not None and last.backlog_rows is not None:
        rows += last.backlog_rows - first.backlog_rows
    if span <= 0:
        return last.input_rate
    return max(0.0, rows / span)


def _own_rate(sample: BatchSample) -> float | None:
    """A batch's own ``input_rate`` (Spark's ``inputRowsPerSecond``), None where Spark had no
    trigger before it to measure from: a query's first batch reports 0 rows/s whatever it read
    (the demo's console said "0 rows/s" with 27 s of lag and 3,000 rows in that batch)."""
    if sample.input_rate == 0 and sample.input_rows > 0:
        return None
    return sample.input_rate


def batch_arrival_rate(previous: BatchSample | None, sample: BatchSample) -> float:
    """Rows/s that arrived while ``sample`` was waiting to be planned: its rows plus the growth
    of the backlog since ``previous`` was planned, over the time they arrived in; its
    ``input_rate`` where either backlog is unknown (or there is no batch before it).

    Spark's ``inputRowsPerSecond`` is the rows a batch took over the time since the trigger
    before: a batch draining a backlog (under the rate limit the daemon manages, rows that
    arrived minutes earlier) reads as a multiple of the load. Its rows less the backlog it
    drained are what arrived (:func:`active_rate` over the pair).
    """
    if previous is None or previous.backlog_rows is None or sample.backlog_rows is None:
        return sample.input_rate or 0.0
    return active_rate((previous, sample)) or 0.0


def arrival_rate(samples: Sequence[BatchSample]) -> float | None:
    """Rows/s arriving on average: rows processed between the first and last batch start plus
    backlog growth (quiet stretches included: the window's mean rate)."""
    if not samples:
        return None
    if len(samples) == 1:
        return _own_rate(samples[0])
    first, last = samples[0], samples[-1]
    span = (last.started_at - first.started_at).total_seconds()
    if span <= 0:
        return last.input_rate
    rows = sum(s.input_rows for s in samples[1:])
    if first.backlog_rows is not None and last.backlog_rows is not None:
        rows += last.backlog_rows - first.backlog_rows
    return max(0.0, rows / span)


@dataclass(frozen=True, slots=True)
class RunningRate:
    """Rows/s a running batch implies, and whether only at least that.

    Told by how long the batch has run, before enough of its tasks have ended to tell its rows,
    the figure is a lower bound that rises every tick the batch runs; counted from its finished
    tasks' input, or extrapolated from a share of them, it is an estimate of the batch's rows.
    """

    rate: float
    lower_bound: bool


def live_rate_bound(
    view: QueryView, last: BatchSample, cores: int, now: datetime, executors: Sequence[Executor] = ()
) -> RunningRate | None:
    """Arrival rate implied by a batch still running unusually long, or None.

    Spark plans a batch with every row that arrived since the previous one, and progress
    events arrive only when a batch ends, so a step up stays invisible while its first large
    batch runs. Compared with the latest batch at the same scale (cores and partitions), a
    batch running ``x`` times as long holds about ``x`` times its rows (the fixed cost taken
    out); when a share ``f`` of its tasks is done its whole duration is about ``age / f``.
    Only batches running over 1.5x the comparable one count, and a new run or a latest batch
    slow because cold do not count at all. The scale is the cores the running batch started
    on: executors that joined it since only shorten it, so the rows it implies stay a lower
    bound and a scale-up asked for on them does not blind the policy until the batch ends.

    Where the rows its finished tasks read are reported (:attr:`QueryView.running_batch_rows`),
    they say the batch's rows instead: counted, not inferred from how long it runs, so no cap (a
    stalled batch does not read as load) and executors that joined it do not matter, nor does a
    new run's first batch being cold: its rows arrived from the latest batch's planning until the
    run started; while none has finished, the inference above.
    """
    if not view.batch_running or cores <= 0:
        return None
    # when the run the running batch belongs to started, if it is that run's first batch
    new_run_at = view.run_started_at if view.run_started_at is not None and last.started_at < view.run_started_at else None
    trigger = view.params.trigger_interval or timedelta(0)
    started = max(last.ended_at, last.started_at + trigger)
    counted = view.running_batch_rows
    if counted is not None:
        # its rows arrived after the latest batch was planned and by the trigger that planned it:
        # the next trigger, or for a new run's first batch the run's start (it takes the rows of
        # the restart pause; counted, they tell a step during the pause however slow it runs cold)
        planned = max(started, new_run_at) if new_run_at is not None else started
        interval = (planned - last.started_at).total_seconds()
        return RunningRate(counted / interval, False) if interval > 0 and counted > LIVE_ROWS_RATIO * last.input_rows else None
    if new_run_at is not None:
        return None
    if last.cold or last.cores != cores_at(executors, started, cores) or last.parallelism != view.params.parallelism or last.input_rows <= 0:
        return None
    age = (now - started).total_seconds()
    interval = (started - last.started_at).total_seconds()
    if age <= 0 or interval <= 0:
        return None
    duration, extrapolated = age, False
    if view.batch_tasks is not None:
        done, total = view.batch_tasks
        if total > 0 and MIN_DONE_SHARE <= done / total < 1:
            duration, extrapolated = max(age, age * total / done), True
    usual = last.duration.total_seconds()
    if duration <= LIVE_ROWS_RATIO * usual:
        return None
    fixed = last.fixed_overhead.total_seconds() if last.fixed_overhead is not None else 0.0
    factor = min(MAX_LIVE_FACTOR, (duration - fixed) / max(1e-3, usual - fixed))
    return RunningRate(last.input_rows * factor / interval, not extrapolated)


def cores_at(executors: Sequence[Executor], at: datetime, cores: int) -> int:
    """The cores of ``executors`` registered by ``at`` (those a batch that started then began on);
    ``cores`` when the executors are not known."""
    return sum(e.cores for e in executors if e.added_at is None or e.added_at <= at) if executors else cores


def burst_rate(view: QueryView, model: BatchCostModel | None, cores: int, now: datetime) -> RunningRate | None:
    """Rows/s of the first batch after a quiet stretch, while it runs, from the cost model; None
    when there is no model or no task count yet.

    Its rows arrived within the trigger before it started (the trigger before found none), and
    it started after the idle report (at the earliest one trigger after it: the longest it can
    have run, so the most rows it can hold). Once a quarter of its tasks are done its duration is
    about ``age / done``; before, at least ``age``: the rows the model says such a batch holds,
    over one trigger. A burst on the few executors left at the floor shows within one or two
    triggers instead of when its long first batch ends. Where the rows its finished tasks read
    are reported, they say the batch's rows (:attr:`QueryView.running_batch_rows`).
    """
    trigger = view.params.trigger_interval
    counted = view.running_batch_rows
    if counted is not None and trigger:
        return RunningRate(counted / trigger.total_seconds(), False)
    if model is None or model.cold or view.idle_at is None or view.batch_tasks is None or cores <= 0 or not trigger:
        return None
    interval = trigger.total_seconds()
    age = (now - (view.idle_at + trigger)).total_seconds()
    done, total = view.batch_tasks
    if age <= 0 or total <= 0:
        return None
    extrapolated = done / total >= MIN_DONE_SHARE
    duration = max(age, age * total / max(1, done)) if extrapolated else age
    return RunningRate(model.rows_in(view.params.parallelism, cores, duration) / interval, not extrapolated)


Fitter = Callable[[Sequence[BatchSample]], Optional[BatchCostModel]]


def _ended_by(samples: Sequence[BatchSample], now: datetime) -> Sequence[BatchSample]:
    """The batches that ended by ``now``: the buffer is in time order (a query runs one batch
    at a time), so only its newest ones can be later (an event stamped ahead of our clock)."""
    end = len(samples)
    while end and samples[end - 1].ended_at > now:
        end -= 1
    return samples if end == len(samples) else samples[:end]


def evaluate_query(
    view: QueryView,
    now: datetime,
    window: timedelta,
    cores: int = 0,
    fit: Fitter | None = fit_cost_model,
    executors: Sequence[Executor] = (),
) -> QueryLoad:
    """Evaluate a query's recent batches at ``now``.

    The arrival rate comes from the latest batches (and a batch still running), the busy
    share from the batches that ended within ``window``, the cost model from all buffered warm
    batches by ``fit`` (None: a policy that does not use it does not pay for it; the
    reconciler passes a per-query :class:`~autoscaler.core.costmodel.CostModelCache`). Cold
    batches count for the arrival rate but not for the cost model.
    """
    ordered = _ended_by(view.samples, now)
    samples = ordered[bisect.bisect_left(ordered, now - window, key=_ENDED) :]
    if len(samples) < MIN_SAMPLES:
        # batches slower than the window: the latest ones are stale but the best evidence there is
        samples = ordered[-MIN_SAMPLES:]
    idle = view.idle
    if not samples:
        if idle:  # a query that never had data: nothing arrives and nothing waits
            return QueryLoad(name=view.name, samples=0, input_rate=0.0, lag=timedelta(0), parallelism=view.params.parallelism, idle=True)
        return QueryLoad(name=view.name, samples=0, parallelism=view.params.parallelism)
    # Capacity is a property of the job, not of the current load: fit it on the buffered
    # batches, whose sizes vary more than those of one window (needed to separate overheads).
    model = fit(view.samples) if fit is not None else None
    last = samples[-1]
    # The rate over the latest batches, or the bound from a batch still running when that is
    # higher: a step up is seen within seconds. Smoothing a drop is the job of the delayed
    # scale-down (the largest recommendation over its window), not of this estimate.
    span = (last.ended_at - samples[0].started_at).total_seconds()
    busy = sum(s.duration.total_seconds() for s in samples)
    processing = [s.processing_rate for s in samples if s.processing_rate is not None]
    if idle:
        # Spark found no new rows after the newest batch: nothing arrives now and nothing waits
        # (the batches before the quiet stretch still tell capacity and the busy share)
        return QueryLoad(
            name=view.name,
            samples=len(samples),
            input_rate=0.0,
            processing_rate=sum(processing) / len(processing) if processing else None,
            model=model,
            busy_fraction=min(1.0, busy / span) if span > 0 else None,
            backlog_rows=0.0,
            lag=timedelta(0),
            batch_duration=last.duration,
            parallelism=view.params.parallelism,
            recent_rate=0.0,
            idle=True,
        )
    if view.quiet and view.idle_at is not None:
        # the first batch after a quiet stretch is running: its rows arrived after the idle
        # trigger, at a rate the batches before the quiet stretch do not tell; the cost model
        # tells it from how far the batch has got (else unknown until it ends), and the oldest
        # of its rows waits since the idle trigger at most
        # the cores the batch started on: executors registered since joined it halfway (counting
        # them would take the batch for a larger one)
        started = view.idle_at + (view.params.trigger_interval or timedelta(0))
        burst = burst_rate(view, model, cores_at(executors, started, cores), now)
        burst_figure = burst.rate if burst is not None else None
        return QueryLoad(
            name=view.name,
            samples=len(samples),
            input_rate=burst_figure,
            recent_rate=burst_figure,
            live_rate=burst_figure,
            live_rate_lower_bound=burst is not None and burst.lower_bound,
            processing_rate=sum(processing) / len(processing) if processing else None,
            model=model,
            busy_fraction=min(1.0, busy / span) if span > 0 else None,
            backlog_rows=None,
            lag=max(timedelta(0), now - view.idle_at),
            batch_duration=last.duration,
            parallelism=view.params.parallelism,
        )
    recent = active_rate(samples[-RECENT_BATCHES:]) if len(samples) >= RECENT_BATCHES else active_rate(samples)
    running = live_rate_bound(view, last, cores, now, executors)
    live = running.rate if running is not None else None
    if live is not None and view.running_batch_rows is not None and first_after_quiet(view, ordered):
        # the newest batch is a burst's first: the trigger before it found no rows, so the burst
        # began within its trigger and its rows over the trigger under-read the burst (a burst
        # 4 s into a 10 s trigger reads 40 % of its rate). The running batch's rows, counted,
        # arrived over the whole time since: the burst's rate now, not a straggler's inference
        recent = live if recent is None else max(recent, live)
    rate = live if recent is None else recent if live is None else max(recent, live)
    backlog = float(last.backlog_rows) if last.backlog_rows is not None else None
    # the oldest waiting row arrived after the newest batch started (plus the backlog it left)
    waiting = (now - last.started_at).total_seconds()
    if backlog and rate:
        waiting += backlog / rate
    return QueryLoad(
        name=view.name,
        samples=len(samples),
        input_rate=rate,
        processing_rate=sum(processing) / len(processing) if processing else None,
        model=model,
        busy_fraction=min(1.0, busy / span) if span > 0 else None,
        backlog_rows=backlog,
        lag=timedelta(seconds=max(0.0, waiting)),
        batch_duration=last.duration,
        parallelism=view.params.parallelism,
        recent_rate=recent,
        live_rate=live,
        live_rate_lower_bound=running is not None and running.lower_bound,
    )


def step_rate(samples: Sequence[BatchSample], start: datetime, end: datetime) -> float | None:
    """Mean rows/s that arrived during ``[start, end)``, from the batches planned in it.

    The rows that arrived from the planning of the batch before the step to that of the step's
    newest batch are the rows the step's batches took plus the backlog's growth (a catch-up
    batch takes rows that arrived earlier, and the backlog shrinks by as many); over that time
    they are the step's arrival rate. None when no batch before the step is known.
    """
    inside: list[BatchSample] = []
    before: BatchSample | None = None
    for s in reversed(samples):
        if s.started_at >= end:
            continue
        if s.started_at >= start:
            inside.append(s)
        else:
            before = s
            break
    if before is None:
        return None
    if not inside:
        return 0.0  # no trigger found new rows (Spark skips empty batches)
    # the mean over the time from the batch before to the step's newest (quiet triggers included)
    return arrival_rate([before, *reversed(inside)])


def record_rates(history: ScalingHistory, queries: Sequence[QueryView], now: datetime, step: timedelta) -> ScalingHistory:
    """Append each running query's mean arrival rate for the step that ended one step ago.

    One step of delay lets every batch planned in that step report (listener events arrive when
    a batch ends). A restart within the step does not matter: the first batch of the new run
    takes the rows since the last batch of the old one. Steps the daemon did not see stay missing.
    """
    seconds = step.total_seconds()
    start = datetime.fromtimestamp((math.floor(now.timestamp() / seconds) - 2) * seconds, now.tzinfo or timezone.utc)
    for view in queries:
        if view.status != QueryStatus.RUNNING:
            continue
        last = history.last_rate_at(view.name)
        if last is not None and last >= start:
            continue
        rate = step_rate(view.samples, start, start + step)
        if rate is not None:
            history = history.with_rate(RatePoint(start, view.name, rate))
    return history
