"""A policy is a function of its input: the memo the runtime keeps for it saves work, never
changes a proposal, and the policy object itself keeps nothing from tick to tick."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest

import policies.registry as registry
from autoscaler.core.model import Proposal
from autoscaler.core.policy import Policy, PolicyInput
from autoscaler.tools.sim.runner import simulate
from autoscaler.tools.traces import load_trace
from policies import create_policy, policy_class, policy_names, register, resolve_name

BUILT_IN = sorted({resolve_name(n) for n in policy_names() if policy_class(n).__module__.startswith("policies.")})


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Six hours at a 5-minute step: a plateau, a burst, a slow ramp down, a quiet stretch."""
    path = tmp_path_factory.mktemp("memo") / "load.csv"
    t0 = datetime(2024, 3, 1)
    values = [20] * 12 + [90] * 6 + [70, 60, 50, 40, 30, 20] + [20] * 12 + [5] * 36
    path.write_text("timestamp,value\n" + "\n".join(f"{t0 + timedelta(minutes=5 * i)},{v}" for i, v in enumerate(values)) + "\n")
    return load_trace(path)


@contextmanager
def recorded(name: str) -> Iterator[list[tuple[PolicyInput, Proposal, object]]]:
    """The policy ``name`` under another name, recording each tick's input, its proposal and a
    copy of the memo it was given (as it stood before the tick)."""
    seen: list[tuple[PolicyInput, Proposal, object]] = []
    base = policy_class(name)

    class Recording(base):  # type: ignore[misc, valid-type]
        def propose(self, inp: PolicyInput, memo: object = None) -> Proposal:
            before = copy.deepcopy(memo)
            proposal = super().propose(inp, memo)
            seen.append((inp, proposal, before))
            return proposal

    register(f"memo-check-{name}")(Recording)
    try:
        yield seen
    finally:
        registry._REGISTRY.pop(f"memo-check-{name}", None)


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_policy_proposes_the_same_for_the_same_input_with_a_fresh_a_kept_or_a_reused_memo(name, trace):
    with recorded(name) as seen:
        simulate(trace, policy=f"memo-check-{name}", peak_executors=8, seed=3)
    assert len(seen) > 1000
    policy = create_policy(name)
    checked = 0
    for inp, proposal, memo in seen[::37]:
        assert policy.propose(inp, policy.new_memo()) == proposal  # a fresh memo: the same proposal
        kept = copy.deepcopy(memo)
        assert policy.propose(inp, kept) == proposal  # the memo the run had then: the same
        assert policy.propose(inp, kept) == proposal  # ... and once more, with what the call left in it
        checked += 1
    assert checked > 25
    moved = {p.executors for _, p, _ in seen}
    # the trace made the policy decide things (spark-dra asks for a slot per pending task: the
    # query's partitions ask for the maximum at every batch; static and reactive never move)
    assert len(moved) > 1 or name in ("static", "reactive", "spark-dra")


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_policy_object_keeps_nothing_between_ticks(name, trace):
    policy = create_policy(name)
    before = copy.deepcopy(vars(policy))
    with recorded(name) as seen:
        simulate(trace, policy=f"memo-check-{name}", peak_executors=8, days=0.05)
    for inp, _, memo in seen[::10]:
        policy.propose(inp, memo)
    assert vars(policy) == before
    assert isinstance(policy, Policy)
