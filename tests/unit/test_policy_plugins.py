"""Third-party policies: loaded through the entry-point group, told by name when they fail to
load, and checked before what they propose reaches the cluster."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

import policies.registry as registry
from autoscaler.core.model import Proposal, Reason
from autoscaler.core.policy import _proposal_problems
from autoscaler.tools.sim.runner import SimulationError, simulate
from autoscaler.tools.traces import load_trace
from policies import (
    Policy,
    PolicyError,
    PolicyParams,
    check_proposal,
    create_policy,
    register,
)
from tests.fakes import query_view

QUERIES = (
    query_view(name="q", parallelism=8, rescalable=True, max_parallelism=64),
    query_view(name="attached", parallelism=4, rescalable=False),
)


@contextmanager
def registered(name: str, propose, init=None) -> Iterator[type]:
    """A policy registered for one test and removed after it (other tests list every policy)."""

    class Temporary(Policy):
        class Params(PolicyParams):
            pass

        def __init__(self, params: PolicyParams) -> None:
            if init is not None:
                init(params)

        def propose(self, inp, memo=None):
            return propose(inp)

    register(name)(Temporary)
    try:
        yield Temporary
    finally:
        registry._REGISTRY.pop(name, None)


# --- what a policy proposes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "proposal, problem",
    [
        pytest.param(None, "propose() returned NoneType, not a Proposal", id="none"),
        pytest.param(3, "propose() returned int, not a Proposal", id="a-bare-count"),
        pytest.param(Proposal(-1, Reason.SCALE_DOWN_FOR_LOAD), "executors must be None or a whole number >= 0, got -1", id="negative"),
        pytest.param(Proposal(2.5, Reason.SCALE_UP_FOR_LOAD), "got 2.5", id="fractional"),  # type: ignore[arg-type]
        pytest.param(Proposal("4", Reason.SCALE_UP_FOR_LOAD), "got '4'", id="text-count"),  # type: ignore[arg-type]
        pytest.param(Proposal(True, Reason.SCALE_UP_FOR_LOAD), "got True", id="boolean-count"),
        pytest.param(Proposal(2, "because"), "reason must be a Reason, got 'because'", id="free-text-reason"),  # type: ignore[arg-type]
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, message=None), "message must be text", id="no-message"),  # type: ignore[arg-type]
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, parallelism={"q": 0}), "parallelism of 'q' must be a whole number >= 1, got 0", id="no-partitions"),
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, parallelism={"q": 65}), "parallelism of 'q' is 65, outside the query's range [1, 64]", id="beyond-the-query-maximum"),
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, parallelism={"gone": 4}), "parallelism for 'gone', which is not a query of the snapshot", id="unknown-query"),
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, parallelism=[("q", 4)]), "parallelism must map query names to partitions, got list", id="pairs-not-a-mapping"),  # type: ignore[arg-type]
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, details={"q.busy": math.nan}), "details must map text to finite numbers, got 'q.busy': nan", id="nan-detail"),
        pytest.param(Proposal(2, Reason.SCALE_UP_FOR_LOAD, details={"q.busy": "high"}), "got 'q.busy': 'high'", id="text-detail"),  # type: ignore[dict-item]
    ],
)
def test_a_proposal_the_reconciler_cannot_act_on_is_refused_naming_the_problem(proposal, problem):
    with pytest.raises(PolicyError, match="^policy 'acme' proposed what cannot be acted on: ") as raised:
        check_proposal("acme", proposal, QUERIES)
    assert problem in str(raised.value)


def test_every_problem_of_a_proposal_is_named_at_once():
    bad = Proposal(-2, "why", parallelism={"q": 0}, details={"x": math.inf})  # type: ignore[arg-type]
    with pytest.raises(PolicyError) as raised:
        check_proposal("acme", bad, QUERIES)
    assert str(raised.value).count("; ") == 3


@pytest.mark.parametrize(
    "proposal",
    [
        pytest.param(Proposal(None, Reason.NO_METRICS), id="no-opinion"),
        pytest.param(Proposal(0, Reason.SCALE_DOWN_FOR_LOAD), id="zero-executors"),
        pytest.param(Proposal(5, Reason.SCALE_UP_FOR_LOAD, parallelism={"q": 64}, details={"q.busy": 1, "x": 0.5}), id="partitions-at-the-maximum"),
        # an attached query's own range is its current partitions: the planner refuses the change with its reason
        pytest.param(Proposal(5, Reason.SCALE_UP_FOR_LOAD, parallelism={"attached": 8}), id="attached-query-left-to-the-planner"),
        pytest.param(Proposal(5, Reason.SCALE_UP_FOR_LOAD, parallelism=MappingProxyType({"q": 2})), id="any-mapping"),
    ],
)
def test_proposals_within_the_contract_pass(proposal):
    check_proposal("acme", proposal, QUERIES)


counts = st.one_of(st.none(), st.integers(-3, 10), st.floats(allow_nan=True), st.booleans(), st.text(max_size=2))
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.booleans(), st.text(max_size=2))


@given(
    executors=counts,
    reason=st.one_of(st.sampled_from(Reason), st.text(max_size=3)),
    parallelism=st.dictionaries(st.sampled_from(["q", "attached", "gone"]), st.integers(-1, 70), max_size=2),
    details=st.dictionaries(st.text(max_size=3), numbers, max_size=3),
)
def test_any_proposal_passes_the_check_or_is_refused_by_name_never_crashes_it(executors, reason, parallelism, details):
    proposal = Proposal(executors, reason, "m", parallelism, details)  # type: ignore[arg-type]
    problems = list(_proposal_problems(proposal, QUERIES))  # a TypeError here would fail the test
    with pytest.raises(PolicyError) if problems else nullcontext():
        check_proposal("acme", proposal, QUERIES)


def test_a_policy_proposing_garbage_stops_the_tick_in_its_policy_step(tmp_path):
    trace = tmp_path / "flat.csv"
    t0 = datetime(2024, 1, 1)
    trace.write_text("timestamp,value\n" + "\n".join(f"{t0 + timedelta(minutes=5 * i)},10" for i in range(6)) + "\n")
    with registered("minus-one", lambda inp: Proposal(-1, Reason.SCALE_DOWN_FOR_LOAD)):
        with pytest.raises(SimulationError, match="the policy step of a tick failed with policy 'minus-one': PolicyError: .*got -1"):
            simulate(load_trace(trace), policy="minus-one", days=0.01)


# --- registering ------------------------------------------------------------------------------


def test_a_policy_class_without_params_or_not_a_policy_is_refused_at_registration():
    class NoParams(Policy):
        def propose(self, inp, memo=None):
            return Proposal(None, Reason.NO_METRICS)

    class NotAPolicy:
        class Params(PolicyParams):
            pass

        def propose(self, inp):
            return Proposal(None, Reason.NO_METRICS)

    with pytest.raises(PolicyError, match="'no-params' .*needs a nested class Params"):
        register("no-params")(NoParams)
    with pytest.raises(PolicyError, match="'not-a-policy' .*must subclass policies.Policy and implement propose"):
        register("not-a-policy")(NotAPolicy)
    assert "no-params" not in registry._REGISTRY and "not-a-policy" not in registry._REGISTRY


def test_a_name_or_alias_taken_twice_is_refused():
    with registered("taken", lambda inp: None) as cls:
        with pytest.raises(PolicyError, match="'taken' is registered twice"):
            register("fresh", aliases=("taken",))(cls)
        with pytest.raises(PolicyError, match="'default' is registered twice"):
            register("default")(cls)
    assert "fresh" not in registry._REGISTRY


def test_a_constructor_that_fails_is_told_by_policy_name():
    def explode(params):
        raise RuntimeError("needs a licence key")

    with registered("fussy", lambda inp: None, init=explode):
        with pytest.raises(PolicyError, match="policy 'fussy' could not be built from its parameters: RuntimeError: needs a licence key"):
            create_policy("fussy")


# --- entry points, end to end -------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def documented_plugin() -> tuple[str, dict[str, str]]:
    """The example of docs/policies.md's "Writing a policy": its module and its entry points."""
    section = DOCS.read_text().split("## Writing a policy", 1)[1].split("\n## ", 1)[0]
    module = re.search(r"```python\n(.*?)```", section, re.S)
    toml = re.search(r"```toml\n(.*?)```", section, re.S)
    assert module is not None and toml is not None
    points = tomllib.loads(toml.group(1))["project"]["entry-points"]["spark_autoscaler.policies"]
    return module.group(1), points


