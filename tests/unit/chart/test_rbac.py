"""RBAC and the other places where the chart and the operator must agree.

Every call the operator makes (``tests/unit/k8s/api_calls.py``, each checked against the real
client's HTTP request) is allowed by the Role the chart renders, and every rule of that Role is
used by some call: no permission is missing, none is spare. This is a consistency check, not an
authorizer: the real check is ``kubectl auth can-i`` on a cluster (hack/e2e-kind.sh).
"""

from __future__ import annotations

import base64
from pathlib import Path

import helm_python
import pytest
import yaml

from autoscaler.operator.changes import restart_hash
from autoscaler.operator.children import desired_children, executor_pod_template
from autoscaler.operator.daemon_client import token_from_file
from autoscaler.operator.settings import OperatorSettingsError, load_operator_settings
from tests.unit.chart.render import NAMESPACE, of_kind, render
from tests.unit.k8s.api_calls import DAEMON_CALLS, OPERATOR_CALLS
from tests.unit.operator.samples import ref_of, sample, spec_of

DEFAULT = render({"namespaces": ["analytics"]})

# reviewed: widening any of these must show in review
OPERATOR_RULES = [
    (["streaming.sparkautoscaler.io"], ["sparkstreamingapps"], ["list", "watch"]),
    (["streaming.sparkautoscaler.io"], ["sparkstreamingapps/status"], ["patch"]),
    (["apps"], ["statefulsets"], ["get", "create", "patch"]),
    ([""], ["configmaps", "services"], ["create", "patch"]),
    ([""], ["pods"], ["get"]),
    ([""], ["events"], ["get", "create", "patch"]),
]
LEASE_RULES = [
    (["coordination.k8s.io"], ["leases"], ["create"], None),
    (["coordination.k8s.io"], ["leases"], ["get", "update"], ["sa-spark-autoscaler-operator"]),
]
# Spark's Kubernetes backend in client mode (its allocator and lifecycle manager) plus the daemon
DRIVER_RULES = [
    ([""], ["pods"], ["get", "list", "watch", "create", "patch", "delete", "deletecollection"]),
    ([""], ["configmaps"], ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]),
]


def role(objs, name, namespace="analytics"):
    [r] = [r for r in of_kind(objs, "Role") if r["metadata"]["name"] == name and r["metadata"]["namespace"] == namespace]
    return r["rules"]


def allows(rules, group, resource, verb, name=None):
    return [i for i, r in enumerate(rules) if group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
            and (not r.get("resourceNames") or name in r["resourceNames"])]


def test_the_operators_role_is_the_reviewed_allow_list():
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in role(DEFAULT, "sa-spark-autoscaler-operator")] == OPERATOR_RULES
    lease = role(DEFAULT, "sa-spark-autoscaler-operator-leader-election", NAMESPACE)
    assert [(r["apiGroups"], r["resources"], r["verbs"], r.get("resourceNames")) for r in lease] == LEASE_RULES


def test_the_operator_never_touches_secrets_or_deletes():
    for objs in (DEFAULT, render({"namespaces": ["a", "b"], "driver": {"rbac": {"persistentVolumeClaims": True}}})):
        for r in of_kind(objs, "Role"):
            if "operator" in r["metadata"]["name"]:
                assert not any("secrets" in rule["resources"] or {"delete", "deletecollection", "*"} & set(rule["verbs"]) for rule in r["rules"])


def test_every_operator_call_is_allowed_and_every_rule_is_used():
    app_rules = role(DEFAULT, "sa-spark-autoscaler-operator")
    lease_rules = role(DEFAULT, "sa-spark-autoscaler-operator-leader-election", NAMESPACE)
    used_app, used_lease = set(), set()
    for call in OPERATOR_CALLS:
        group, resource, verb = call.rbac
        # a server-side apply that creates its object is authorized as create (201), else as patch
        verbs = ["create"] if call.status == 201 and call.method == "PATCH" else [verb]
        for v in verbs:
            if resource == "leases":
                matched = allows(lease_rules, group, resource, v, "sa-spark-autoscaler-operator" if call.method != "POST" else None)
                used_lease.update(matched)
            else:
                matched = allows(app_rules, group, resource, v)
                used_app.update(matched)
            assert matched, f"{call.id}: {v} {group or 'core'}/{resource} is not allowed by the operator's Role"
    assert used_app == set(range(len(app_rules))) and used_lease == set(range(len(lease_rules)))
    used_verbs = {(r, v) for i in used_app for r in app_rules[i]["resources"] for v in app_rules[i]["verbs"]}
    needed = {(c.rbac[1], "create" if (c.status == 201 and c.method == "PATCH") else c.rbac[2]) for c in OPERATOR_CALLS if c.rbac[1] != "leases"}
    assert used_verbs == needed, "a verb of the Role no call needs (or the reverse)"


def test_the_driver_role_allows_the_daemons_calls_and_sparks_reviewed_needs():
    rules = role(DEFAULT, "sa-spark-autoscaler-driver")
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in rules] == DRIVER_RULES
    for call in DAEMON_CALLS:
        assert allows(rules, *call.rbac), call.id
    optional = role(render({"namespaces": ["analytics"], "driver": {"rbac": {"persistentVolumeClaims": True, "readQuota": True}}}),
                    "sa-spark-autoscaler-driver")
    assert [r["resources"] for r in optional] == [["pods"], ["configmaps"], ["persistentvolumeclaims"], ["resourcequotas"]]


