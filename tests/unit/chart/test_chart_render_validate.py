"""Every object the chart renders is a valid Kubernetes object (``kubernetes-validate --strict``
at three versions) with the properties this chart promises."""

from __future__ import annotations

import base64
import re

import kubernetes_validate
import pytest

from autoscaler.operator.model import parse_spec
from autoscaler.ops.auth import parse_tokens
from tests.unit.chart.render import CI_FILES, NAMESPACE, of_kind, render, values_of
from tests.unit.operator.crdcheck import problems as cr_problems

RENDERED = {p.name: render(values_of(p)) for p in CI_FILES}
OUR_CRS = {"SparkStreamingApp"}
MONITORING = {"ServiceMonitor", "PrometheusRule"}  # the prometheus-operator's: checked in test_chart_monitoring.py


@pytest.mark.parametrize("version", ["1.29", "1.33", "1.37"])
@pytest.mark.parametrize("name", sorted(RENDERED))
def test_every_built_in_object_passes_strict_validation(name, version):
    checked = 0
    for obj in RENDERED[name]:
        if obj["kind"] in OUR_CRS | MONITORING:
            continue
        kubernetes_validate.validate(obj, version, strict=True)  # any other kind without a schema fails here
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_apps_rendered_by_the_chart_pass_the_crd_and_the_operators_model(name):
    for obj in of_kind(RENDERED[name], "SparkStreamingApp"):
        assert cr_problems(obj) == []
        assert parse_spec(obj["spec"])[1] == []


def pod_specs(objs):
    for obj in objs:
        if obj["kind"] == "Deployment":
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_pods_run_non_root_with_a_read_only_root_filesystem_and_a_pinned_image(name):
    for _, spec in pod_specs(RENDERED[name]):
        assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["capabilities"]["drop"]) == (True, False, ["ALL"])
            assert re.search(r"(:[^:/]+|@sha256:[0-9a-f]{64})$", c["image"]) and not c["image"].endswith(":latest")


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_every_object_carries_the_recommended_labels(name):
    for obj in RENDERED[name]:
        labels = obj["metadata"].get("labels") or {}
        assert {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"} <= set(labels), obj["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_nothing_is_cluster_wide(name):
    assert not [o for o in RENDERED[name] if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert all(o["metadata"].get("namespace") for o in RENDERED[name])


def test_roles_are_rendered_in_the_watched_namespaces_and_the_lease_in_the_releases():
    objs = RENDERED["multi-namespace-values.yaml"]
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in of_kind(objs, "Role")}
    assert roles == {*((ns, "sa-spark-autoscaler-operator") for ns in ("analytics", "ingest", "spark-system")),
                     *((ns, "sa-spark-autoscaler-driver") for ns in ("analytics", "ingest", "spark-system")),
                     (NAMESPACE, "sa-spark-autoscaler-operator-leader-election")}


def test_one_control_token_in_every_namespace_that_the_operator_can_read():
    secrets = of_kind(RENDERED["multi-namespace-values.yaml"], "Secret")
    assert sorted(s["metadata"]["namespace"] for s in secrets) == ["analytics", "ingest", "spark-system"]
    texts = {base64.b64decode(s["data"]["tokens"]).decode() for s in secrets}
    assert len(texts) == 1
    [(token, who)] = parse_tokens(texts.pop(), "chart secret").items()
    assert who == "k8s-operator" and re.fullmatch(r"[0-9a-f]{64}", token)


def test_with_your_own_rbac_and_token_the_chart_renders_none_of_them():
    objs = RENDERED["byo-rbac-token-values.yaml"]
    assert {o["kind"] for o in objs} == {"ConfigMap", "Deployment", "Service", "NetworkPolicy"}
    [deploy] = of_kind(objs, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "platform-spark-operator"
    assert {v["name"]: v.get("secret", {}).get("secretName") for v in spec["volumes"]}["token"] == "platform-spark-control-token"


def test_the_operator_restarts_when_its_configuration_changes():
    def checksum(values):
        [deploy] = of_kind(render(values), "Deployment")
        return deploy["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) == checksum({}) != checksum({"operator": {"workers": 8}})
