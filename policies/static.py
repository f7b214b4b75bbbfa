"""``static``: a fixed executor count (a baseline, and the operator's manual setting)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from autoscaler.core.model import Proposal, Reason
from autoscaler.core.policy import Policy, PolicyInput, PolicyParams
from policies.registry import register


@register("static")
class StaticPolicy(Policy):
    """A fixed executor count (default: the maximum): the over-provisioned baseline."""

    needs_cost_model: ClassVar[bool] = False

    class Params(PolicyParams):
        executors: int | None = Field(None, ge=0, description="Executors to keep; default: the maximum.")

    def __init__(self, params: Params) -> None:
        self.params = params

    def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
        target = self.params.executors if self.params.executors is not None else inp.max_executors
        return Proposal(executors=target, reason=Reason.STATIC_TARGET, message=f"keep {target} executor(s)")
