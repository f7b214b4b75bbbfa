"""Scaling policies, registered by name.

Every module in this package registers its policy on import; third-party policies register
through the ``spark_autoscaler.policies`` entry-point group (docs/policies.md, "Writing a
policy").
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from policies.base import (
    ENTRY_POINT_GROUP,
    Policy,
    PolicyError,
    PolicyInput,
    PolicyParams,
    PolicyPluginWarning,
    check_proposal,
    create_policy,
    policy_class,
    policy_names,
    record_broken,
    register,
    resolve_name,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Policy",
    "PolicyError",
    "PolicyInput",
    "PolicyParams",
    "PolicyPluginWarning",
    "check_proposal",
    "create_policy",
    "policy_class",
    "policy_names",
    "register",
    "resolve_name",
]


def _load_builtin() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def _load_entry_points() -> None:
    """Import every third-party policy; one that fails is named (when asked for, and in a warning
    on stderr) instead of taking every command down with it."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # an import error, a bad class: the plugin's problem, told by name
            dist = f" (distribution {ep.dist.name})" if ep.dist is not None else ""
            why = exc if isinstance(exc, PolicyError) else f"{type(exc).__name__}: {exc}"
            record_broken(ep.name, f"entry point {ep.name} = {ep.value}{dist} failed to load: {why}")


_load_builtin()
_load_entry_points()
