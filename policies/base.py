"""The policy protocol and the registry of policies by name.

A policy is a pure function of :class:`PolicyInput` (snapshot, evaluated loads, history,
bounds, now). It proposes an executor count (or ``None`` when it does not drive executors)
and, optionally, new parallelism for queries. Normalization and actuation come after it.

Each policy is one small file that registers itself with ``@register("name")`` and declares
its parameters as a frozen pydantic model ``Params``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable, ClassVar, Mapping, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from autoscaler.history import ScalingHistory
from autoscaler.model import Proposal, QueryLoad, QueryStatus, QueryView, Snapshot
from autoscaler.values import value
from autoscaler.window import judged_lag


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
        longer (:func:`~autoscaler.window.judged_lag`).

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
    """Unknown policy or invalid parameters."""


_REGISTRY: dict[str, type[Any]] = {}
_ALIASES: dict[str, str] = {}

P = TypeVar("P")


def register(name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[type[P]], type[P]]:
    """Class decorator: make a policy available by ``name`` (and aliases)."""

    def decorate(cls: type[P]) -> type[P]:
        if name in _REGISTRY or name in _ALIASES:
            raise PolicyError(f"policy {name!r} is registered twice")
        cls.name = name  # type: ignore[attr-defined]
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return decorate


def policy_names() -> list[str]:
    return sorted(_REGISTRY) + sorted(_ALIASES)


def resolve_name(name: str) -> str:
    return _ALIASES.get(name, name)


def policy_class(name: str) -> type[Any]:
    real = resolve_name(name)
    if real not in _REGISTRY:
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
    policy: Policy = cls(parsed)
    return policy
