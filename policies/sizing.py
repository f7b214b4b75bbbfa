"""Sizing arithmetic shared by several policies (each policy imports this module, never another policy).

A query with trigger interval ``I`` that receives ``lambda`` rows/s runs batches of
``lambda x I`` rows; its batch cost model (:class:`~autoscaler.core.model.BatchCostModel`) says how
long such a batch takes on ``P`` partitions and ``C`` cores, and so the share of the trigger it
keeps the query busy. A trigger that finds no new rows runs no batch (Spark skips it, and so
does the simulator), so a query receiving nothing is busy 0 whatever its batches would cost.
"""

from __future__ import annotations

import math
from datetime import timedelta

from autoscaler.core.evaluate import schedule_lag
from autoscaler.core.model import BatchCostModel, QueryLoad


def utilization(model: BatchCostModel, partitions: int, cores: int, rate: float, trigger: timedelta | None) -> float:
    """Predicted busy share of a query receiving ``rate`` rows/s (see module docstring)."""
    if rate <= 0:
        return 0.0  # no rows, no batch
    interval = trigger.total_seconds() if trigger else 0.0
    if interval > 0:
        return model.duration(partitions, cores, rate * interval) / interval
    capacity = model.throughput(partitions, cores)
    return rate / capacity if capacity > 0 else math.inf


def utilization_floor(model: BatchCostModel, tasks: int, trigger: timedelta | None, rate: float) -> float:
    """A lower bound on the utilization at ``rate`` of any batch of at least ``tasks`` tasks,
    whatever its cores.

    A batch pays the fixed cost, at least one task overhead, and the contention of its concurrent
    tasks in every wave: ``waves x min(P, C) >= P``, so ``k x P`` at least. 0 without a trigger,
    and 0 at rate 0, where no batch runs (as :func:`utilization`).
    """
    interval = trigger.total_seconds() if trigger else 0.0
    if interval <= 0 or rate <= 0:
        return 0.0
    return (model.fixed + model.per_task + model.contention * tasks) / interval


def waiting_rows(load: QueryLoad, trigger: timedelta | None, rate: float | None = None) -> float:
    """Rows waiting: the reported backlog, or what the lag beyond two triggers implies.

    The implied rows are the lag times the arrival ``rate`` the caller trusts (by default the
    query's input rate); a policy that filtered out a straggler's inflated live rate passes its
    own rate so the straggler is not counted twice.
    """
    reported = load.backlog_rows or 0.0
    rate = load.input_rate if rate is None else rate
    if load.lag is None or not rate:
        return reported
    implied = rate * max(0.0, (load.lag - schedule_lag(trigger)).total_seconds())
    return max(reported, implied)
