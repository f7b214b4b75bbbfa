"""The policy port: what a scaling policy sees, what it must return, and the check of its answer.

A policy proposes, from one tick's :class:`PolicyInput` (snapshot, evaluated loads, history,
bounds, the rate step, now), an executor count (``None`` when it does not drive executors) and,
optionally, new partitions for queries. Normalization and planning come after it, in
:func:`autoscaler.core.decide.decide`; the policies themselves live in the top-level
``policies`` package, one file each, registered by name (``policies.registry``).

``propose(inp, memo)`` is a function of its arguments. The memo is the policy's own cache
(:meth:`Policy.new_memo`), owned by whoever runs the decisions (the reconciler) and handed in
every tick: it may save work, never change a proposal (a fresh memo gives the same one).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from pydantic import ConfigDict

from autoscaler.core.evaluate import judged_lag
from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import (
    Proposal,
    QueryLoad,
    QueryStatus,
    QueryView,
    Reason,
    Snapshot,
)
from autoscaler.core.settings import NumbersNotBooleans


class PolicyParams(NumbersNotBooleans):
    """A policy's parameters: declared with their defaults and descriptions, unknown keys refused,
    a boolean where a number is declared refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


@dataclass(frozen=True, slots=True)
class PolicyInput:
    now: datetime
    snapshot: Snapshot
    loads: Mapping[str, QueryLoad]
    history: ScalingHistory
    min_executors: int
    max_executors: int
    cores_per_executor: int
    target_lag: timedelta
    interval: timedelta | None = None  # time between two decisions (the reconcile interval)
    # length of one step of the history's rate series (``history.rate_step``): forecasts read
    # the series step by step
    rate_step: timedelta = timedelta(minutes=5)

    @property
    def current_executors(self) -> int:
        """Executors registered now: the capacity the measured batches ran on. Not where the
        daemon stands: a policy that holds its size proposes :attr:`target_executors`, so late
        registrations above the asserted target are removed and a scale-up in flight is kept."""
        return self.snapshot.executors.count

    @property
    def current_cores(self) -> int:
        return self.snapshot.executors.cores

    @property
    def target_executors(self) -> int:
        """Executors asked for (the asserted target), else those registered."""
        view = self.snapshot.executors
        return view.requested_total if view.requested_total is not None else view.count

    def modelled_queries(self) -> list[tuple[QueryView, QueryLoad]]:
        """Running queries whose batches gave a load estimate and a cost model (what sizing needs)."""
        return [
            (view, load)
            for view in self.snapshot.queries
            if view.status == QueryStatus.RUNNING
            and (load := self.loads.get(view.name)) is not None
            and load.known
            and load.model is not None
        ]

    def target_lag_for(self, view: QueryView) -> timedelta:
        """The SLO lag ``view``'s schedule can meet: ``target_lag``, or two triggers when that is
        longer (:func:`~autoscaler.core.evaluate.judged_lag`).

        A query with a 2-minute trigger lags up to 4 minutes while it keeps up; judged against a
        1-minute SLO, every batch would look late and a policy would scale to the maximum and
        never back, for nothing.
        """
        return judged_lag(self.target_lag, view.params.trigger_interval)

    @property
    def resizing(self) -> bool:
        """An executor request or removal has not completed yet."""
        view = self.snapshot.executors
        registered = view.count - len(view.pending_removal)
        return bool(view.pending_removal) or (view.requested_total is not None and view.requested_total != registered)


