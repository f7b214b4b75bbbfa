"""The policy protocol and the registry of policies by name.

A policy is a pure function of :class:`PolicyInput` (snapshot, evaluated loads, history,
bounds, now). It proposes an executor count (or ``None`` when it does not drive executors)
and, optionally, new parallelism for queries. Normalization and actuation come after it.

Each policy is one small file that registers itself with ``@register("name")`` and declares
its parameters as a frozen pydantic model ``Params``.
"""

from __future__ import annotations

import math
import warnings
from datetime import datetime, timedelta
from typing import Any, Callable, ClassVar, Iterator, Mapping, Protocol, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from autoscaler.core.history import ScalingHistory
from autoscaler.core.model import Proposal, QueryLoad, QueryStatus, QueryView, Reason, Snapshot
from autoscaler.core.values import value
from autoscaler.core.evaluate import judged_lag


class PolicyParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@value
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

    @property
    def current_executors(self) -> int:
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


class Policy(Protocol):
    name: ClassVar[str]
    Params: ClassVar[type[PolicyParams]]
    # Optional: ``needs_cost_model: ClassVar[bool]`` (default True); False skips fitting each
    # query's batch cost model (``QueryLoad.model`` is then None).
    # Optional: settings (dotted keys) of the safety steps the policy was published with, e.g.
    # Flink's one-hour scale-down interval; the simulator applies them before its overrides.
    # settings_profile: ClassVar[Mapping[str, Any]]

    def propose(self, inp: PolicyInput) -> Proposal: ...


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


class PolicyPluginWarning(UserWarning):
    """A third-party policy failed to load; the other policies work."""


ENTRY_POINT_GROUP = "spark_autoscaler.policies"
_REGISTRY: dict[str, type[Any]] = {}
_ALIASES: dict[str, str] = {}
_BROKEN: dict[str, str] = {}  # entry-point name -> why it failed to load

P = TypeVar("P")


def register(name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[type[P]], type[P]]:
    """Class decorator: make a policy available by ``name`` (and aliases)."""

    def decorate(cls: type[P]) -> type[P]:
        for taken in (name, *aliases):
            if taken in _REGISTRY or taken in _ALIASES:
                raise PolicyError(f"policy {taken!r} is registered twice (again by {cls.__module__}.{cls.__qualname__})")
        _check_policy_class(name, cls)
        cls.name = name  # type: ignore[attr-defined]
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return decorate


def _check_policy_class(name: str, cls: type[Any]) -> None:
    """What the reconciler relies on besides ``cls(params)`` (tried by :func:`create_policy`):
    ``Params``, a :class:`PolicyParams`, and ``propose``."""
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, PolicyParams)):
        raise PolicyError(f"policy {name!r} ({cls.__qualname__}) needs a nested class Params(PolicyParams) declaring its parameters")
    if not callable(getattr(cls, "propose", None)):
        raise PolicyError(f"policy {name!r} ({cls.__qualname__}) needs a method propose(self, inp: PolicyInput) -> Proposal")


def record_broken(name: str, why: str) -> None:
    """Remember a third-party policy that failed to load: asking for it says why; a warning says
    so once on stderr (never on stdout, which carries results such as ``simulate --json``)."""
    _BROKEN[name] = why
    warnings.warn(f"policy {name!r} is unavailable: {why}", PolicyPluginWarning, stacklevel=2)


def policy_names() -> list[str]:
    return sorted(_REGISTRY) + sorted(_ALIASES)


def resolve_name(name: str) -> str:
    return _ALIASES.get(name, name)


def policy_class(name: str) -> type[Any]:
    real = resolve_name(name)
    if real not in _REGISTRY:
        if real in _BROKEN:
            raise PolicyError(f"policy {name!r} is unavailable: {_BROKEN[real]}")
        raise PolicyError(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    return _REGISTRY[real]


def create_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    cls = policy_class(name)
    try:
        parsed = cls.Params.model_validate(dict(params or {}))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            msg = "unknown parameter" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"params.{loc}: {msg}" if loc else msg)
        raise PolicyError(f"policy {name!r}: " + "; ".join(problems)) from None
    try:
        policy: Policy = cls(parsed)
    except Exception as exc:  # a third-party constructor's bug, told by name at start-up
        raise PolicyError(f"policy {name!r} could not be built from its parameters: {type(exc).__name__}: {exc}") from exc
    return policy


def check_proposal(policy: str, proposal: object, queries: Sequence[QueryView]) -> None:
    """Raise :class:`PolicyError` naming what is wrong when ``proposal`` is not one the reconciler
    can act on (a third-party policy's bug must not reach the cluster as a negative executor
    count or a query with no partitions, nor the metrics as an unbounded label)."""
    if _plainly_valid(proposal):
        return  # the usual tick, checked without the generator (a few hundred instructions)
    problems = list(_proposal_problems(proposal, queries))
    if problems:
        raise PolicyError(f"policy {policy!r} proposed what cannot be acted on: " + "; ".join(problems))


_isfinite = math.isfinite


def _plainly_valid(proposal: object) -> bool:
    """The common proposal, checked fast: plain types, no parallelism, finite float details."""
    if type(proposal) is not Proposal:
        return False
    executors, details = proposal.executors, proposal.details
    if not (
        (executors is None or (type(executors) is int and executors >= 0))
        and type(proposal.reason) is Reason
        and type(proposal.message) is str
        and proposal.parallelism == {}
        and type(details) is dict
    ):
        return False
    for key, number in details.items():
        if type(key) is not str or type(number) is not float or not _isfinite(number):
            return False
    return True


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
