"""Scaling policies, registered by name.

Every module in this package registers its policy on import; third-party policies register
through the ``spark_autoscaler.policies`` entry-point group.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from policies.base import (
    Policy,
    PolicyError,
    PolicyInput,
    PolicyParams,
    create_policy,
    policy_class,
    policy_names,
    register,
    resolve_name,
)

__all__ = [
    "Policy",
    "PolicyError",
    "PolicyInput",
    "PolicyParams",
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
    for ep in entry_points(group="spark_autoscaler.policies"):
        ep.load()


_load_builtin()
_load_entry_points()
