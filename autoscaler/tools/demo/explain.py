"""What the daemon did in a tick and why, in plain words with the numbers behind them.

The demo's live view prints :func:`explain_tick` for every tick and its summary the same text
for each rescale, so a person reads each fact once: ``adding executors 1 -> 2: taxi gets 456
rows/s, the cost model puts a batch at 103% of its 2 s trigger on 1 core``. A figure the
policy predicts is said to be one; rates that are a long-running batch's predecessor's say so. The machine-readable reasons
(``ScaleUpForLoad``) stay in the audit trail, the logs and the metrics.
"""

from __future__ import annotations

from datetime import timedelta

from autoscaler.core.model import BatchSample, QueryChange, QueryLoad, QueryRefusal, QueryView, Reason, TickRecord
from autoscaler.runtime.views import describe_params_change

# why a query is restarted from its checkpoint with new settings
CHANGE_WHY = {
    Reason.PARTITIONS_BELOW_CORES: "fewer partitions than cores left cores idle",
    Reason.UNEVEN_WAVES: "partitions now fill every task wave",
    Reason.POLICY_PARALLELISM: "sized for the load",
    Reason.RATE_LIMIT_OUTGROWN: "its batches were held at a rate limit the executors had outgrown",
    Reason.OPERATOR_REQUEST: "an operator asked for it",
}
ALIGN = (Reason.PARTITIONS_BELOW_CORES, Reason.UNEVEN_WAVES)  # partitions follow the cores
# a query whose last batch ended this long ago (or two triggers, if longer) while one runs: its
# rates are that batch's, said so
STALE_AFTER = timedelta(seconds=10)
# the reasons that come from the load itself (the policy's): their numbers are the load's
LOAD_REASONS = {
    Reason.SCALE_UP_FOR_LOAD,
    Reason.SCALE_UP_FOR_BACKLOG,
    Reason.SCALE_UP_FOR_FORECAST,
    Reason.SCALE_DOWN_FOR_LOAD,
    Reason.WITHIN_TARGET,
    Reason.MAX_STEP_UP,
    Reason.MAX_STEP_DOWN,
    Reason.BOUNDED_MAX,
    Reason.BOUNDED_MIN,
}


def explain_tick(r: TickRecord) -> str:
    """One line: what changed or was held, and why."""
    parts = []
    if r.executors_lost:
        parts.append(f"lost executor(s) {', '.join(r.executors_lost)}")
    parts += [explain_change(r, c) for c in r.plan.query_changes]
    parts += [explain_refusal(r, ref) for ref in r.plan.refusals]
    if not r.plan.query_changes:
        parts.append(explain_executors(r))
    return "; ".join(parts)


def explain_rescale(r: TickRecord, subject: str) -> str:
    """Why the tick ``r`` rescaled ``subject`` (the executors, or a query): the words of the live
    view without what the summary line already says (the numbers of the change)."""
    change = next((c for c in r.plan.query_changes if c.name == subject), None)
    if change is not None:
        return "restarted from its checkpoint" + (f" on {_cores(r.executors_cores)}" if change.reason in ALIGN else "") + (
            f": {CHANGE_WHY.get(change.reason, change.message or change.reason.value)}"
        )
    return _why(r)


def explain_executors(r: TickRecord) -> str:
    d = r.decision
    if d.reason == Reason.NO_METRICS:
        restarting = [q.name for q in r.queries if q.status.value in ("rescaling", "restarting", "starting")]
        return f"waiting for the first batches of {', '.join(restarting)}" if restarting else "waiting for the first batches"
    wanted = d.target if d.target is not None and d.target != d.current else d.proposed
    if wanted is not None and wanted != d.current and not r.mode.requesting:
        return _not_requesting(r, wanted)
    if d.changes and d.target is not None:
        verb = "adding executors" if d.target > d.current else "releasing executors"
        return f"{verb} {d.current} -> {d.target}: {_why(r)}"
    if wanted is not None and wanted != d.current:
        return f"keeping {_executors(d.current)} ({wanted} wanted): {d.message or d.reason.value}"
    text = f"{_holding(r)}: {_why(r)}"
    if r.mode.requesting:  # reactive mode keeps nothing: the cluster decides what there is
        text += "".join(_kept_for(r, load) for load in r.loads if load.known)
    if d.current == r.max_executors and _overloaded(r):
        text += f"; {d.current} is the most allowed (executors.max)"
    elif _overloaded(r):
        text += "".join(_most_useful(r, load) for load in r.loads if load.known)
    return text


