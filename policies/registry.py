"""The policies by name: ``@register`` on each policy class, and the loading of the built-in
policies and of third-party ones (the ``spark_autoscaler.policies`` entry-point group).

Nothing is loaded on import: the composition root (``autoscaler.app.compose``) calls
:func:`load_policies` once, before the configuration names a policy.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, TypeVar

from pydantic import ValidationError

from autoscaler.core.policy import Policy, PolicyError, PolicyParams
from autoscaler.core.settings import format_validation_error

ENTRY_POINT_GROUP = "spark_autoscaler.policies"
NEUTRAL_MODULES = ("registry", "sizing")  # helpers beside the policies, not policies
_REGISTRY: dict[str, type[Policy]] = {}
_ALIASES: dict[str, str] = {}
_BROKEN: dict[str, str] = {}  # entry-point name -> why it failed to load
_loaded = {"builtin": False, "entry_points": False}


class PolicyPluginWarning(UserWarning):
    """A third-party policy failed to load; the other policies work."""


P = TypeVar("P", bound=type[Policy])


def register(name: str, *, aliases: tuple[str, ...] = ()) -> Callable[[P], P]:
    """Class decorator: make a policy available by ``name`` (and aliases)."""

    def decorate(cls: P) -> P:
        for taken in (name, *aliases):
            if taken in _REGISTRY or taken in _ALIASES:
                raise PolicyError(f"policy {taken!r} is registered twice (again by {cls.__module__}.{cls.__qualname__})")
        _check_policy_class(name, cls)
        cls.name = name
        _REGISTRY[name] = cls
        for alias in aliases:
            _ALIASES[alias] = name
        return cls

    return decorate


def _check_policy_class(name: str, cls: type[Any]) -> None:
    """What the reconciler relies on besides ``cls(params)`` (tried by :func:`create_policy`): a
    :class:`Policy` with ``Params``, a :class:`PolicyParams`."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise PolicyError(f"policy {name!r} ({getattr(cls, '__qualname__', cls)!r}) must subclass policies.Policy and implement propose(self, inp, memo)")
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, PolicyParams)):
        raise PolicyError(f"policy {name!r} ({cls.__qualname__}) needs a nested class Params(PolicyParams) declaring its parameters")


def load_policies(*, plugins: bool = True) -> None:
    """Import the built-in policies and (``plugins``) every third-party one; each only once."""
    if not _loaded["builtin"]:
        _loaded["builtin"] = True
        for info in pkgutil.iter_modules(importlib.import_module("policies").__path__):
            if info.name not in NEUTRAL_MODULES and not info.name.startswith("_"):
                importlib.import_module(f"policies.{info.name}")
    if plugins and not _loaded["entry_points"]:
        _loaded["entry_points"] = True
        _load_entry_points()


def _load_entry_points() -> None:
    """Import every third-party policy; one that fails is named (when asked for, and in a warning
    on stderr) instead of taking every command down with it."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = f" (distribution {ep.dist.name})" if ep.dist is not None else ""
        registered = len(_REGISTRY)
        try:
            ep.load()
        except SystemExit as exc:  # a module that exits on import ended every command, `policies` too
            _record_broken(ep.name, f"entry point {ep.name} = {ep.value}{dist} called sys.exit({exc.code!r}) while being imported")
        except Exception as exc:  # an import error, a bad class: the plugin's problem, told by name
            why = exc if isinstance(exc, PolicyError) else f"{type(exc).__name__}: {exc}"
            _record_broken(ep.name, f"entry point {ep.name} = {ep.value}{dist} failed to load: {why}")
        else:
            if len(_REGISTRY) == registered and resolve_name(ep.name) not in _REGISTRY:
                # imported, but no class of it carries @register: asking for it said only "unknown policy"
                _record_broken(ep.name, f"entry point {ep.name} = {ep.value}{dist} loaded but registered no policy "
                                        f"(decorate its class with @register({ep.name!r}) from policies)")


def _record_broken(name: str, why: str) -> None:
    """Remember a third-party policy that failed to load: asking for it says why; a warning says
    so once on stderr (never on stdout, which carries results such as ``simulate --json``)."""
    _BROKEN[name] = why
    warnings.warn(f"policy {name!r} is unavailable: {why}", PolicyPluginWarning, stacklevel=3)


def policy_names() -> list[str]:
    return sorted(_REGISTRY) + sorted(_ALIASES)


def resolve_name(name: str) -> str:
    return _ALIASES.get(name, name)


def policy_class(name: str) -> type[Policy]:
    real = resolve_name(name)
    if real not in _REGISTRY:
        if real in _BROKEN:
            raise PolicyError(f"policy {name!r} is unavailable: {_BROKEN[real]}")
        if not _loaded["builtin"]:
            raise PolicyError(f"unknown policy {name!r}: no policy is loaded yet (policies.registry.load_policies())")
        raise PolicyError(f"unknown policy {name!r}; known: {', '.join(policy_names())}")
    return _REGISTRY[real]


def create_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    cls = policy_class(name)
    try:
        parsed = cls.Params.model_validate(dict(params or {}))
    except ValidationError as exc:
        # each with the value given, as the settings tell theirs (`70%` was refused without being shown)
        problems = [("params." if err["loc"] else "") + format_validation_error(err, unknown="unknown parameter") for err in exc.errors()]
        raise PolicyError(f"policy {name!r}: " + "; ".join(problems)) from None
    try:
        policy = cls(parsed)  # type: ignore[call-arg]  # a policy takes its Params
    except Exception as exc:  # a third-party constructor's bug, told by name at start-up
        raise PolicyError(f"policy {name!r} could not be built from its parameters: {type(exc).__name__}: {exc}") from exc
    return policy
