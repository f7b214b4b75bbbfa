"""``reactive``: never request executors; use whatever cores exist.

Executors come and go on their own (spot capacity, a cluster autoscaler, someone adding
workers); the daemon only keeps each query's partitions aligned with the cores it has.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from autoscaler.core.model import Proposal, Reason
from autoscaler.core.policy import Policy, PolicyInput, PolicyParams
from policies.registry import register


@register("reactive")
class ReactivePolicy(Policy):
    """Use whatever executors appear; never request any (reactive mode)."""

    settings_profile: ClassVar[Mapping[str, Any]] = {"mode": "reactive"}
    needs_cost_model: ClassVar[bool] = False
    class Params(PolicyParams):
        pass

    def __init__(self, params: Params) -> None:
        self.params = params

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        return Proposal(
            executors=None,
            reason=Reason.USE_AVAILABLE,
            message=f"use the {inp.current_executors} executor(s) available",
        )
