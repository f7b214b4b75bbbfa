"""What the operator sends to a running daemon: one authority per field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.operator.control import (
    CONTROL_FIELDS,
    apply_patch,
    control_diff,
    describe_patch,
    log_level_to_send,
    missing_queries,
    query_requests,
)
from autoscaler.operator.model import QuerySpec

NOTHING = {"paused": False, "mode": None, "dry_run": None, "min_executors": None, "max_executors": None, "manual_executors": None,
           "policy_params": None, "query_requests": {}}
UNSET = {f: None for _, f in CONTROL_FIELDS}


@pytest.mark.parametrize(
    "desired, overrides, managed, patch, now_managed",
    [
        pytest.param({"max_executors": 20}, NOTHING, (), {"max_executors": 20}, ("max_executors",), id="a-new-bound-is-sent"),
        pytest.param({"max_executors": 20}, {**NOTHING, "max_executors": 20}, ("max_executors",), {}, ("max_executors",), id="in-sync-sends-nothing"),
        pytest.param({"max_executors": 20}, {**NOTHING, "max_executors": 6}, ("max_executors",), {"max_executors": 20},
                     ("max_executors",), id="a-human-override-of-a-managed-field-is-replaced"),
        pytest.param({}, {**NOTHING, "max_executors": 6}, (), {}, (), id="a-human-override-of-an-unset-field-stays"),
        pytest.param({}, {**NOTHING, "max_executors": 20}, ("max_executors",), {"max_executors": None}, (),
                     id="a-field-the-spec-gives-up-returns-to-the-configuration"),
        pytest.param({}, NOTHING, ("max_executors",), {}, (), id="given-up-and-already-unset"),
        pytest.param({"paused": True}, NOTHING, (), {"paused": True}, ("paused",), id="pause"),
        pytest.param({}, {**NOTHING, "paused": True}, ("paused",), {"paused": None}, (), id="pause-given-up-resumes"),
        pytest.param({"paused": False}, NOTHING, (), {}, ("paused",), id="not-paused-is-the-default"),
        pytest.param({"policy_params": {"horizon": "1h"}}, {**NOTHING, "policy_params": {"horizon": "2h"}}, (), {"policy_params": {"horizon": "1h"}},
                     ("policy_params",), id="policy-params"),
        pytest.param({"mode": "reactive", "dry_run": True, "min_executors": 2}, NOTHING, (), {"mode": "reactive", "min_executors": 2, "dry_run": True},
                     ("mode", "min_executors", "dry_run"), id="several-together"),
    ],
)
def test_control_diff(desired, overrides, managed, patch, now_managed):
    diff = control_diff({**UNSET, **desired}, overrides, managed)
    assert (diff.patch, diff.managed) == (patch, now_managed)


values = {
    "mode": st.sampled_from([None, "auto", "active", "reactive"]),
    "min_executors": st.sampled_from([None, 0, 2]),
    "max_executors": st.sampled_from([None, 4, 20]),
    "manual_executors": st.sampled_from([None, 3]),
    "paused": st.sampled_from([None, True, False]),
    "dry_run": st.sampled_from([None, True, False]),
    "policy_params": st.sampled_from([None, {}, {"horizon": "1h"}]),
}
held = {**values, "paused": st.booleans()}


@settings(max_examples=300, deadline=None)
@given(st.fixed_dictionaries(values), st.fixed_dictionaries(held), st.lists(st.sampled_from([f for _, f in CONTROL_FIELDS]), unique=True))
def test_applying_the_patch_leaves_nothing_to_send_and_unset_fields_are_never_touched(desired, overrides, managed):
    diff = control_diff(desired, overrides, managed)
    after = apply_patch(overrides, diff.patch)
    assert control_diff(desired, after, diff.managed).patch == {}  # idempotent
    for field, want in desired.items():
        if want is None and field not in managed:
            assert field not in diff.patch  # a human's override of a field the spec never set stays
        if want is not None:
            assert after[field] == want or (field == "paused" and want is False and after[field] is False)


def test_the_change_reads_in_the_specs_words():
    assert describe_patch({"max_executors": 20, "paused": None}, {**NOTHING, "max_executors": 8, "paused": True}) == (
        "scaling.maxExecutors: 8 -> 20, scaling.paused: true -> unset")


def params(max_rows=None, trigger=2.0):
    return {"parallelism": 4, "shuffle_partitions": None, "trigger_interval_seconds": trigger, "max_rows_per_batch": max_rows}


def hosted(name, max_rows=None, trigger=2.0, pending=None, declared=None):
    return {"name": name, "params": params(max_rows, trigger), "pending_request": pending and {**params(max_rows, trigger), **pending},
            "declared": declared}


@pytest.mark.parametrize(
    "queries, daemon, expected",
    [
        pytest.param([QuerySpec(name="q", max_rows_per_batch=500)], [hosted("q")], [("q", {"max_rows_per_batch": 500})], id="a-rate-limit"),
        pytest.param([QuerySpec(name="q", trigger_interval="10s")], [hosted("q")], [("q", {"trigger_interval_seconds": 10.0})], id="a-trigger"),
        pytest.param([QuerySpec(name="q", max_rows_per_batch=500)], [hosted("q", max_rows=500)], [], id="runs-so-already"),
        pytest.param([QuerySpec(name="q", max_rows_per_batch=500)], [hosted("q", pending={"max_rows_per_batch": 500})], [], id="requested-already"),
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=9)], [], id="unset-is-not-enforced"),
        pytest.param([QuerySpec(name="gone", max_rows_per_batch=1)], [hosted("q")], [], id="not-hosted-is-skipped"),
    ],
)
def test_query_requests(queries, daemon, expected):
    assert query_requests(queries, daemon).requests == expected


DECLARED = params(max_rows=None, trigger=2.0)  # the pipeline: no rate limit, a 2 s trigger


@pytest.mark.parametrize(
    "queries, daemon, managed, expected, now_managed",
    [
        # before: a rate limit and trigger the spec gave up stayed at the last values sent
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=500, trigger=4.0, declared=DECLARED)],
                     {"q": ("max_rows_per_batch", "trigger_interval_seconds")},
                     [("q", {"max_rows_per_batch": None, "trigger_interval_seconds": 2.0})], {}, id="both-given-back"),
        pytest.param([QuerySpec(name="q", trigger_interval="4s")], [hosted("q", max_rows=500, trigger=4.0, declared=DECLARED)],
                     {"q": ("max_rows_per_batch", "trigger_interval_seconds")},
                     [("q", {"max_rows_per_batch": None})], {"q": ("trigger_interval_seconds",)}, id="one-given-back-one-kept"),
        pytest.param([], [hosted("q", max_rows=500, declared=DECLARED)], {"q": ("max_rows_per_batch",)},
                     [("q", {"max_rows_per_batch": None})], {}, id="a-query-left-out-of-the-spec"),
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=500, declared=params(max_rows=800))], {"q": ("max_rows_per_batch",)},
                     [("q", {"max_rows_per_batch": 800})], {}, id="back-to-the-declared-limit"),
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=500, pending={"max_rows_per_batch": None}, declared=DECLARED)],
                     {"q": ("max_rows_per_batch",)}, [], {}, id="requested-back-already"),
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=9, declared=DECLARED)], {}, [], {}, id="never-managed-is-left-alone"),
        pytest.param([QuerySpec(name="q")], [hosted("q", trigger=4.0, declared=params(trigger=None))], {"q": ("trigger_interval_seconds",)},
                     [("q", {"trigger_interval_seconds": None})], {}, id="back-to-no-trigger-interval"),
        pytest.param([QuerySpec(name="q")], [hosted("q", max_rows=500)], {"q": ("max_rows_per_batch",)}, [], {},
                     id="a-daemon-that-does-not-say-what-is-declared"),
        pytest.param([QuerySpec(name="later", max_rows_per_batch=5)], [], {"later": ("trigger_interval_seconds",)}, [],
                     {"later": ("max_rows_per_batch", "trigger_interval_seconds")}, id="not-hosted-stays-managed"),
    ],
)
def test_a_query_field_the_spec_gives_up_goes_back_to_what_the_pipeline_declares(queries, daemon, managed, expected, now_managed):
    diff = query_requests(queries, daemon, managed)
    assert (diff.requests, diff.managed) == (expected, now_managed)


def test_queries_the_daemon_does_not_host_are_named():
    assert missing_queries([QuerySpec(name="a"), QuerySpec(name="q")], [hosted("q")]) == ["a"]


@pytest.mark.parametrize(
    "level, applied, pod, expected",
    [
        pytest.param("DEBUG", None, "uid-1", "DEBUG", id="first-time"),
        pytest.param("DEBUG", {"podUID": "uid-1", "level": "DEBUG"}, "uid-1", None, id="set-already"),
        pytest.param("DEBUG", {"podUID": "uid-0", "level": "DEBUG"}, "uid-1", "DEBUG", id="a-new-pod-starts-at-its-default"),
        pytest.param(None, {"podUID": "uid-1", "level": "DEBUG"}, "uid-1", "INFO", id="unset-goes-back-to-the-daemons-own"),
        pytest.param(None, {"podUID": "uid-1", "level": "INFO"}, "uid-1", None, id="unset-at-the-daemons-own-already"),
        pytest.param(None, {"podUID": "uid-0", "level": "DEBUG"}, "uid-1", None, id="unset-a-new-pod-is-at-its-own"),
        pytest.param(None, None, "uid-1", None, id="never-set"),
        pytest.param("INFO", None, None, None, id="no-pod"),
    ],
)
def test_the_log_level_is_sent_once_per_pod(level, applied, pod, expected):
    assert log_level_to_send(level, applied, pod) == expected