class Policy(ABC):
    """A scaling policy. Subclasses declare ``Params``, take them in ``__init__`` and implement
    :meth:`propose`; ``@register("name")`` (``policies.registry``) makes them available by name.

    A policy object holds its parameters only: whatever it wants to keep from tick to tick goes
    in its memo (:meth:`new_memo`), which the runtime owns and hands in.
    """

    name: ClassVar[str]  # set by ``@register``
    Params: ClassVar[type[PolicyParams]]
    needs_cost_model: ClassVar[bool] = True  # False: each query's batch cost model is not fitted (QueryLoad.model is None)
    # settings (dotted keys) of the safety steps the policy was published with, e.g. Flink's
    # one-hour scale-down interval; the simulator applies them before its own overrides
    settings_profile: ClassVar[Mapping[str, Any]] = {}

    def new_memo(self) -> Any:
        """A fresh cache for :meth:`propose` (None: the policy keeps none)."""
        return None

    @abstractmethod
    def propose(self, inp: PolicyInput, memo: Any) -> Proposal:
        """The proposal for ``inp``: the same for the same input whatever the memo holds."""


# Settings for a policy that brings its own timing (a published baseline): every generic safety
# step after it is neutral, so the policy behaves as published (its delays live in the policy).
NO_EXTRA_SAFETY: Mapping[str, Any] = {
    "normalize.stabilization": "0s",
    "normalize.scale_up_stabilization": "0s",
    "normalize.scale_down_delay": "0s",
    "normalize.dead_band": 0.0,
    "normalize.max_scale_up_factor": 1000.0,
    "normalize.max_scale_down_factor": 1.0,
    "normalize.backlog_lag_threshold": "3650d",
    "normalize.min_wave_efficiency": 0.001,  # partitions stay as deployed: the system it imitates cannot change them
}


class PolicyError(ValueError):
    """Unknown policy, invalid parameters, a policy that failed to load or proposed something invalid."""


class PolicyFailed(Exception):
    """A policy's ``propose`` raised, or returned what cannot be acted on (the tick's ``policy``
    step); ``cause`` is what went wrong."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def check_proposal(policy: str, proposal: object, queries: Sequence[QueryView]) -> None:
    """Raise :class:`PolicyError` naming what is wrong when ``proposal`` is not one the reconciler
    can act on (a third-party policy's bug must not reach the cluster as a negative executor
    count or a query with no partitions, nor the metrics as an unbounded label)."""
    problems = list(_proposal_problems(proposal, queries))
    if problems:
        raise PolicyError(f"policy {policy!r} proposed what cannot be acted on: " + "; ".join(problems))


def _proposal_problems(proposal: object, queries: Sequence[QueryView]) -> Iterator[str]:
    if not isinstance(proposal, Proposal):
        yield f"propose() returned {type(proposal).__name__}, not a Proposal"
        return
    executors = proposal.executors
    if executors is not None and not (_whole(executors) and executors >= 0):
        yield f"executors must be None or a whole number >= 0, got {executors!r}"
    if not isinstance(proposal.reason, Reason):
        yield f"reason must be a Reason, got {proposal.reason!r}"
    if not isinstance(proposal.message, str):
        yield f"message must be text, got {type(proposal.message).__name__}"
    parallelism: object = proposal.parallelism
    if not isinstance(parallelism, Mapping):
        yield f"parallelism must map query names to partitions, got {type(parallelism).__name__}"
    elif parallelism:
        yield from _parallelism_problems(parallelism, queries)
    details: object = proposal.details
    if not isinstance(details, Mapping):
        yield f"details must map text to numbers, got {type(details).__name__}"
    else:
        for key, number in details.items():
            if not (isinstance(key, str) and _finite(number)):
                yield f"details must map text to finite numbers, got {key!r}: {number!r}"


def _parallelism_problems(parallelism: Mapping[Any, Any], queries: Sequence[QueryView]) -> Iterator[str]:
    views = {q.name: q for q in queries}
    for name, partitions in parallelism.items():
        view = views.get(name)
        if view is None:
            yield f"parallelism for {name!r}, which is not a query of the snapshot"
        elif not (_whole(partitions) and partitions >= 1):
            yield f"parallelism of {name!r} must be a whole number >= 1, got {partitions!r}"
        elif view.rescalable and not view.min_parallelism <= partitions <= view.max_parallelism:
            yield f"parallelism of {name!r} is {partitions}, outside the query's range [{view.min_parallelism}, {view.max_parallelism}]"


def _whole(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