def _most_useful(r: TickRecord, load: QueryLoad) -> str:
    """Why an overloaded query gets no more executors below the most allowed: its partitions
    would run the same task waves on more (a step-load run held 4 of 6 at a busy share of 1.04
    and the console said only that)."""
    most = r.proposal.details.get(f"{load.name}.most_useful_cores")
    view = next((q for q in r.queries if q.name == load.name), None)
    if most is None or view is None or r.executors_cores < most:
        return ""
    partitions = view.params.parallelism
    return f"; {_cores(int(most))} are the most {load.name}'s {partitions} partitions can use (more would run the same task waves)"


def _core_time(core_seconds: float) -> str:
    """Core-minutes, or core-seconds under two minutes: the demo's compressed price (a rescale
    worth 3 s of the cores) printed as "0 core-min"."""
    if core_seconds < 120:
        return f"{core_seconds:.0f} core-s"
    return f"{core_seconds / 60:.0f} core-min"


def _kept_for(r: TickRecord, load: QueryLoad) -> str:
    """Why capacity the load does not need stays (a demo held 6 executors through a trough of
    257-489 rows/s and said nothing of it): the policy's own figures, when it gives them."""
    fits = r.proposal.details.get(f"{load.name}.fits_cores")
    if fits is None or fits >= r.executors_cores:
        return ""
    price = r.proposal.details.get(f"{load.name}.release_after_core_seconds")
    until = (
        f"until their idle time has cost what a rescale is worth ({_core_time(price)})"
        if price is not None
        else "a while after a scale-up (min_dwell)"
    )
    return f"; {_cores(int(fits))} would carry {load.name}'s load, the rest are kept {until}"


def _holding(r: TickRecord) -> str:
    """Nothing changes this tick: what the daemon holds, or waits for."""
    n = r.decision.current
    if r.mode.requesting and r.executors_pending:
        return f"waiting for {r.executors_pending} more executor(s) to start ({r.executors_alive} of {n} there)"
    # the default policy sizes on warm batches only: while a query's cost model has nothing else
    # (the first batches of a run, executors just started) it waits for one unless already late.
    # The model, not the view's ``warming``: the third batch of a run is warm by count, but until
    # it ends the model still has only the two cold ones (a demo once held through such a batch
    # running 20 s, its console saying "keeping 1 executor" and no why)
    waiting = _overloaded(r) and any(load.model is not None and load.model.cold for load in r.loads)
    if r.mode.requesting:
        return f"keeping {_executors(n)}" + (" until a warm batch confirms the load" if waiting else "")
    if waiting:
        return f"{_executors(n)}; sizing waits for a warm batch"
    return f"{_executors(n)} {'suffices' if n == 1 else 'suffice'}"  # reactive mode keeps nothing: the cluster decides


def _not_requesting(r: TickRecord, wanted: int) -> str:
    """Reactive mode (or active mode whose request the cluster manager has not granted): the
    daemon asks for nothing and fits the queries to the cores there are."""
    per = _cores_per_executor(r)
    have, want = r.executors_cores, wanted * per
    reactive = r.mode.mode.value == "reactive"
    how = "reactive mode adapts partitions" if reactive else "not granted yet, so partitions adapt meanwhile"
    if have == 0:  # no core to fit the partitions to: the queries wait (their rows stay in the source)
        how = "reactive mode waits for the cluster to give one" if reactive else "not granted yet, so it waits for the cluster to give one"
    elif want < have:
        how = "reactive mode keeps what the cluster gives"
    return f"wants {want} core(s), has {have}; {how} ({_why(r)})"


def explain_change(r: TickRecord, c: QueryChange) -> str:
    why = CHANGE_WHY.get(c.reason, c.message or c.reason.value)
    cores = f" on {_cores(r.executors_cores)}" if c.reason in ALIGN else ""
    return f"restarting {c.name} from its checkpoint with {describe_params_change(c.from_params, c.to_params)}{cores}: {why}"


def explain_refusal(r: TickRecord, ref: QueryRefusal) -> str:
    return f"not restarting {ref.name} yet: {ref.message or ref.reason.value}"