def test_executors_get_no_token_and_no_role():
    [sa] = [s for s in of_kind(DEFAULT, "ServiceAccount") if s["metadata"]["name"] == "spark-autoscaler-executor"]
    assert sa["automountServiceAccountToken"] is False
    assert not [b for b in of_kind(DEFAULT, "RoleBinding") if any(s["name"] == "spark-autoscaler-executor" for s in b["subjects"])]


# --- the chart and the operator agree ------------------------------------------------------------------


def operator_config(objs) -> str:
    [cm] = [c for c in of_kind(objs, "ConfigMap") if "operator.yaml" in c.get("data", {})]
    return cm["data"]["operator.yaml"]


@pytest.mark.parametrize("values", [{}, {"namespaces": ["a", "b"], "operator": {"workers": 8, "leaderElection": {"enabled": False}}}],
                         ids=["defaults", "changed"])
def test_the_operator_reads_the_configuration_the_chart_renders(tmp_path: Path, values):
    path = tmp_path / "operator.yaml"
    path.write_text(operator_config(render(values)))
    settings = load_operator_settings(path)
    assert settings.namespaces == values.get("namespaces", ["default"])
    assert settings.leader_election.lease_name == "sa-spark-autoscaler-operator"
    assert settings.daemon.token_secret == "spark-autoscaler-control-token"
    assert settings.driver_service_account == "spark-autoscaler-driver"


@pytest.mark.parametrize("election", [
    pytest.param({"enabled": False, "leaseDuration": 5, "renewDeadline": 10}, id="off-lease-shorter"),
    pytest.param({"enabled": False, "renewDeadline": 2, "retryPeriod": 2}, id="off-deadline-too-short"),
    pytest.param({"enabled": True, "leaseDuration": 5, "renewDeadline": 10}, id="on-lease-shorter"),
    pytest.param({"enabled": True, "renewDeadline": 2, "retryPeriod": 2}, id="on-deadline-too-short"),
    pytest.param({"enabled": True, "leaseDuration": 20, "renewDeadline": 15, "retryPeriod": 3}, id="on-good"),
    pytest.param({"enabled": True, "leaseDuration": 3600, "renewDeadline": 3599, "retryPeriod": 2}, id="on-longest"),
])
def test_the_chart_renders_exactly_the_leader_elections_the_operator_starts_with(tmp_path: Path, election):
    try:
        text = operator_config(render({"operator": {"leaderElection": election}}))
    except helm_python.HelmRenderError:
        text = None
    path = tmp_path / "operator.yaml"
    path.write_text(text or yaml.safe_dump({"leaderElection": election}))
    try:
        load_operator_settings(path)
        starts = True
    except OperatorSettingsError:
        starts = False
    assert (text is not None) == starts


def test_the_operator_finds_its_token_in_the_charts_secret(tmp_path: Path):
    [secret] = [s for s in of_kind(DEFAULT, "Secret") if s["metadata"]["namespace"] == NAMESPACE]
    (tmp_path / "tokens").write_bytes(base64.b64decode(secret["data"]["tokens"]))
    assert token_from_file(tmp_path / "tokens", "k8s-operator")() is not None


def labels_match(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_the_network_policies_and_monitors_select_the_pods_the_operator_makes():
    app = sample()
    spec = spec_of(app)
    objs = {o["kind"]: o for o in desired_children(ref_of(app), spec, load_operator_settings(), restart_hash(spec, load_operator_settings()))}
    daemon_pod = objs["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    executor_pod = executor_pod_template(ref_of(app), spec, load_operator_settings())["metadata"]["labels"]
    chart = render({"namespaces": ["analytics"], "metrics": {"serviceMonitor": {"enabled": True}}})
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(chart, "NetworkPolicy")}
    assert labels_match(policies["sa-spark-autoscaler-daemons"]["podSelector"], daemon_pod)
    assert labels_match(policies["sa-spark-autoscaler-executors"]["podSelector"], executor_pod)
    ingress = policies["sa-spark-autoscaler-daemons"]["ingress"]
    assert labels_match(ingress[0]["from"][0]["podSelector"], executor_pod)
    ports = {p["name"]: p["containerPort"] for p in objs["StatefulSet"]["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["port"] for p in ingress[0]["ports"]} == {ports["driver-rpc"], ports["blockmanager"]}
    assert {p["port"] for p in ingress[1]["ports"]} == {ports["http"]}
    [monitor] = [m for m in of_kind(chart, "ServiceMonitor") if m["metadata"]["name"].endswith("-daemons")]
    service = objs["Service"]
    assert labels_match(monitor["spec"]["selector"], service["metadata"]["labels"])
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_the_daemons_run_as_the_charts_service_accounts():
    app = sample()
    spec = spec_of(app)
    settings = load_operator_settings()
    pod = [o for o in desired_children(ref_of(app), spec, settings, restart_hash(spec, settings)) if o["kind"] == "StatefulSet"][0]
    names = {s["metadata"]["name"] for s in of_kind(DEFAULT, "ServiceAccount")}
    assert pod["spec"]["template"]["spec"]["serviceAccountName"] in names
    conf = yaml.safe_load([o for o in desired_children(ref_of(app), spec, settings, restart_hash(spec, settings))
                           if o["metadata"]["name"].endswith("-config")][0]["data"]["autoscaler.yaml"])["spark"]["conf"]
    assert conf["spark.kubernetes.authenticate.executor.serviceAccountName"] in names
