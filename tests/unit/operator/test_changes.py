"""Which change needs what: every field has one class; the restart hash moves with the
restart-class fields only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.operator.changes import FIELDS, ChangeClass, Changes, classify_change, restart_hash
from autoscaler.operator.model import SparkStreamingAppSpec, parse_spec
from autoscaler.operator.settings import AppDefaults, OperatorSettings
from tests.unit.operator.samples import SETTINGS, sample, spec_of

BASE = spec_of(sample())


def changed(**spec_changes: Any) -> SparkStreamingAppSpec:
    raw = BASE.model_dump(mode="json", by_alias=True, exclude_none=True)
    for path, value in spec_changes.items():
        node = raw
        *parents, last = path.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    spec, problems = parse_spec(raw)
    assert spec is not None, problems
    return spec


def leaves(model: type, prefix: str = "") -> list[str]:
    """Every field path of the model, by the CR's camelCase names."""
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        inner = field.annotation
        nested = [c for c in getattr(inner, "__args__", (inner,)) if isinstance(c, type) and hasattr(c, "model_fields")]
        out += leaves(nested[0], f"{path}.") if nested and getattr(inner, "__origin__", None) is not list else [path]
    return out


def test_every_field_has_exactly_one_change_class():
    covering = {leaf: [p for p in FIELDS if leaf == p or leaf.startswith(p + ".")] for leaf in leaves(SparkStreamingAppSpec)}
    assert {leaf: ps for leaf, ps in covering.items() if len(ps) != 1} == {}


@pytest.mark.parametrize(
    "change, expected",
    [
        pytest.param({"scaling__maxExecutors": 20}, Changes(control=("scaling.maxExecutors",)), id="bounds-live"),
        pytest.param({"scaling__paused": True, "scaling__dryRun": True}, Changes(control=("scaling.paused", "scaling.dryRun")), id="pause-dry-run-live"),
        pytest.param({"scaling__policy__params": {"horizon": "1h"}}, Changes(control=("scaling.policy.params",)), id="policy-params-live"),
        pytest.param({"queries": [{"name": "clicks", "maxRowsPerBatch": 5}]}, Changes(control=("queries",)), id="query-rate-limit-live"),
        pytest.param({"logLevel": "DEBUG"}, Changes(control=("logLevel",)), id="log-level-live"),
        pytest.param({"image": "registry.example.com/analytics/clicks:1.5.0"}, Changes(restart=("image",)), id="image-restarts"),
        pytest.param({"sparkConf": {}}, Changes(restart=("sparkConf",)), id="spark-conf-restarts"),
        pytest.param({"executor__memory": "8g"}, Changes(restart=("executor",)), id="resources-restart"),
        pytest.param({"scaling__policy__name": "target-utilization"}, Changes(restart=("scaling.policy.name",)), id="policy-name-restarts"),
        pytest.param({"scaling__requestTimeout": "10m"}, Changes(restart=("scaling.requestTimeout",)), id="request-timeout-restarts"),
        pytest.param({"checkpointRoot": "s3a://other/clicks"}, Changes(immutable=("checkpointRoot",)), id="checkpoint-root-immutable"),
        pytest.param({"suspend": True}, Changes(replicas=True), id="suspend-scales-the-statefulset"),
        pytest.param({"driver__cores": 1}, Changes(), id="a-default-written-out-is-no-change"),
    ],
)
def test_changes_are_classified(change, expected):
    assert classify_change(BASE, changed(**change)) == expected


CONTROL_CHANGES = st.sampled_from([
    {"scaling__maxExecutors": 20}, {"scaling__minExecutors": 0}, {"scaling__mode": "reactive"}, {"scaling__manualExecutors": 3},
    {"scaling__paused": True}, {"scaling__dryRun": False}, {"scaling__policy__params": {"horizon": "2h"}},
    {"queries": []}, {"queries": [{"name": "clicks", "triggerInterval": "30s"}]}, {"logLevel": "ERROR"},
])
RESTART_CHANGES = st.sampled_from([
    {"image": "img:2"}, {"imagePullPolicy": "Always"}, {"imagePullSecrets": ["regcred"]}, {"pipelines": {"configMapRef": {"name": "p"}}},
    {"sparkConf": {"spark.sql.shuffle.partitions": "64"}}, {"settings": {"reconcile_interval": "20s"}}, {"driver__memory": "4g"},
    {"driver__podLabels": {"team": "a"}}, {"executor__cores": 4}, {"executor__nodeSelector": {"pool": "spot"}},
    {"scaling__initialExecutors": 3}, {"scaling__requestTimeout": "1m"}, {"scaling__policy__name": "reactive"},
    {"http": {"tokenSecretRef": {"name": "t"}}},
])


@settings(max_examples=60, deadline=None)
@given(st.lists(CONTROL_CHANGES, min_size=1, max_size=4))
def test_control_changes_never_move_the_restart_hash(changes):
    merged = {k: v for change in changes for k, v in change.items()}
    assert restart_hash(changed(**merged), SETTINGS) == restart_hash(BASE, SETTINGS)


@settings(max_examples=40, deadline=None)
@given(RESTART_CHANGES)
def test_every_restart_change_moves_the_restart_hash(change):
    assert restart_hash(changed(**change), SETTINGS) != restart_hash(BASE, SETTINGS)


def test_the_operators_pod_settings_move_the_hash_and_its_other_settings_do_not():
    other = OperatorSettings(app_defaults=AppDefaults(request_timeout="10m"))
    assert restart_hash(BASE, other) != restart_hash(BASE, SETTINGS)
    assert restart_hash(BASE, OperatorSettings(workers=8, resync_interval="1m")) == restart_hash(BASE, SETTINGS)
    assert restart_hash(BASE, SETTINGS).startswith("sha256:") and len(restart_hash(BASE, SETTINGS)) == 71


def test_classes_are_closed():
    assert set(FIELDS.values()) == set(ChangeClass)