def _why(r: TickRecord) -> str:
    """The load behind a decision (each query's rate, how much of its trigger a batch fills, its
    backlog) and the bound it met; a hold's own reason (``scale-down to 4 waits 8s more``)."""
    d = r.decision
    if d.reason not in LOAD_REASONS and d.message:
        return d.message
    behind = Reason.SCALE_UP_FOR_BACKLOG in (d.reason, r.proposal.reason)  # then the lag is the reason
    text = "; ".join(_load_text(r, load, behind) for load in r.loads if load.known) or r.proposal.message or d.reason.value
    met = {d.reason, *d.limits}
    if Reason.BOUNDED_MAX in met:
        text += f"; at most {r.max_executors} allowed (executors.max)"
    if Reason.BOUNDED_MIN in met:
        text += f"; at least {r.min_executors} kept (executors.min)"
    return text


def _load_text(r: TickRecord, load: QueryLoad, lag: bool = False) -> str:
    assert load.input_rate is not None
    view = next((q for q in r.queries if q.name == load.name), None)
    trigger = view.params.trigger_interval if view is not None else None
    last = view.samples[-1] if view is not None and view.samples else None
    text = _rate_text(r, load, view, last, trigger)
    if lag and load.lag is not None:
        text += f", {load.lag.total_seconds():.0f} s behind"
    busy = _busy(r, load)
    if busy is not None and not load.idle:
        text += f", {_busy_text(r, load, busy, trigger)}"
    if last is not None and trigger and last.duration > trigger and not load.idle:
        text += f", the last took {last.duration.total_seconds():.1f} s"
    if load.backlog_rows and load.backlog_rows >= max(1.0, load.input_rate):  # a second of input or more
        text += f", {load.backlog_rows:.0f} rows waiting"
    return text


def _rate_text(r: TickRecord, load: QueryLoad, view: QueryView | None, last: BatchSample | None, trigger: timedelta | None) -> str:
    """The query's input rate, and how old it is: the rates come from batches that ended, so
    while one runs long (a backlog, lost executors) they are the last batch's, not the load now."""
    assert load.input_rate is not None
    if load.idle:
        return f"{load.name} is idle (Spark found no new rows)"
    stale_after = max(STALE_AFTER, 2 * trigger) if trigger else STALE_AFTER
    if view is None or not view.batch_running or last is None or r.at - last.ended_at < stale_after:
        return f"{load.name} gets {load.input_rate:.0f} rows/s"
    tasks = f", {view.batch_tasks[0]}/{view.batch_tasks[1]} tasks done" if view.batch_tasks else ""
    return (
        f"{load.name} got {load.input_rate:.0f} rows/s by its last batch; none has ended for "
        f"{(r.at - last.ended_at).total_seconds():.0f} s (one running{tasks})"
    )


def _busy_text(r: TickRecord, load: QueryLoad, busy: float, trigger: timedelta | None) -> str:
    """How much of its trigger a batch takes: the policy's cost model at the query's rate (a
    prediction, said as such: on cold batches it was 52-62 % while batches took 13-30 s), else
    the share of the time the query's batches ran."""
    on = _cores(r.executors_cores)
    if f"{load.name}.busy" in r.proposal.details:
        of = f"its {trigger.total_seconds():g} s trigger" if trigger else "the time"
        return f"the cost model puts a batch at {busy:.0%} of {of} on {on}"
    return f"its batches ran {busy:.0%} of the time on {on}"


def _overloaded(r: TickRecord) -> bool:
    """A batch takes longer than its trigger: the query falls behind at this size."""
    return any((_busy(r, load) or 0) > 1 for load in r.loads if load.known)


def _busy(r: TickRecord, load: QueryLoad) -> float | None:
    """How much of its trigger interval a batch takes: the policy's figure for this tick (its cost
    model at the query's rate), else the measured share."""
    return r.proposal.details.get(f"{load.name}.busy", load.busy_fraction)


def _cores_per_executor(r: TickRecord) -> int:
    return max(1, r.executors_cores // r.executors_alive) if r.executors_alive else 1


def _executors(n: int) -> str:
    return f"{n} executor" + ("" if n == 1 else "s")


def _cores(n: int) -> str:
    return f"{n} core" + ("" if n == 1 else "s")
