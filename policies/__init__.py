"""Scaling policies, one file each, registered by name.

What a policy author needs is here: subclass :class:`Policy`, declare ``Params``
(a :class:`PolicyParams`), implement ``propose(inp, memo)`` and ``@register("name")`` the
class. Importing this package loads no policy: the composition root calls
:func:`load_policies` (built-in ones, then the ``spark_autoscaler.policies`` entry-point group;
docs/policies.md, "Writing a policy").
"""

from __future__ import annotations

from autoscaler.core.policy import (
    NO_EXTRA_SAFETY,
    Policy,
    PolicyError,
    PolicyInput,
    PolicyParams,
    check_proposal,
)
from policies.registry import (
    ENTRY_POINT_GROUP,
    PolicyPluginWarning,
    create_policy,
    load_policies,
    policy_class,
    policy_names,
    register,
    resolve_name,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "NO_EXTRA_SAFETY",
    "Policy",
    "PolicyError",
    "PolicyInput",
    "PolicyParams",
    "PolicyPluginWarning",
    "check_proposal",
    "create_policy",
    "load_policies",
    "policy_class",
    "policy_names",
    "register",
    "resolve_name",
]