@pytest.fixture
def plugins(tmp_path):
    """A folder holding an installed distribution with two policy entry points (the documented
    example and a broken one), and a trace."""
    site = tmp_path / "site"
    dist = site / "acme_policies-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-policies\nVersion: 1.0\n")
    module, points = documented_plugin()
    assert points == {"acme-half": "acme_policies.half"}
    (dist / "entry_points.txt").write_text(
        "[spark_autoscaler.policies]\nacme-half = acme_policies.half\nacme-broken = acme_broken\n"
    )
    (site / "acme_policies").mkdir()
    (site / "acme_policies" / "__init__.py").write_text("")
    (site / "acme_policies" / "half.py").write_text(module)
    (site / "acme_broken.py").write_text("import acme_missing_dependency\n")
    trace = tmp_path / "trace.csv"
    t0 = datetime(2024, 1, 1)
    trace.write_text("timestamp,value\n" + "\n".join(f"{t0 + timedelta(minutes=5 * i)},{10 + i}" for i in range(12)) + "\n")
    return site, trace


def cli(site, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    return subprocess.run([sys.executable, "-m", "autoscaler", *args], capture_output=True, text=True, env=env, timeout=300)


def test_the_documented_policy_once_installed_is_simulated_by_name(plugins):
    site, trace = plugins
    done = cli(site, "simulate", "--trace", str(trace), "--policy", "acme-half", "--peak-executors", "4", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # stdout is the JSON alone: the broken plugin's warning went to stderr
    assert result["policy"] == "acme-half" and result["mean_executors"] == pytest.approx(4.0, abs=0.2)  # half of max 8
    assert "policy 'acme-broken' is unavailable" in done.stderr and "acme_missing_dependency" in done.stderr
    listed = cli(site, "policies")
    assert "acme-half: Half of the executor maximum." in listed.stdout.splitlines()


def test_a_plugin_that_fails_to_load_is_named_and_leaves_the_others_working(plugins):
    site, trace = plugins
    asked = cli(site, "simulate", "--trace", str(trace), "--policy", "acme-broken")
    assert asked.returncode == 2 and "Traceback" not in asked.stderr
    assert (
        "policy 'acme-broken' is unavailable: entry point acme-broken = acme_broken (distribution acme-policies) "
        "failed to load: ModuleNotFoundError: No module named 'acme_missing_dependency'"
    ) in asked.stderr
    other = cli(site, "simulate", "--trace", str(trace), "--policy", "static", "--json")
    assert other.returncode == 0 and json.loads(other.stdout)["policy"] == "static"


@pytest.mark.parametrize(
    "module_text, problem",
    [
        # SystemExit is no Exception: it ended every command, `spark-autoscaler policies` too
        pytest.param("import sys\nsys.exit(4)\n", "entry point acme-exit = {module} called sys.exit(4) while being imported", id="exits-on-import"),
        # imported fine, but nothing carries @register: asking for it said only "unknown policy"
        pytest.param("class NotRegistered:\n    pass\n", "entry point acme-exit = {module} loaded but registered no policy "
                     "(decorate its class with @register('acme-exit') from policies)", id="registers-nothing"),
    ],
)
def test_a_plugin_that_exits_or_registers_nothing_is_named_and_the_others_work(tmp_path, monkeypatch, module_text, problem):
    from importlib.metadata import EntryPoint

    module = f"acme_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(module_text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_BROKEN", {})
    monkeypatch.setattr(registry, "entry_points", lambda group: [EntryPoint("acme-exit", module, group)])
    with pytest.warns(registry.PolicyPluginWarning, match="policy 'acme-exit' is unavailable"):
        registry._load_entry_points()
    with pytest.raises(PolicyError) as info:
        create_policy("acme-exit")
    assert str(info.value) == f"policy 'acme-exit' is unavailable: {problem.format(module=module)}"
    assert create_policy("static") is not None
