"""``predictive`` (the default): rate-based sizing for the load expected next, partitions aligned.

In the spirit of DS2 and Flink's autoscaler, adapted to micro-batches, with a forecast:

* **capacity** comes from each query's fitted batch cost model (:mod:`autoscaler.core.costmodel`):
  a batch of ``lambda x I`` rows on ``C`` cores and ``P`` partitions takes
  ``o + ceil(P / C) x (w + k x min(P, C) + R / (P x mu))``; the query's utilization is that
  duration over the trigger interval ``I``;
* **rate to provision for**: the highest arrival rate expected within ``horizon`` (the current
  rate, or a seasonal forecast from the remembered rates when it has proved better than the
  current rate, :mod:`autoscaler.core.forecast`), plus the backlog drained within
  ``catch_up_duration``, plus, when partitions change, the rows that arrive during the restart
  pause (Flink's restart term, with the largest measured pause);
* **size**: the fewest cores whose predicted utilization at that rate is at most
  ``target_utilization``; partitions follow the cores (``partitions_per_core`` per core, one
  rescale from the checkpoint in the same decision) so every task wave is full, and a query
  keeps at least ``min_partitions`` (in whole waves): a batch then has tasks for executors
  that register while it runs (a burst's first batch), and changes among small sizes (1, 2,
  3, 4, 6 cores with 12 partitions) need no restart;
* **when**: scale up as soon as the current deployment would run above
  ``scale_up_utilization`` at the rate expected within ``lead_time`` or a query lags beyond
  ``lag_fraction`` of the SLO; scale down only when the size for the whole horizon is at least
  ``scale_down_margin`` smaller. The gap between the two keeps rescales rare; the
  normalization after the policy still delays and bounds every scale-down.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from pydantic import Field, model_validator

from autoscaler.core.budget import budget_price
from autoscaler.core.capacity import aligned_parallelism
from autoscaler.core.evaluate import batch_arrival_rate, schedule_lag
from autoscaler.core.forecast import Memo, seasonal_forecast
from autoscaler.core.history import EXECUTORS, ScalingEvent
from autoscaler.core.model import (
    BatchCostModel,
    BatchSample,
    Proposal,
    QueryLoad,
    QueryView,
    Reason,
)
from autoscaler.core.policy import Policy, PolicyInput, PolicyParams
from autoscaler.core.sequences import count_after
from autoscaler.core.settings import Duration
from policies.registry import register
from policies.sizing import utilization, utilization_floor, waiting_rows

STEP_FACTOR = 4.0  # a running batch implying this many times the recent rate is a step up, not a straggler
RETURN_RATE = 0.95  # a size the load outgrew stays too small while the rate is at least this share of it
# the release search looks back at most this far: no record is older (the rate history keeps
# hours), and a longer look-back (a huge rescale price) would overflow the date arithmetic
MAX_LOOKBACK = timedelta(days=365)


class Hindsight:
    """What the remembered load says of a release: what a rescale was worth (executor-seconds,
    :meth:`PredictivePolicy._hindsight`) and, by executor count, how long the load stayed at
    or below it before it needed more (:func:`return_gaps`, found when first asked for)."""

    def __init__(self, price: float, need: np.ndarray | None = None, step: float = 0.0) -> None:
        self.price = price
        self._need, self._step = need, step
        self._gaps: dict[int, np.ndarray] = {}

    def gaps(self, count: int) -> np.ndarray:
        """Seconds of each remembered stretch at or below ``count`` executors that the load ended
        by needing more, sorted (none without a remembered load)."""
        if self._need is None:
            return np.empty(0)
        if count not in self._gaps:
            self._gaps[count] = np.sort(return_gaps(self._need, count)) * self._step
        return self._gaps[count]


@dataclass(frozen=True, slots=True)
class Demand:
    arrival: float  # rows/s arriving now
    backlog: float  # rows/s that drain the waiting rows within the catch-up time
    soon: float  # highest rate expected within the lead time
    peak: float  # highest rate expected within the horizon
    method: str  # how the peak was forecast
    late: bool  # the lag exceeds the SLO
    # the arrival rate is only what a running batch's age implies before its tasks told its rows:
    # at least that, rising every tick the batch runs
    provisional: bool
    lagging: bool  # the lag exceeds lag_fraction of the SLO
    target_lag: timedelta  # the SLO lag the query's schedule can meet (PolicyInput.target_lag_for)


@dataclass(frozen=True, slots=True)
class Sizing:
    name: str
    cores: int  # cores this query should have
    partitions: int | None  # new partitions, or None to keep them
    busy: float  # predicted utilization of the current deployment
    reason: Reason
    message: str
    # a hold of more than the load needs: the cores it needs, and (ski rental) the idle
    # core-seconds that release waits for; told in the proposal's details for the console
    fits: int | None = None
    release_after: float | None = None
    # the most cores the query's partitions can use (more run the same task waves), when no size
    # within the bounds reaches the target and they are fewer than the most allowed: told so an
    # overloaded hold says why it adds nothing
    most_useful: int | None = None
    # a hold's: the cores the query's load needs (its size for the planned rate), which it
    # contributes beside another query's scale-up (its ``cores`` are all the cores there are)
    needs: int | None = None


def plan_partitions(view: QueryView, cores: int, align: bool, floor: int = 1) -> int:
    """Partitions for ``cores``: ``partitions_per_core`` per core within the query's bounds, and at
    least ``floor`` in whole waves (the smallest multiple of the cores from ``floor`` up)."""
    if not align or not view.rescalable:
        return view.params.parallelism
    partitions = aligned_parallelism(cores, view.partitions_per_core, view.min_parallelism, view.max_parallelism)
    if partitions < floor:
        wider = math.ceil(floor / max(1, cores)) * max(1, cores)
        if wider <= view.max_parallelism:
            partitions = wider
    return partitions


def fewest_cores(
    model: BatchCostModel, view: QueryView, rate: float, target: float, max_cores: int, align: bool, floor: int = 1
) -> tuple[int, int] | None:
    """Fewest cores (and their partitions) whose predicted utilization at ``rate`` is <= ``target``."""
    trigger = view.params.trigger_interval
    # nothing below this can do: with aligned partitions every batch runs ``ppc`` waves, so the
    # rows need rate x I / (mu x (u x I - o - ppc x w)) slots (fewer waves only help; the
    # partition floor only adds waves at small sizes, which need more slots, not fewer)
    start = 1
    if trigger and model.per_slot > 0:
        seconds = trigger.total_seconds()
        waves = view.partitions_per_core if align and view.rescalable else 1
        room = target * seconds - model.fixed - waves * model.per_task
        if room > 0:
            start = max(1, math.floor(rate * seconds / (model.per_slot * room)))
    # From ``most`` cores on, the partitions (the query's maximum, or its fixed count) run in one
    # wave and the utilization stops changing. Below, every size from ``cores`` up runs at least
    # min(cores, most) tasks a batch (aligned partitions are never fewer than the cores, up to
    # the maximum), whose per-batch costs bound its utilization from below: once that bound
    # exceeds the target (contention), no more cores can do.
    most = view.max_parallelism if align and view.rescalable else view.params.parallelism
    for cores in range(min(start, max_cores), min(max_cores, max(start, most)) + 1):
        if utilization_floor(model, min(cores, most), trigger, rate) > target:
            return None
        partitions = plan_partitions(view, cores, align, floor)
        if utilization(model, partitions, cores, rate, trigger) <= target:
            return cores, partitions
    return None


@register("predictive", aliases=("default",))
class PredictivePolicy(Policy):
    """Cores for the rate expected within a horizon (seasonal forecast) at a target utilization, partitions aligned."""

    class Params(PolicyParams):
        target_utilization: float = Field(0.93, gt=0, le=1, description="Busy share each query is sized for.")
        scale_up_utilization: float = Field(
            1.0, gt=0, le=2, description="Scale up once the current size would run busier than this."
        )
        scale_down_margin: float = Field(
            0.25, ge=0, lt=1, description="Scale down only when it saves at least this share of the cores."
        )
        catch_up_duration: Duration = Field(timedelta(minutes=5), description="Time allowed to drain a backlog.")
        restart_time: Duration = Field(
            timedelta(seconds=10),
            description="Assumed query restart pause; the largest measured pause is used once known.",
        )
        lag_fraction: float = Field(
            0.75, gt=0, le=1, description="Scale up for backlog once a query lags more than this share of the SLO."
        )
        horizon: Duration = Field(
            timedelta(minutes=30), description="A new size must cover the highest rate expected this far ahead."
        )
        lead_time: Duration = Field(
            timedelta(minutes=2), description="Scale up when the rate expected this far ahead needs it (start-up time)."
        )
        burst_memory: Duration = Field(
            timedelta(0),
            description="A new size also covers the highest 5-minute rate of this recent past (bursts recur); 0 turns it off.",
        )
        forecast: bool = Field(True, description="Use the seasonal forecast when it beats the current rate.")
        rescale_budget: float = Field(
            9.0, gt=0, description="Executor changes per day that price a rescale: it is priced at what the cheapest "
            "clairvoyant schedule within this budget paid per change over the remembered load. The price's aim, not a cap: "
            "on bursty loads the policy makes more (up to 2.7 times on the shared traces; docs/policies.md).",
        )
        hindsight: Duration = Field(
            timedelta(days=7),
            description="The remembered load a rescale is priced on (the rescale budget's hindsight price, over the budget of "
            "the span remembered; at most history.rate_max_age is remembered).",
        )
        budget_window: Duration = Field(
            timedelta(hours=6), description="How far back a scale-down that the load undid makes its size a floor at about that rate."
        )
        rescale_price: Duration = Field(
            timedelta(minutes=1),
            description="A rescale is worth at least this long of the current executors: a scale-down waits until the "
            "capacity it removes has idled that much since the load last needed it (or the rescale budget's hindsight price, when higher).",
        )
        min_dwell: Duration = Field(
            timedelta(minutes=5),
            description="No scale-down within this time after a scale-up (unless the latest scale-up was to drain a backlog).",
        )
        startup_time: Duration = Field(
            timedelta(seconds=45), description="Expected time from an executor request to work on it (sizes the backlog)."
        )
        follow_up_margin: float = Field(
            0.25, ge=0, description="While executors are still coming, scale up again only for this much more."
        )
        align_partitions: bool = Field(
            True, description="Rescale a query's partitions with its cores (one full task wave per batch)."
        )
        min_partitions: int = Field(
            12,
            ge=1,
            description="Give each query at least this many partitions (in whole task waves): executors that arrive "
            "during a batch then take its tasks, and small executor changes need no restart.",
        )
        keep_partitions: bool = Field(
            False,
            description="Keep a query's partitions (no restart from its checkpoint) when they run the new size within the "
            "target on no more cores than aligned partitions plus the restart's pause would need, or, on a scale-down, stand "
            "in whole waves whose extra tasks cost at most the gap between target_utilization and scale_up_utilization.",
        )

        @model_validator(mode="after")
        def _ordered(self) -> "PredictivePolicy.Params":
            if self.scale_up_utilization < self.target_utilization:
                raise ValueError("scale_up_utilization must not be below target_utilization")
            return self

    def __init__(self, params: Params) -> None:
        self.p = params
        # the parameters every tick reads, in seconds
        self._catch_up = params.catch_up_duration.total_seconds()
        self._startup = params.startup_time.total_seconds()
        self._remember_bursts = params.burst_memory > timedelta(0)

    def new_memo(self) -> PredictiveMemo:
        return PredictiveMemo()

    def propose(self, inp: PolicyInput, memo: PredictiveMemo | None = None) -> Proposal:
        memo = memo if memo is not None else PredictiveMemo()
        sizings = [self._size(view, load, inp, memo) for view, load in inp.modelled_queries()]
        if not sizings:
            return Proposal(executors=None, reason=Reason.NO_METRICS, message="no query has evaluated batches yet")
        k = max(1, inp.cores_per_executor)
        current = inp.target_executors
        details = {f"{s.name}.busy": round(s.busy, 3) for s in sizings}
        details |= {f"{s.name}.fits_cores": s.fits for s in sizings if s.fits is not None}
        details |= {f"{s.name}.release_after_core_seconds": round(s.release_after) for s in sizings if s.release_after is not None}
        details |= {f"{s.name}.most_useful_cores": s.most_useful for s in sizings if s.most_useful is not None}
        message = sizings[0].message if len(sizings) == 1 else "; ".join([s.message for s in sizings])
        moving = [s for s in sizings if s.reason != Reason.WITHIN_TARGET]
        up = [s for s in moving if s.reason != Reason.SCALE_DOWN_FOR_LOAD]
        holding = len(moving) < len(sizings)
        if not moving or (holding and not up):
            # a query holds: the pool it was judged on stays (each query is judged on all the
            # executors, so a hold's cores are all there are: summed with another query's
            # release they asked for more executors than there were, as a scale-down)
            return Proposal(current, Reason.WITHIN_TARGET, message, details=details)
        # a holding query beside a scale-up adds what its load needs, not every core there is
        executors = math.ceil(sum(s.cores if s.needs is None else s.needs for s in sizings) / k)
        if up:
            executors = max(executors, current)  # a scale-up never shrinks another query's share
            reason = next(
                (r for r in (Reason.SCALE_UP_FOR_BACKLOG, Reason.SCALE_UP_FOR_LOAD, Reason.SCALE_UP_FOR_FORECAST) if any(s.reason == r for s in up)),
                Reason.SCALE_UP_FOR_LOAD,
            )
        else:
            reason = Reason.SCALE_DOWN_FOR_LOAD
        if executors == current:
            return Proposal(current, Reason.WITHIN_TARGET, message, details=details)
        parallelism = {s.name: s.partitions for s in sizings if s.partitions is not None}
        return Proposal(executors, reason, message, parallelism, details)

    def _restart_seconds(self, inp: PolicyInput, memo: PredictiveMemo) -> float:
        events = inp.history.events
        if memo.pauses is None or memo.pauses[0] is not events:
            memo.pauses = (events, max([self.p.restart_time, *inp.history.restart_pauses()]).total_seconds())
        return memo.pauses[1]

    def _fewest_cores(
        self, model: BatchCostModel, view: QueryView, rate: float, max_cores: int, memo: PredictiveMemo
    ) -> tuple[int, int] | None:
        """:func:`fewest_cores` at this policy's target, remembered while the query's model is the same."""
        kept = memo.sizes.get(view.name)
        if kept is None or kept[0] is not model:
            kept = memo.sizes[view.name] = (model, {})
        found = kept[1]
        key = (rate, max_cores, view.params.trigger_interval, view.partitions_per_core, view.rescalable, view.min_parallelism, view.max_parallelism)
        if key not in found:
            if len(found) >= 1024:
                found.clear()
            found[key] = fewest_cores(model, view, rate, self.p.target_utilization, max_cores, self.p.align_partitions, self.p.min_partitions)
        return found[key]

    def _release(
        self,
        view: QueryView,
        model: BatchCostModel,
        inp: PolicyInput,
        cores: int,
        have: int,
        largest: int,
        price: float,
        memo: PredictiveMemo,
        known: Hindsight | None = None,
    ) -> tuple[int, int] | None:
        """The fewest cores (from ``cores`` up, at most ``largest``) whose idle
        capacity has cost ``price``, or is expected to before the load needs it again, with
        their partitions; None while none has.

        Releasing only what the load has not needed for a while (rather than all the current
        rate does not need) keeps the size the last bursts needed: the next burst then finds it
        instead of costing a scale-up and another scale-down. The load's records (each rate
        higher than all later ones, newest first) split the sizes: the sizes that carry every
        rate newer than record ``j`` but not record ``j`` have idled since ``j``; of those the
        smallest releases the most. ``known`` (the remembered load's gaps) lets capacity go
        before its break-even when holding it on is the dearer bet: the size above a rare large
        burst is released as the burst ends, while the size of frequent bursts is held through
        their gaps (:func:`release_pays`).
        """
        p = self.p
        horizon = inp.now - timedelta(seconds=min(price, MAX_LOOKBACK.total_seconds()))
        max_cores = inp.max_executors * max(1, inp.cores_per_executor)
        carried = 0.0  # the highest rate newer than the record at hand
        idled: tuple[int, float] | None = None  # the sizes from here up have idled this many seconds
        kept = memo.records.setdefault(view.name, LoadRecords())
        for at, rate in itertools.chain(demand_records(inp, view, horizon, kept), [(horizon, math.inf)]):
            size = cores
            if carried > 0:
                sized = self._fewest_cores(model, view, carried, max_cores, memo)
                size = max(cores, sized[0]) if sized is not None else largest + 1
            if idled is not None:
                paid = self._paid(idled, min(size, largest + 1), have, price, inp, known)
                if paid is not None:
                    return paid, plan_partitions(view, paid, p.align_partitions, p.min_partitions)
            if size > largest:
                return None
            idled = (size, (inp.now - at).total_seconds())
            carried = rate
        # the sizes from the oldest record's up: idle since the horizon, or longer
        paid = self._paid(idled, largest + 1, have, price, inp, known) if idled is not None else None
        return None if paid is None else (paid, plan_partitions(view, paid, p.align_partitions, p.min_partitions))

    def _keeps_partitions(self, view: QueryView) -> bool:
        """Whether a size change may keep the query's partitions: asked for, and they are at
        least the floor (fewer are raised to it whatever they carry). Without aligned partitions
        no size change proposes others, so nothing is asked of this."""
        return self.p.keep_partitions and view.params.parallelism >= self.p.min_partitions

    def _extra_waves_fit(self, model: BatchCostModel, kept: int, aligned: int, cores: int, trigger: timedelta | None) -> bool:
        """Whether ``kept`` partitions may stay on the ``cores`` of a scale-down instead of
        ``aligned`` ones: in whole waves their rows take as long (``R / (C x mu)`` either way),
        and the per-task costs of their extra waves take at most the gap between
        ``target_utilization`` and ``scale_up_utilization`` of the trigger, so no rate the
        aligned partitions would carry within the target makes the kept ones scale up. In
        part-filled waves they carry less (64 partitions on 21 cores run like 16: the size
        released for the load would not carry it), and many waves on a few cores pay a task's
        overhead each (94 partitions on 2 cores)."""
        if not trigger or kept % cores:
            return False
        extra = (model.duration(kept, cores, 0.0) - model.duration(aligned, cores, 0.0)) / trigger.total_seconds()
        return extra <= self.p.scale_up_utilization - self.p.target_utilization

    def _largest_release(self, have: int) -> int:
        """The most cores a scale-down from ``have`` may keep: at least ``scale_down_margin``
        fewer, and fewer than there are whatever the margin (0 allows any release)."""
        return min(have - 1, math.floor(have * (1 - self.p.scale_down_margin)))

    @staticmethod
    def _asked_before_backlog(latest: ScalingEvent | None, inp: PolicyInput, have: int) -> int | None:
        """The cores the load had before the latest executor scale-up, when that scale-up drained a
        backlog (:meth:`_scale_up_reason`) and its capacity is still here; else None. The load ran
        on that size until the backlog: a size proven to carry it, where a size the cost model
        finds for the rate is a prediction (trusted for it, releases went a core below what the
        load needed and scaled up again)."""
        if latest is None or latest.reason != Reason.SCALE_UP_FOR_BACKLOG:
            return None
        asked = latest.from_value * max(1, inp.cores_per_executor)
        return asked if asked < have else None

    @staticmethod
    def _paid(
        idled: tuple[int, float], below: int, have: int, price: float, inp: PolicyInput, known: Hindsight | None
    ) -> int | None:
        """The fewest cores from ``idled``'s size up to ``below`` (exclusive) whose release has
        paid for itself: the capacity above them has idled ``idled`` seconds at a cost of at
        least ``price``, or the load's remembered gaps make holding it on dearer
        (:func:`release_pays`)."""
        lowest, seconds = idled
        k = max(1, inp.cores_per_executor)
        for size in range(lowest, below):
            if (have - size) * seconds >= price:
                return size
            if known is not None and release_pays(known.gaps(size // k), seconds, have - size, price):
                return size
        return None

    def _size(self, view: QueryView, load: QueryLoad, inp: PolicyInput, memo: PredictiveMemo) -> Sizing:
        assert load.model is not None
        p, model = self.p, load.model
        trigger, partitions = view.params.trigger_interval, view.params.parallelism
        k = max(1, inp.cores_per_executor)
        have = max(1, inp.target_executors * k)  # cores we have or are heading to
        demand = self._demand(view, load, inp, have, memo)
        cores, new_partitions, capped = self._target_size(view, load, inp, demand, memo)
        busy_now = utilization(model, partitions, max(1, inp.current_cores), demand.arrival, trigger)
        busy_soon = utilization(model, partitions, have, demand.soon + demand.backlog, trigger)
        text = f"{view.name}: {demand.arrival:.0f} rows/s now, {demand.peak:.0f} planned ({demand.method}), busy {busy_now:.2f}"

        if capped and cores <= have:
            text += f"; {cores} core(s) are the most {new_partitions} partitions can use"

        def hold(note: str = "", fits: int | None = None, release_after: float | None = None) -> Sizing:
            message = f"{text}; {note}" if note else text
            return Sizing(view.name, have, None, busy_now, Reason.WITHIN_TARGET, message, fits, release_after, cores if capped else None, cores)

        if model.cold and not demand.late and not load.idle:
            # only cold batches so far (a new run, executors just started): they are slow for
            # reasons other than the load; wait for a warm one unless the SLO is at risk (an
            # idle query needs no capacity whatever its batches cost)
            return hold(f"{cores} core(s) once a warm batch confirms it")
        if (demand.lagging or busy_soon > p.scale_up_utilization) and cores > have:
            if demand.provisional and not demand.lagging:
                # sized on a floor that rises every tick, a scale-up would add a little each tick
                # (1 -> 2 -> 3 -> 32 cores on a burst after quiet): the batch's first finished task
                # tells its rows (within a task's time); the lag nearing the SLO does not wait
                return hold(f"at least {cores} core(s) once the running batch's rows are known")
            last_change = inp.history.last_change_at(EXECUTORS)
            settling = inp.resizing or (last_change is not None and inp.now - last_change < p.catch_up_duration)
            if settling and cores <= have * (1 + p.follow_up_margin) and not busy_soon > 1.0:
                # executors are still coming or the backlog still draining: a small correction
                # waits for them (unless even the rate alone no longer fits)
                return hold(f"{cores} core(s) once settled")
            reason = self._scale_up_reason(model, view, have, demand, busy_soon)
            return Sizing(view.name, cores, _changed(new_partitions, partitions), busy_now, reason, f"{text} -> {cores} core(s)")
        # The margin keeps a size the load asked for from flapping by a core or two. Capacity the
        # latest scale-up added to drain a backlog was not asked for by the load and is needed only
        # until the backlog is gone: it goes back to the size before it without the margin (the
        # ski rental deciding when, in one change), and below that size the margin counts from
        # it. With the margin from the larger size, backlog capacity under a quarter of it stayed
        # for good (a steady load whose straggler made a backlog went 35 -> 41 executors and held
        # 41 for the rest of the run)
        latest_up = _latest_scale_up(inp)
        largest = self._largest_release(have)
        asked = self._asked_before_backlog(latest_up, inp, have)
        if asked is not None and cores < have and asked > largest:
            if cores > self._largest_release(asked):
                cores = asked  # within the margin of the size before: back to it
            largest = asked
        if demand.lagging or cores > largest:
            return hold()
        last_up = _dwell_start(latest_up)
        if last_up is not None and inp.now - last_up < p.min_dwell:
            return hold(f"{cores} core(s) after the dwell", fits=cores)
        # ski rental: keep capacity until what it has cost since the load last needed it
        # reaches the price of a rescale, then release what has paid for it. A rescale is worth
        # ``rescale_price`` of the current cores, or, when higher, what releasing costs in the
        # rescale budget: the scale-down and the scale-up that undoes it when the load comes
        # back, each at what the cheapest clairvoyant schedule within the budget paid per change
        # over the remembered load (on a load whose bursts come more often than the budget
        # allows, holding their size through the gaps is the cheaper way to stay within it)
        known = self._hindsight(view, model, inp, memo)
        hindsight = 2 * known.price * k
        price = max(p.rescale_price.total_seconds() * have, hindsight)
        release = self._release(view, model, inp, cores, have, largest, price, memo, known)
        if release is not None:
            floor = smallest_proven_size(inp, view, demand.arrival, p.budget_window, p.horizon) * k
            if release[0] < floor <= have:
                # a smaller size failed at about this rate: release only down to the floor
                release = self._release(view, model, inp, floor, have, largest, price, memo, known)
        if release is None:
            note = f"{cores} core(s) once idle cores cost a rescale ({price / 60:.0f} core-min, hindsight {hindsight / 60:.0f})"
            return hold(note, fits=cores, release_after=price)
        size, size_partitions = release
        if size_partitions != partitions and self._keeps_partitions(view) and self._extra_waves_fit(model, partitions, size_partitions, size, trigger):
            size_partitions = partitions
        return Sizing(view.name, size, _changed(size_partitions, partitions), busy_now, Reason.SCALE_DOWN_FOR_LOAD, f"{text} -> {size} core(s)")

    def _hindsight(self, view: QueryView, model: BatchCostModel, inp: PolicyInput, memo: PredictiveMemo) -> Hindsight:
        """The remembered load's verdict on a release (:class:`Hindsight`): its price is the
        executor-seconds a rescale was worth over the remembered ``hindsight``, the price at
        which the cheapest clairvoyant schedule for the remembered rates (each sized as this
        policy sizes it, :func:`~autoscaler.core.budget.budget_price`) stays within the rescale
        budget; 0 when following the load stays within it. Kept for the rate step, and the
        programme rerun only when the sizes it reads have changed.

        The price replaces one that grew with the square of the changes over the budget: that
        held a burst's whole size through hours of quiet once a bursty stretch had used the
        budget, whatever holding it cost; this one holds a size only as long as hindsight says
        a change is worth."""
        bucket = math.floor(inp.now.timestamp() / inp.rate_step.total_seconds())
        rates = inp.history.rates
        # the inputs by value: the rate step, the newest remembered rate (points are appended in
        # time order), the cost model that sizes them, and the bounds the sizes stay within
        key = (bucket, rates[-1] if rates else None, model, inp.max_executors, inp.cores_per_executor)
        kept = memo.hindsight.get(view.name)
        if kept is not None and kept[0] == key:
            return kept[2]
        p = self.p
        series = inp.history.rate_series(view.name, since=inp.now - p.hindsight)
        found = Hindsight(0.0)
        programme = None
        if len(series) >= 2:
            k = max(1, inp.cores_per_executor)
            max_cores = inp.max_executors * k
            need = []
            for _, rate in series:
                sized = self._fewest_cores(model, view, rate, max_cores, memo)
                need.append(math.ceil((sized[0] if sized is not None else max_cores) / k))
            step = inp.rate_step.total_seconds()
            # the budget of the remembered span (at least a day, at most the hindsight): over a
            # week the quiet days lend their changes to the spiky ones, as the bound's budget
            # does over a whole trace; a young history is held to a day's budget (the whole
            # window's would price nothing until a week's worth of changes was remembered)
            span = max(86400.0, (series[-1][0] - series[0][0]).total_seconds() + step)
            budget = p.rescale_budget * min(span, p.hindsight.total_seconds()) / 86400.0
            # what the programme reads, by value: a refitted cost model rarely changes a size in
            # whole executors, and then the programme's answer is the one already found
            programme = (step, budget, np.asarray(need, np.int32).tobytes())
            if kept is not None and kept[1] == programme:
                found = kept[2]
            else:
                counts = np.asarray(need, np.int64)
                price = budget_price(np.full(len(need), step), counts.astype(float), budget)
                found = Hindsight(price, counts, step)
        memo.hindsight[view.name] = (key, programme, found)
        return found

    def _demand(self, view: QueryView, load: QueryLoad, inp: PolicyInput, have: int, memo: PredictiveMemo) -> Demand:
        """The rates to provision for: now, within ``lead_time``, within ``horizon``, and the backlog's."""
        assert load.model is not None
        p, trigger = self.p, view.params.trigger_interval
        # the rate of completed batches; a batch running long counts once it implies a step
        # too large for a straggler (a GC pause, a slow task) or the query lags
        arrival = load.recent_rate if load.recent_rate is not None else (load.input_rate or 0.0)
        last = view.samples[-1] if view.samples else None
        if last is not None and last.input_rate and not last.cold and not view.quiet:
            # the latest batch shows a step at once (not the first batches of a run: they
            # hold the rows that arrived during the restart pause; nor one before a quiet
            # stretch): the rows that arrived for it, not those of the backlog it drained
            previous = view.samples[-2] if len(view.samples) >= 2 else None
            arrival = max(arrival, batch_arrival_rate(previous, last))
        normal_lag = schedule_lag(trigger)
        target_lag = max(inp.target_lag, normal_lag)  # inp.target_lag_for(view)
        late = load.lag is not None and load.lag > target_lag
        # a running batch's figure counts at once after a quiet stretch (nothing else tells the
        # burst), else when the query lags or it implies a step
        live, provisional = load.live_rate, False
        if live is not None and (view.quiet or late or live >= STEP_FACTOR * arrival):
            provisional = load.live_rate_lower_bound and live >= arrival
            arrival = max(arrival, live)
        catch_up = self._catch_up
        # rows waiting once executors asked for now could be working: the backlog now plus what
        # the size we have or are heading to falls behind by until then
        seconds = trigger.total_seconds() if trigger else 0.0
        capacity = load.model.rows_in(view.params.parallelism, have, seconds) / seconds if seconds else arrival
        waiting = waiting_rows(load, trigger, arrival) + max(0.0, arrival - capacity) * self._startup
        soon = peak = arrival
        method = "persistence"
        if p.forecast:
            soon, peak, method = self._forecast(inp, view.name, arrival, memo)
        if self._remember_bursts:
            # bursts that came and went recently are likely to come again: size for them too
            steps = inp.history.rate_series(view.name, since=inp.now - p.burst_memory)
            remembered = max((r for _, r in steps), default=0.0)
            if remembered > peak:
                peak, method = remembered, "recent peak"
        return Demand(
            arrival=arrival,
            backlog=waiting / catch_up if catch_up > 0 else 0.0,
            soon=soon,
            peak=peak,
            method=method,
            late=late,
            provisional=provisional,
            # lagging: beyond a share of the SLO, and beyond what the schedule alone explains
            lagging=load.lag is not None and load.lag > max(target_lag * p.lag_fraction, normal_lag),
            target_lag=target_lag,
        )

    def _forecast(self, inp: PolicyInput, subject: str, arrival: float, memo: PredictiveMemo) -> tuple[float, float, str]:
        """(highest rate expected within the lead time, within the horizon, how the latter was
        forecast), never below ``arrival``. The seasonal peaks change once a rate step: they are
        kept for the step (the forecast memo would be asked twice every tick)."""
        bucket = math.floor(inp.now.timestamp() / inp.rate_step.total_seconds())
        rates = inp.history.rates
        kept = memo.peaks.get(subject)
        if kept is None or kept[0] is not rates or kept[1] != bucket:
            p = self.p
            lead = seasonal_forecast(inp.history, subject, inp.now, step=inp.rate_step, horizon=p.lead_time, memo=memo.forecasts)
            far = seasonal_forecast(inp.history, subject, inp.now, step=inp.rate_step, horizon=p.horizon, memo=memo.forecasts)
            kept = memo.peaks[subject] = (rates, bucket, lead[0], far[0], far[1])
        _, _, soon, peak, method = kept
        return (arrival if soon is None else max(arrival, soon)), (arrival if peak is None else max(arrival, peak)), method

    def _target_size(
        self, view: QueryView, load: QueryLoad, inp: PolicyInput, demand: Demand, memo: PredictiveMemo
    ) -> tuple[int, int, bool]:
        """(cores, partitions) for the whole horizon's peak and the backlog, and whether the
        partitions cap them below the most allowed (no size reaches the target, and more cores
        would run the same task waves); a partition change also pays for the rows of its
        restart pause."""
        assert load.model is not None
        p, model, trigger = self.p, load.model, view.params.trigger_interval
        max_cores = inp.max_executors * max(1, inp.cores_per_executor)
        catch_up = self._catch_up
        plan_rate = demand.peak + demand.backlog
        sized = self._fewest_cores(model, view, plan_rate, max_cores, memo)
        if sized is not None and sized[1] != view.params.parallelism:
            no_restart_rate = plan_rate
            # a restart pauses the query: the rows of the pause must be caught up, unless the lag
            # the SLO leaves absorbs them (Flink's restart term, needed only beyond that slack)
            pause = self._restart_seconds(inp, memo)
            slack = (demand.target_lag - (load.lag or timedelta(0))).total_seconds() - (trigger.total_seconds() if trigger else 0.0)
            if pause > slack and catch_up > 0:
                plan_rate += demand.arrival * pause / catch_up
                sized = self._fewest_cores(model, view, plan_rate, max_cores, memo)
            if sized is not None and self._keeps_partitions(view):
                # the current partitions, if no more cores carry the rate with them than the
                # restart needs: the same cost (or less) without a pause of the stream
                kept = fewest_cores(model, view, no_restart_rate, p.target_utilization, sized[0], align=False)
                if kept is not None:
                    return (*kept, False)
        if sized is None:
            # nothing within the bounds reaches the target: the fewest cores that give the
            # fewest task waves the bounds allow (more cores than that would not help); below
            # the most allowed, the partitions are what caps them
            most = plan_partitions(view, max_cores, p.align_partitions, p.min_partitions)
            useful = math.ceil(most / math.ceil(most / max_cores))
            return useful, most, useful < max_cores
        return (*sized, False)

    def _scale_up_reason(self, model: BatchCostModel, view: QueryView, have: int, demand: Demand, busy_soon: float) -> Reason:
        """Why a scale-up: the lag, or the waiting rows alone (the rate expected within the lead
        time fits what there is within the target: a straggler's backlog, whose capacity goes back
        without the margin; a rate that has outgrown the target is the load's), or only the
        forecast, else the load."""
        if demand.lagging:
            return Reason.SCALE_UP_FOR_BACKLOG
        trigger = view.params.trigger_interval
        if utilization(model, view.params.parallelism, have, demand.soon, trigger) <= self.p.target_utilization:
            return Reason.SCALE_UP_FOR_BACKLOG
        busy_now = utilization(model, view.params.parallelism, have, demand.arrival + demand.backlog, trigger)
        if busy_soon > self.p.scale_up_utilization >= busy_now:
            return Reason.SCALE_UP_FOR_FORECAST  # only the forecast asks for it
        return Reason.SCALE_UP_FOR_LOAD


class PredictiveMemo:
    """What the default policy keeps from tick to tick to save work, never to decide: each entry is
    checked against the input it was computed from (by identity) and computed again otherwise,
    so a fresh memo gives the same proposals (tests/unit/test_policy_memo.py).

    Kept because ``simulate`` runs the policy every 10 simulated seconds for weeks: without it
    the seasonal forecast reads a week of rates, and the release search all buffered batches,
    on every tick (docs/architecture.md, "What is kept between ticks").
    """

    def __init__(self) -> None:
        self.forecasts = Memo()  # seasonal forecasts, their series and skill terms; see seasonal_forecast
        # sizes found per query while its cost model is the same object: the release search asks
        # for the same load records tick after tick (see PredictivePolicy._fewest_cores)
        self.sizes: dict[str, tuple[BatchCostModel, dict[tuple[object, ...], tuple[int, int] | None]]] = {}
        self.pauses: tuple[tuple[ScalingEvent, ...], float] | None = None  # (events, restart seconds)
        self.records: dict[str, LoadRecords] = {}  # each query's batch records
        # each query's seasonal peaks of the current rate step: (rates, step, lead time's, horizon's, method)
        self.peaks: dict[str, tuple[object, int, float | None, float | None, str]] = {}
        # each query's hindsight price and return times, the inputs they were computed from and
        # the programme they made (PredictivePolicy._hindsight)
        self.hindsight: dict[str, tuple[tuple[object, ...], tuple[float, float, bytes] | None, Hindsight]] = {}


class LoadRecords:
    """One query's batch records (each rate higher than all later ones), kept between ticks.

    A monotonic stack: oldest first, rates falling. A new batch removes the records its rate
    reaches, a batch leaving the buffer takes its record along, so a tick costs about one push
    instead of a scan of the whole buffer (the release search runs on every tick).
    """

    def __init__(self) -> None:
        self._stack: list[tuple[float, BatchSample]] = []
        self._newest: BatchSample | None = None

    def update(self, samples: Sequence[BatchSample]) -> list[tuple[float, BatchSample]]:
        """The records of ``samples`` (in time order), as (rate, batch), oldest first."""
        start = self._continues(samples)
        if start is None:
            self._stack, start = [], 0
        stack = self._stack
        # a batch's rate is the rows that arrived for it, told by the batch before it: the
        # oldest buffered batch has no record (the records are the same whatever the memo saw)
        for i in range(max(start, 1), len(samples)):
            sample = samples[i]
            rate = batch_arrival_rate(samples[i - 1], sample)
            while stack and stack[-1][0] <= rate:
                stack.pop()
            stack.append((rate, sample))
        if len(samples) < 2:
            stack.clear()
        else:
            oldest = samples[1].started_at
            gone = 0
            while gone < len(stack) and stack[gone][1].started_at < oldest:
                gone += 1
            del stack[:gone]
        self._newest = samples[-1] if samples else None
        return stack

    def _continues(self, samples: Sequence[BatchSample]) -> int | None:
        """Where the batches new since the last update start, or None when ``samples`` does not
        continue the last buffer (start again)."""
        after = None if self._newest is None else count_after(samples, self._newest, within=64)
        return None if after is None else len(samples) - after


def demand_records(
    inp: PolicyInput, view: QueryView, horizon: datetime, kept: LoadRecords | None = None
) -> Iterator[tuple[datetime, float]]:
    """(when, rate) of each arrival rate higher than every later one, newest first, back to ``horizon``.

    The load last needed more than a rate at the first record above it. The batches tell the
    last minutes, the remembered step rates the hours before. Lazy: a caller that has found
    what it looks for stops the scan. ``kept`` carries the batch records from call to call.
    """
    samples = view.samples
    top = 0.0
    for rate, sample in reversed((kept or LoadRecords()).update(samples)):
        if sample.started_at < horizon:
            break
        if rate > 0:
            top = rate
            yield sample.started_at, rate
    if samples and samples[0].started_at < horizon:
        return  # the batches reach back past the horizon
    oldest = samples[0].started_at if samples else inp.now
    # the steps before the oldest batch (the step that holds it is told by the batches)
    steps = inp.history.rate_series(view.name, since=horizon, until=oldest - inp.rate_step)[::-1]
    for i in _rises([r for _, r in steps], top):
        yield steps[i][0] + inp.rate_step, steps[i][1]


def return_gaps(need: np.ndarray, count: int) -> np.ndarray:
    """The lengths (in steps) of the stretches in which ``need`` stayed at or below ``count`` and
    that ended with a step above it: the gaps the load left a size above ``count`` idle before
    it needed it again. The stretch before the first such step counts (the load was at most
    ``count`` at least that long); the stretch still running at the end does not (it has not ended).
    """
    above = np.concatenate(([True], need > count))
    changes = np.diff(above.astype(np.int8))
    falls = np.flatnonzero(changes == -1)  # a stretch at or below the count starts at this step
    rises = np.flatnonzero(changes == 1)  # ... and ends here
    return rises - falls[: len(rises)]


def release_pays(gaps: np.ndarray, idle: float, spare: int, price: float) -> bool:
    """Whether releasing ``spare`` cores, idle ``idle`` seconds, now is the cheapest time to
    release them, given the load's past ``gaps`` (sorted seconds it stayed below their size
    before it needed them again).

    Ski rental with the gaps as the odds. Of the gaps, only those longer than the idle time so
    far can be the one running: with none, the past says nothing of this gap, and the capacity
    goes at the break-even (``spare x idle >= price``), as the classic rule has it. Otherwise
    releasing at a later time ``t`` costs, averaged over the gaps that can be running: the idle
    cores until the gap ends or until ``t``, and the rescale price (the release and the
    scale-up that undoes it) for each gap longer than ``t``. Releasing now costs the price.
    Now is the time when no later time up to the break-even is cheaper: the capacity above a
    rare large burst goes as the burst ends, the size of frequent bursts is held through their
    gaps, and a gap longer than the frequent ones is cut short once it has outlasted them.
    """
    if spare * idle >= price:
        return True
    running = gaps[np.searchsorted(gaps, idle, side="right") :] - idle
    if len(running) == 0:
        return False
    until = price / spare - idle  # seconds to the break-even
    ends = running[running <= until]
    n, i = len(running), np.arange(len(ends))
    # waiting until the i-th shortest gap ends: the gaps up to it cost their idle time, the
    # longer ones the idle time to then and the price
    at_ends = (np.cumsum(spare * ends) + (n - i - 1) * (spare * ends + price)) / n
    at_break_even = (spare * ends.sum() + (n - len(ends)) * (spare * until + price)) / n
    return price <= min(at_break_even, float(at_ends.min(initial=math.inf)))


def _rises(values: list[float], floor: float) -> Iterator[int]:
    """Indices of the values higher than ``floor`` and every value before them.

    The running maximum is built in C and its rises found by bisection.
    """
    tops = list(itertools.accumulate(values, max))
    i = bisect.bisect_right(tops, floor)
    while i < len(tops):
        yield i
        i = bisect.bisect_right(tops, tops[i], lo=i)


def smallest_proven_size(inp: PolicyInput, view: QueryView, arrival: float, window: timedelta, held: timedelta) -> int:
    """The fewest executors a failed scale-down left proven at about today's rate (0: no limit).

    A scale-up for load (or backlog) that undoes a scale-down proves the smaller size too small
    for the rate of that moment, whatever the cost model predicted (it extrapolates, and at a
    constant load it cannot tell per-row from per-task cost); the size before the scale-down is
    the one proven to work (the scale-up's own size where that is smaller: what a scale-up adds
    above it to catch up a backlog proves nothing, and goes back once the backlog is gone).
    While the rate is at least ``RETURN_RATE`` of the rate then, a scale-down stays at or above
    that size: without it sizes flipped back and forth on a constant load. (A scale-up alone
    proves little: on a new run the first batches are slow for reasons other than the load.)
    """
    floor = 0
    since = inp.now - window
    series: list[tuple[datetime, float]] | None = None
    previous: ScalingEvent | None = None
    for e in inp.history.events_since(EXECUTORS, since, previous=True):
        if previous is not None and e.at >= since and _undoes(e, previous, held):
            if series is None:
                series = inp.history.rate_series(view.name, since=since - inp.rate_step)
            then = rate_around(view, series, e.at, inp.rate_step)
            if then is not None and arrival >= RETURN_RATE * then:
                floor = max(floor, min(e.to_value, previous.from_value))
        previous = e
    return floor


def _undoes(up: ScalingEvent, down: ScalingEvent, held: timedelta) -> bool:
    """Whether scale-up ``up`` undid scale-down ``down``, the executor change before it.

    A backlog that built up once the smaller size had carried the load for longer than ``held``
    proves nothing of it: a straggler or a GC pause made it, not the size (on a steady load
    each such scale-up held the larger size for the whole window).
    """
    return (
        up.to_value > up.from_value
        and up.reason in (Reason.SCALE_UP_FOR_LOAD, Reason.SCALE_UP_FOR_BACKLOG)
        and down.to_value == up.from_value < down.from_value
        and not (up.reason == Reason.SCALE_UP_FOR_BACKLOG and up.at - down.at > held)
    )


def rate_around(view: QueryView, series: list[tuple[datetime, float]], at: datetime, step: timedelta) -> float | None:
    """The highest arrival rate around a scale-up at ``at``: of the batches that started from a
    minute before to two after (they show the load the scale-up answered; the batch running at
    ``at`` alone may predate a burst), else of the remembered steps then, else None."""
    lo, hi = at - timedelta(minutes=1), at + timedelta(minutes=2)
    oldest = view.samples[0].started_at if view.samples else None
    if oldest is not None and oldest <= lo:
        samples = view.samples
        previous = [None, *samples[:-1]]
        rates = [batch_arrival_rate(b, s) for b, s in zip(previous, samples, strict=True) if lo <= s.started_at <= hi and s.input_rate]
        return max(rates) if any(rates) else None
    steps = [r for start, r in series if start <= hi and at < start + step]
    return max(steps) if steps else None


def _latest_scale_up(inp: PolicyInput) -> ScalingEvent | None:
    """The latest executor scale-up in the history, or None."""
    for e in reversed(inp.history.events):
        if e.subject == EXECUTORS and e.to_value > e.from_value:
            return e
    return None


def _dwell_start(latest: ScalingEvent | None) -> datetime | None:
    """When the latest executor scale-up (:func:`_latest_scale_up`) happened, or None when there
    was none or it was to drain a backlog.

    The dwell keeps a size the load asked for against a quick scale-down (a load that rose
    often bounces). Capacity added to drain a backlog is needed only until the backlog is
    gone: the ski rental alone releases it, keeping what the recent batches' rates need. (A
    scale-up cut by a normalization limit is recorded with the limit as its reason: it starts
    the dwell.)
    """
    return None if latest is None or latest.reason == Reason.SCALE_UP_FOR_BACKLOG else latest.at


def _changed(new: int, old: int) -> int | None:
    return new if new != old else None
