"""Bad values are refused by the chart's schema (and its template checks), each message naming
the value."""

from __future__ import annotations

import json
from functools import cache

import helm_python
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.core.settings import parse_duration
from autoscaler.operator.model import APP_NAME, DURATION, MAX_APP_NAME, OPERATOR_ENV, OWNED_PIPELINE_SETTINGS, OWNED_SETTINGS, OWNED_SPARK_CONF, parse_spec
from autoscaler.operator.settings import load_operator_settings
from tests.unit.chart.render import CHART, of_kind, render, values_of
from tests.unit.operator.specs import SPECS

APP_SPEC = {"image": "registry.example.com/clicks:1.0", "pipelines": {"module": "clicks.pipelines"}, "checkpointRoot": "s3a://ck/clicks"}


def test_the_values_passed_through_to_kubernetes_have_kubernetes_schemas():
    from tests.unit.chart.kube_schemas import with_kubernetes_schemas

    assert chart_schema() == with_kubernetes_schemas(chart_schema()), (
        "python -m tests.unit.chart.kube_schemas --write-values-schema"
    )


def test_the_schema_of_an_apps_spec_is_the_crds():
    from tests.unit.operator.crdcheck import values_spec_schema

    assert chart_schema()["properties"]["apps"]["items"]["properties"]["spec"] == values_spec_schema(), (
        "the CRD changed: python -m tests.unit.operator.crdcheck --write-values-schema"
    )


@pytest.mark.parametrize(
    "values, message",
    [
        pytest.param({"operatr": {}}, "- at '': additional properties 'operatr' not allowed", id="unknown-top-level-key"),
        pytest.param({"operator": {"replicas": 0}}, "- at '/operator/replicas': minimum: got 0, want 1", id="no-replicas"),
        pytest.param({"namespaces": "default"}, "- at '/namespaces': got string, want array", id="namespaces-not-a-list"),
        pytest.param({"namespaces": ["Bad_NS"]}, "- at '/namespaces/0': 'Bad_NS' does not match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
                     id="bad-namespace"),
        pytest.param({"namespaces": []}, "- at '/namespaces': minItems: got 0, want 1", id="no-namespace"),
        pytest.param({"metrics": {"prometheusRule": {"enabled": "yes"}}}, "- at '/metrics/prometheusRule/enabled': got string, want boolean",
                     id="flag-as-text"),
        pytest.param({"image": {"pullPolicy": "Sometimes"}}, "- at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'",
                     id="pull-policy"),
        pytest.param({"metrics": {"serviceMonitor": {"interval": 30}}}, "- at '/metrics/serviceMonitor/interval': got number, want string",
                     id="interval-as-number"),
        pytest.param({"operator": {"resyncInterval": "soon"}}, "- at '/operator/resyncInterval': 'soon' does not match pattern", id="bad-duration"),
        pytest.param({"image": {"digest": "sha256:abc"}}, "- at '/image/digest': 'sha256:abc' does not match pattern", id="bad-digest"),
        pytest.param({"networkPolicy": {"egress": {"apiServerCIDRs": ["10.0.0.1"]}}}, "- at '/networkPolicy/egress/apiServerCIDRs/0'",
                     id="cidr-without-prefix"),
        pytest.param({"operator": {"leaderElection": {"leaseDurationn": 10}}}, "- at '/operator/leaderElection': additional properties 'leaseDurationn' not allowed",
                     id="typo-deep-down"),
        # the daemon's parse_duration takes each unit once, the largest first: the operator refused these at start
        pytest.param({"operator": {"resyncInterval": "30s30s"}}, "at '/operator/resyncInterval': '30s30s' does not match pattern",
                     id="unit-repeated"),
        pytest.param({"operator": {"daemonTimeout": "1s1h"}}, "at '/operator/daemonTimeout': '1s1h' does not match pattern", id="units-ascending"),
        pytest.param({"appDefaults": {"requestTimeout": "5m5m"}}, "at '/appDefaults/requestTimeout': '5m5m' does not match pattern",
                     id="minutes-repeated"),
        pytest.param({"appDefaults": {"resourceWaitTimeout": "5s1m"}}, "at '/appDefaults/resourceWaitTimeout': '5s1m' does not match pattern",
                     id="seconds-before-minutes"),
        pytest.param({"operator": {"watchTimeout": ""}}, "at '/operator/watchTimeout': minLength: got 0, want 1", id="empty-duration"),
        pytest.param({"metrics": {"serviceMonitor": {"scrapeTimeout": "10s5m"}}}, "at '/metrics/serviceMonitor/scrapeTimeout': '10s5m' does not match pattern",
                     id="scrape-units-ascending"),
        pytest.param({"metrics": {"serviceMonitor": {"interval": "1.5m"}}}, "at '/metrics/serviceMonitor/interval': '1.5m' does not match pattern",
                     id="scrape-fraction"),  # Prometheus takes whole numbers only
        pytest.param({"metrics": {"serviceMonitor": {"interval": "0s"}}}, "at '/metrics/serviceMonitor/interval': '0s' does not match pattern '[1-9]'",
                     id="scrape-interval-zero"),
        # a million rendered as 1e+06, which the operator cannot read
        pytest.param({"operator": {"leaderElection": {"leaseDuration": 1000000}}},
                     "- at '/operator/leaderElection/leaseDuration': maximum: got 1×10⁰⁶, want 3,600", id="lease-of-a-million-seconds"),
        pytest.param({"operator": {"leaderElection": {"retryPeriod": 3601}}},
                     "- at '/operator/leaderElection/retryPeriod': maximum: got 3,601, want 3,600", id="retry-beyond-an-hour"),
        # object names and labels are made of them
        pytest.param({"nameOverride": "Bad_Name"}, "- at '/nameOverride': 'Bad_Name' does not match pattern '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
                     id="bad-name-override"),
        pytest.param({"fullnameOverride": "sa.prod"}, "- at '/fullnameOverride': 'sa.prod' does not match pattern", id="dotted-fullname"),
        pytest.param({"nameOverride": "n" * 64}, "- at '/nameOverride': maxLength: got 64, want 63", id="name-beyond-a-label"),
        pytest.param({"fullnameOverride": "f" * 55}, "- at '/fullnameOverride': maxLength: got 55, want 54", id="no-room-for-operator"),
        # the operator's configuration would hold a null service account: it refused to start
        pytest.param({"driver": {"serviceAccount": {"name": ""}}}, "- at '/driver/serviceAccount/name': minLength: got 0, want 1", id="no-driver-account"),
        pytest.param({"executor": {"serviceAccount": {"name": ""}}}, "- at '/executor/serviceAccount/name': minLength: got 0, want 1",
                     id="no-executor-account"),
        # 0 fails every daemon call, spins the resync loop, gives up every executor request at once
        pytest.param({"operator": {"daemonTimeout": "0s"}}, "at '/operator/daemonTimeout': '0s' does not match pattern '[1-9]'", id="no-daemon-timeout"),
        pytest.param({"operator": {"resyncInterval": "0h0m"}}, "at '/operator/resyncInterval': '0h0m' does not match pattern '[1-9]'",
                     id="no-resync-interval"),
        pytest.param({"appDefaults": {"requestTimeout": "0.0s"}}, "at '/appDefaults/requestTimeout': '0.0s' does not match pattern '[1-9]'",
                     id="no-request-timeout"),
        # an app's spec, checked by the CRD's own schema: Helm applies the custom resources after
        # the chart's other objects, so one the API server refused left the release half applied,
        # and a misspelt field was pruned (the app ran on the default)
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "scaling": {"maxExecutor": 3}}}]},
                     "- at '/apps/0/spec/scaling': additional properties 'maxExecutor' not allowed", id="app-spec-typo"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "executor": {"cores": "two"}}}]},
                     "- at '/apps/0/spec/executor/cores': got string, want integer", id="app-spec-wrong-type"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {"image": "x:1"}}]},
                     "- at '/apps/0/spec': missing properties 'pipelines', 'checkpointRoot'", id="app-spec-incomplete"),
        # each rendered, passed kubernetes-validate, and failed the install at the API server,
        # after Helm had created the other objects
        pytest.param({"operator": {"resources": {"requests": {"memory": "128MB"}}}},
                     "- at '/operator/resources/requests/memory': '128MB' does not match pattern", id="quantity-in-megabytes"),
        pytest.param({"operator": {"resources": {"limits": {"memory": "-1Gi"}}}},
                     "- at '/operator/resources/limits/memory': '-1Gi' does not match pattern", id="negative-quantity"),
        pytest.param({"operator": {"resources": {"requests": {"cpu": "lots"}}}},
                     "- at '/operator/resources/requests/cpu': 'lots' does not match pattern", id="quantity-in-words"),
        pytest.param({"operator": {"resources": {"request": {"cpu": "1"}}}},
                     "- at '/operator/resources': additional properties 'request' not allowed", id="resources-typo"),
        # each rendered an image no runtime pulls (InvalidImageName), or another image than asked
        pytest.param({"image": {"repository": "spark-autoscaler:1.0"}},
                     "- at '/image/repository': 'spark-autoscaler:1.0' does not match pattern", id="tag-in-the-repository"),
        pytest.param({"image": {"registry": "ghcr.io/"}}, "- at '/image/registry': 'ghcr.io/' does not match pattern", id="registry-trailing-slash"),
        pytest.param({"image": {"registry": "https://ghcr.io"}}, "- at '/image/registry': 'https://ghcr.io' does not match pattern", id="registry-url"),
        pytest.param({"image": {"tag": "1.0 #rc"}}, "- at '/image/tag': '1.0 #rc' does not match pattern", id="tag-read-as-a-comment"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "image": "clicks:1.0 beta"}}]},
                     "- at '/apps/0/spec/image': 'clicks:1.0 beta' does not match pattern", id="app-image-with-a-space"),
        # Helm reads numbers as float64: 9007199254740993 rendered as ...992, a rate limit other than the one written
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "queries": [{"name": "q", "maxRowsPerBatch": 2**53 + 1}]}}]},
                     "- at '/apps/0/spec/queries/0/maxRowsPerBatch': maximum: got 9.007199254740992×10¹⁵, want 9.007199254740991×10¹⁵", id="rate-limit-beyond-float64"),
        # labels, names and networks the API server refuses at install, after the rest of the release
        pytest.param({"commonLabels": {"team": "data eng"}}, "- at '/commonLabels/team': 'data eng' does not match pattern", id="label-value-with-a-space"),
        pytest.param({"operator": {"podLabels": {"bad key!": "x"}}}, "- at '/operator/podLabels': additional properties 'bad key!' not allowed", id="bad-label-key"),
        pytest.param({"operator": {"podAnnotations": {"bad key!": "x"}}}, "- at '/operator/podAnnotations': additional properties 'bad key!' not allowed",
                     id="bad-annotation-key"),
        pytest.param({"operator": {"priorityClassName": "High Prio"}}, "- at '/operator/priorityClassName': 'High Prio' does not match pattern",
                     id="bad-priority-class"),
        pytest.param({"appDefaults": {"driverPriorityClassName": "Bad_Name"}}, "- at '/appDefaults/driverPriorityClassName': 'Bad_Name' does not match pattern",
                     id="bad-driver-priority-class"),
        pytest.param({"networkPolicy": {"egress": {"apiServerCIDRs": ["999.1.1.1/32"]}}}, "- at '/networkPolicy/egress/apiServerCIDRs/0': '999.1.1.1/32' does not match pattern",
                     id="cidr-beyond-ipv4"),
        pytest.param({"networkPolicy": {"egress": {"apiServerCIDRs": ["10.0.0.0/33"]}}}, "- at '/networkPolicy/egress/apiServerCIDRs/0': '10.0.0.0/33' does not match pattern",
                     id="prefix-beyond-ipv4"),
        # an API server that drops unknown fields would keep namespaceSelector: {}, every namespace
        pytest.param({"networkPolicy": {"prometheus": {"namespaceSelector": {"matchLabel": {"a": "b"}}}}},
                     "- at '/networkPolicy/prometheus/namespaceSelector': additional properties 'matchLabel' not allowed", id="selector-typo"),
        pytest.param({"metrics": {"grafanaDashboard": {"label": "grafana dashboard"}}}, "- at '/metrics/grafanaDashboard/label': 'grafana dashboard' does not match pattern",
                     id="dashboard-label-key"),
        # placement the API server refused at install
        pytest.param({"operator": {"tolerations": [{"key": "spot", "effect": "NoScheduel"}]}},
                     "- at '/operator/tolerations/0/effect': value must be one of 'NoSchedule', 'PreferNoSchedule', 'NoExecute', ''", id="toleration-effect-typo"),
        pytest.param({"operator": {"affinity": {"nodeAfinity": {}}}}, "- at '/operator/affinity': additional properties 'nodeAfinity' not allowed",
                     id="affinity-typo"),
        # the values passed through to Kubernetes objects, checked by Kubernetes' own schemas
        # (tests/unit/chart/kube_schemas.py): free objects before, a typo rendered and the API
        # server dropped the field or refused the object after the rest of the release
        pytest.param({"podSecurityContext": {"runAsNonroot": True}}, "- at '/podSecurityContext': additional properties 'runAsNonroot' not allowed",
                     id="pod-security-context-typo"),
        pytest.param({"securityContext": {"readOnlyRootFileSystem": True}}, "- at '/securityContext': additional properties 'readOnlyRootFileSystem' not allowed",
                     id="security-context-typo"),
        pytest.param({"securityContext": {"runAsUser": "185"}}, "- at '/securityContext/runAsUser': got string, want null or integer", id="run-as-user-text"),
        pytest.param({"securityContext": {"capabilities": {"drops": ["ALL"]}}}, "- at '/securityContext/capabilities': additional properties 'drops' not allowed",
                     id="capabilities-typo"),
        pytest.param({"operator": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerm": []}}}}},
                     "- at '/operator/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution': missing property 'nodeSelectorTerms'",
                     id="node-affinity-typo"),
        pytest.param({"driver": {"rbac": {"extraRules": [{"apiGroup": [""], "resources": ["pods"], "verbs": ["get"]}]}}},
                     "- at '/driver/rbac/extraRules/0': additional properties 'apiGroup' not allowed", id="rbac-rule-typo"),
        pytest.param({"driver": {"rbac": {"extraRules": [{"apiGroups": [""], "resources": ["pods"]}]}}},
                     "- at '/driver/rbac/extraRules/0': missing property 'verbs'", id="rbac-rule-without-verbs"),
        pytest.param({"networkPolicy": {"enabled": True, "extraDaemonIngress": [{"form": [{"podSelector": {}}]}]}},
                     "- at '/networkPolicy/extraDaemonIngress/0': additional properties 'form' not allowed", id="ingress-rule-typo"),
        pytest.param({"networkPolicy": {"egress": {"extraRules": [{"ports": [{"prot": 5432}]}]}}},
                     "- at '/networkPolicy/egress/extraRules/0/ports/0': additional properties 'prot' not allowed", id="egress-port-typo"),
        pytest.param({"operator": {"topologySpreadConstraints": [{"maxSkew": 1}]}},
                     "- at '/operator/topologySpreadConstraints/0': missing properties 'topologyKey', 'whenUnsatisfiable'", id="spread-incomplete"),
    ],
)
def test_bad_values_are_refused_naming_them(values, message):
    with helm_python.Chart.load(str(CHART)) as chart:
        with pytest.raises(helm_python.HelmValuesError) as info:
            chart.validate_schema(chart.merge_values(values))
    assert message in str(info.value)
    report = helm_python.lint(str(CHART), values, strict=True, kube_version="v1.29.0")
    assert any(message in m["error"] for m in report["messages"] if m["severity"] == 3), report


def test_the_longest_full_name_keeps_every_object_name_whole():
    objs = render({"fullnameOverride": "f" * 54})
    assert any(o["metadata"]["name"] == "f" * 54 + "-operator" for o in objs if o["kind"] == "Service")


def test_values_for_a_parent_chart_are_accepted():
    with helm_python.Chart.load(str(CHART)) as chart:
        assert chart.validate_schema(chart.merge_values({"global": {"imageRegistry": "x"}})) is None


@pytest.mark.parametrize(
    "values, message",
    [
        pytest.param({"operator": {"leaderElection": {"leaseDuration": 15, "renewDeadline": 15}}},
                     "operator.leaderElection: leaseDuration (15) must exceed renewDeadline (15)", id="lease-not-longer"),
        pytest.param({"operator": {"leaderElection": {"renewDeadline": 2, "retryPeriod": 2}}},
                     "operator.leaderElection: renewDeadline (2) must exceed 1.2 x retryPeriod (2)", id="deadline-too-short"),
        pytest.param({"operator": {"replicas": 2, "leaderElection": {"enabled": False}}},
                     "operator.replicas is 2 but operator.leaderElection.enabled is false", id="two-operators-without-election"),
        pytest.param({"apps": [{"name": "a", "namespace": "other", "spec": APP_SPEC}]},
                     'apps[0].namespace "other" is not in namespaces (default): the operator would not see it', id="app-outside"),
        # one name twice: one SparkStreamingApp silently won, or the install failed half-applied
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": APP_SPEC}, {"name": "a", "namespace": "default", "spec": APP_SPEC}]},
                     "apps[1]: default/a is apps[0] already: one SparkStreamingApp would overwrite the other", id="app-twice"),
        # the CRD's cross-field rules: the API server refused the app after the operator was installed
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "scaling": {"minExecutors": 5, "maxExecutors": 2}}}]},
                     "apps[0].spec.scaling: minExecutors (5) must not exceed maxExecutors (2)", id="app-bounds-crossed"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "pipelines": {"module": "m", "configMapRef": {"name": "x"}}}}]},
                     "apps[0].spec.pipelines: set exactly one of pipelines.module and pipelines.configMapRef", id="app-two-pipeline-sources"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "pipelines": {}}}]},
                     "apps[0].spec.pipelines: set exactly one of pipelines.module and pipelines.configMapRef", id="app-no-pipeline-source"),
        pytest.param({"operator": {"resyncInterval": "99999999h"}},
                     'operator.resyncInterval: duration must be at most 3650d (about ten years), got "99999999h"', id="duration-too-long"),
        pytest.param({"appDefaults": {"requestTimeout": "87600h1ms"}},  # 3650d and a millisecond
                     'appDefaults.requestTimeout: duration must be at most 3650d (about ten years), got "87600h1ms"', id="duration-just-too-long"),
        pytest.param({"metrics": {"serviceMonitor": {"interval": "3651d"}}},
                     'metrics.serviceMonitor.interval: duration must be at most 3650d (about ten years), got "3651d"', id="scrape-too-long"),
        # the operator's watch takes whole seconds: under 1 s it was sent as 0, the API server's own default
        pytest.param({"operator": {"watchTimeout": "999ms"}}, 'operator.watchTimeout: must be at least 1s', id="watch-under-a-second"),
        pytest.param({"operator": {"watchTimeout": "0s"}}, 'operator.watchTimeout: must be at least 1s', id="no-watch-timeout"),
        # more than 0 was not enough: a 10 us resync spins, a 0.5 ms daemon call always times out
        pytest.param({"operator": {"resyncInterval": "0.01ms"}}, 'operator.resyncInterval: must be at least 1s (less spins the resync loop), got "0.01ms"',
                     id="resync-spinning"),
        pytest.param({"operator": {"daemonTimeout": "0.5ms"}}, 'operator.daemonTimeout: must be at least 100ms', id="daemon-timeout-too-short"),
        # the API server refused the operator's Deployment after the rest of the release was applied
        pytest.param({"operator": {"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "256Mi"}}}},
                     "operator.resources: requests.memory (1Gi) must not exceed limits.memory (256Mi)", id="request-above-limit"),
        pytest.param({"operator": {"resources": {"requests": {"cpu": 2}, "limits": {"cpu": "1500m"}}}},
                     "operator.resources: requests.cpu (2) must not exceed limits.cpu (1500m)", id="request-above-limit-other-units"),
        # the operator and the drivers could not reach the API server: nothing worked, and nothing said why
        pytest.param({"networkPolicy": {"egress": {"enabled": True}}},
                     "networkPolicy.egress.enabled needs networkPolicy.egress.apiServerCIDRs", id="egress-without-the-api-server"),
        # the CRD keys queries by name: the API server refused the app after the operator was installed
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "queries": [{"name": "q"}, {"name": "q", "maxRowsPerBatch": 5}]}}]},
                     'apps[0].spec.queries[1]: query "q" is queries[0] already', id="app-query-twice"),
        # the operator's own checks: the app was created and then refused in its status only
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "scaling": {"minExecutors": 9}}}]},
                     "apps[0].spec.scaling: minExecutors (9) exceeds the daemon's default maxExecutors (8): set maxExecutors too", id="app-min-above-default-max"),
        pytest.param({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "scaling": {"maxExecutors": 4, "manualExecutors": 10}}}]},
                     "apps[0].spec.scaling: manualExecutors (10) must lie within minExecutors and maxExecutors, [1, 4]", id="app-manual-outside"),
        # a key twice in the rendered labels: the last won, and the pods left the Deployment's selector
        pytest.param({"commonLabels": {"app.kubernetes.io/name": "other"}}, "commonLabels: app.kubernetes.io/name is a label the chart sets",
                     id="common-label-the-chart-sets"),
        pytest.param({"operator": {"podLabels": {"app.kubernetes.io/component": "x"}}}, "operator.podLabels: app.kubernetes.io/component is a label the chart sets",
                     id="pod-label-the-chart-sets"),
        # the operator's own tolerations as the API server takes them (the apps' pods' rules):
        # refused with its Deployment's pods, after the rest of the release was applied
        pytest.param({"operator": {"tolerations": [{"key": "spot", "operator": "Exists"}, {"effect": "NoSchedule"}]}},
                     "operator.tolerations.1: operator must be Exists when key is empty", id="operator-toleration-without-key"),
        pytest.param({"operator": {"tolerations": [{"key": "spot", "effect": "NoSchedule", "tolerationSeconds": 300}]}},
                     "operator.tolerations.0: effect must be NoExecute when tolerationSeconds is set (only NoExecute evicts), got 'NoSchedule'",
                     id="operator-toleration-seconds-without-noexecute"),
        pytest.param({"operator": {"tolerations": [{"key": "spot", "operator": "Exists", "value": "yes"}]}},
                     "operator.tolerations.0: value must be empty when operator is Exists, got 'yes'", id="operator-toleration-exists-with-value"),
    ],
)
def test_what_a_schema_cannot_say_fails_the_render_naming_it(values, message):
    with pytest.raises(helm_python.HelmRenderError) as info:
        render(values)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "scaling",
    [{"minExecutors": 8}, {"minExecutors": 9}, {"initialExecutors": 0}, {"minExecutors": 0, "initialExecutors": 0}, {"initialExecutors": 9},
     {"maxExecutors": 20, "initialExecutors": 12}, {"maxExecutors": 4, "manualExecutors": 5}, {"minExecutors": 2, "manualExecutors": 1},
     {"minExecutors": 3, "maxExecutors": 20, "initialExecutors": 3, "manualExecutors": 20}],
    ids=lambda scaling: ",".join(f"{k}={v}" for k, v in scaling.items()),
)
def test_the_chart_refuses_exactly_the_executor_counts_the_operator_refuses(scaling):
    # the chart writes the daemon's default bounds (ExecutorSettings) as numbers: a change of
    # them, or of the operator's rule, shows here
    from autoscaler.operator.model import parse_spec

    _, errors = parse_spec({**APP_SPEC, "scaling": scaling})
    try:
        render({"apps": [{"name": "a", "namespace": "default", "spec": {**APP_SPEC, "scaling": scaling}}]})
        refused = False
    except helm_python.HelmRenderError as exc:
        refused = "apps[0].spec.scaling: " in str(exc)
    assert refused == bool(errors), errors


def render_refusal(spec: dict) -> str | None:
    """Why the chart refuses an app of this spec: a template check's message, the schema's
    errors; None if it renders."""
    try:
        render({"apps": [{"name": "a", "namespace": "default", "spec": spec}]})
    except helm_python.HelmRenderError as exc:
        return str(exc).strip().splitlines()[-1].split("): ", 1)[1]  # "execution error at (<template>): <message>"
    except helm_python.HelmValuesError as exc:
        return str(exc)
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_the_chart_refuses_exactly_the_apps_the_operator_refuses(spec):
    # Helm installs an app the operator refuses all the same, and there it sits, refused in its
    # status: the render fails instead, naming the field the operator names
    _, problems = parse_spec(spec)
    refusal = render_refusal(spec)
    assert (refusal is not None) == bool(problems), (refusal, problems)
    if refusal is not None and refusal.startswith("apps[0]."):
        assert refusal.split(": ")[0] in {"apps[0]." + p.split(": ")[0] for p in problems}, (refusal, problems)


OWNED = ([{"sparkConf": {key: "x"}} for key in OWNED_SPARK_CONF] + [{"settings": {key: "x"}} for key in OWNED_SETTINGS]
         + [{"settings": {"pipelines": {key: "x"}}} for key in OWNED_PIPELINE_SETTINGS]
         + [{"driver": {"env": [{"name": name, "value": "x"}]}} for name in OPERATOR_ENV])


@pytest.mark.parametrize("change", [
    *OWNED,
    {"sparkConf": {"spark.master": "x", "spark.app.name": "y", "spark.sql.shuffle.partitions": "8"}},
    {"settings": {"state": {}, "mode": "active", "pipelines": {"checkpoint_root": "/x", "module": "m"}}},
    {"settings": {"pipelines": "clicks"}}, {"settings": {"pipelines": 5}},
    {"driver": {"env": [{"name": "B"}, {"name": "HOME"}, {"name": "B"}, {"name": "POD_IP"}]}},
    {"driver": {"env": [{"name": "B"}, {"name": "A"}, {"name": "B"}, {"name": "A"}]}},
    {"scaling": {"requestTimeout": "3651d"}}, {"queries": [{"name": "q", "triggerInterval": "2s"}, {"name": "r", "triggerInterval": "99ms"}]},
    {"queries": [{"name": "q", "triggerInterval": "1d1ms"}]}, {"queries": [{"name": "q", "triggerInterval": "0s"}]},
    {"checkpointRoot": "checkpoints"}, {"checkpointRoot": "file:checkpoints"}, {"checkpointRoot": "/mnt/ck "}, {"checkpointRoot": "file://host"},
    {"driver": {"memory": "449m"}}, {"executor": {"memory": "460799k"}}, {"executor": {"memory": "1t", "nodeSelector": {"zone": "eu west"}}},
    {"driver": {"podLabels": {"Example.com/team": "x"}}}, {"driver": {"podLabels": {"team": "x" * 64}}},
    {"driver": {"podAnnotations": {"example.com/" + "n" * 64: "any text"}}}, {"driver": {"podAnnotations": {"p" * 254 + "/note": "x"}}},
    {"driver": {"tolerations": [{"key": "spot", "operator": "Exists"}, {"effect": "NoSchedule"}]}},
    {"executor": {"tolerations": [{"key": "spot", "operator": "Exists", "value": "yes"}]}},
    {"executor": {"tolerations": [{"key": "spot pool", "effect": "NoSchedule"}]}}, {"executor": {"tolerations": [{"key": "spot", "value": "a b"}]}},
    # a time to stay where no taint evicts: the API server refused the pods (ValidateTolerations)
    {"executor": {"tolerations": [{"key": "spot", "effect": "NoSchedule", "tolerationSeconds": 60}]}},
    {"driver": {"tolerations": [{"key": "spot", "operator": "Exists", "tolerationSeconds": 60}]}},
], ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items())[:90])
def test_what_the_operator_refuses_in_a_spec_fails_the_render_in_its_words(change):
    # the chart's copies of the operator's rules and lists (templates/_helpers.tpl,
    # sa.operatorSpecChecks): a key, a name or a rule added to the model shows here
    spec = {**APP_SPEC, **change}
    _, problems = parse_spec(spec)
    assert len(problems) == 1
    assert render_refusal(spec) == "apps[0]." + problems[0]


@pytest.mark.parametrize("change", [
    {"sparkConf": {"spark.sql.shuffle.partitions": "8", "spark.kubernetes.executor.label.team": "x"}},
    {"settings": {"reconcile_interval": "10s", "pipelines": {"max_failures": 3}}}, {"settings": {"pipelines": None}},
    {"driver": {"env": [{"name": "A", "value": "1"}, {"name": "B"}], "memory": "450m"}}, {"executor": {"memory": "460800k"}},
    {"scaling": {"requestTimeout": "3650d"}}, {"queries": [{"name": "q", "triggerInterval": "100ms"}, {"name": "r", "triggerInterval": "24h"}]},
    {"checkpointRoot": "/mnt/ck"}, {"checkpointRoot": "file:///mnt/ck"}, {"checkpointRoot": "gs://bucket/ck"}, {"checkpointRoot": "hdfs:/ck"},
    {"driver": {"podLabels": {"example.com/team": "data-platform", "empty": ""}, "podAnnotations": {"p" * 253 + "/note": "any text at all"}}},
    {"driver": {"tolerations": [{"operator": "Exists"}, {"key": "example.com/dedicated", "operator": "Equal", "value": "spark", "effect": "NoSchedule"}]},
     "executor": {"tolerations": [{"key": "spot", "effect": "NoExecute", "tolerationSeconds": 300}, {"key": "gpu", "value": ""}]}},
], ids=lambda change: "-".join(f"{k}={v}" for k, v in change.items())[:90])
def test_what_the_operator_takes_in_a_spec_renders(change):
    spec = {**APP_SPEC, **change}
    assert parse_spec(spec)[1] == []
    assert render_refusal(spec) is None


@pytest.mark.parametrize("name", ["1clicks", "clicks.eu", "c" * 53])
def test_an_app_name_that_cannot_name_its_children_is_refused(name):
    # the operator names the app's Service (a DNS-1035 label) and StatefulSet after it
    # (autoscaler/operator/reconcile.py); refused only in the app's status, after the install
    name_schema = chart_schema()["properties"]["apps"]["items"]["properties"]["name"]
    assert (name_schema["pattern"], name_schema["maxLength"]) == (f"^{APP_NAME.pattern}$", MAX_APP_NAME)
    with pytest.raises(helm_python.HelmValuesError, match="/apps/0/name"):
        render({"apps": [{"name": name, "namespace": "default", "spec": APP_SPEC}]})
    render({"apps": [{"name": "c" * 52, "namespace": "default", "spec": APP_SPEC}]})


def test_values_passed_through_to_kubernetes_render_in_every_form_kubernetes_takes():
    import kubernetes_validate

    values = {
        "podSecurityContext": {"runAsNonRoot": True, "runAsUser": 185, "fsGroupChangePolicy": "OnRootMismatch", "supplementalGroups": [1000],
                               "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/strict.json"},
                               "appArmorProfile": {"type": "RuntimeDefault"}, "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}, "seLinuxOptions": {"level": "s0:c123,c456"}},
        "operator": {"affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
                "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "operator"}}}}]}}},
        "driver": {"rbac": {"extraRules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kafka"], "verbs": ["get", "watch"]}]}},
        "networkPolicy": {"enabled": True, "egress": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32"],
                                                      "extraRules": [{"to": [{"ipBlock": {"cidr": "10.2.0.0/16", "except": ["10.2.9.0/24"]}}],
                                                                      "ports": [{"port": 9092, "protocol": "TCP"}, {"port": "kafka", "endPort": None}]}]},
                          "extraDaemonIngress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "data"}}}], "ports": [{"port": 8090}]}]},
    }
    objs = render(values)
    for obj in objs:
        if obj["kind"] in ("Deployment", "Role", "ClusterRole", "NetworkPolicy"):
            kubernetes_validate.validate(obj, "1.37", strict=True)
    [deployment] = of_kind(objs, "Deployment")
    assert deployment["spec"]["template"]["spec"]["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}
    assert deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"] == values["operator"]["affinity"]["podAntiAffinity"]


def test_quantities_image_references_labels_and_networks_in_their_usual_forms_render():
    objs = render({
        "image": {"registry": "registry.example.com:5000/platform", "repository": "team/spark-autoscaler", "tag": "1.2.0-rc_1"},
        "commonLabels": {"example.com/team": "data-eng", "cost-center": ""},
        "operator": {"podAnnotations": {"example.com/note": "any text at all"}, "priorityClassName": "system-cluster-critical",
                     "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                                                    "labelSelector": {"matchLabels": {"app": "x"}}}],
                     "resources": {"requests": {"cpu": 0.5, "memory": "1Gi", "example.com/gpu": 1},
                                   "limits": {"cpu": "500m", "memory": 1073741824, "example.com/gpu": "1"}}},
        "networkPolicy": {"egress": {"enabled": True, "apiServerCIDRs": ["10.0.0.1/32", "172.20.0.0/16", "fd00::/64", "2001:db8::1/128"]},
                          "prometheus": {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["obs"]}]}}},
    })
    assert any(o["kind"] == "NetworkPolicy" for o in objs)
    objs = render({
        "image": {"registry": "registry.example.com:5000/platform", "repository": "team/spark-autoscaler", "tag": "1.2.0-rc_1"},
        "operator": {"resources": {"requests": {"cpu": 0.5, "memory": "1Gi", "example.com/gpu": 1},
                                   "limits": {"cpu": "500m", "memory": 1073741824, "example.com/gpu": "1"}}},
    })
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com:5000/platform/team/spark-autoscaler:1.2.0-rc_1"
    assert container["resources"]["limits"]["memory"] == 1073741824


def test_every_cross_field_rule_of_the_crd_is_checked_at_render_too():
    # the API server applies the CRD's CEL rules when Helm creates the app, after the operator is
    # installed: each one a rendered app can break is mirrored in the chart's checks (the cases
    # above); a transition rule (oldSelf) cannot be, an install has no old object
    import yaml

    def rules(node):
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", ()):
                yield rule["rule"]
            for value in node.values():
                yield from rules(value)
        elif isinstance(node, list):
            for value in node:
                yield from rules(value)

    crd = yaml.safe_load((CHART / "crds" / "sparkstreamingapps.yaml").read_text())
    assert {r for r in rules(crd) if "oldSelf" not in r} == {
        "has(self.module) != has(self.configMapRef)",  # app-two-pipeline-sources, app-no-pipeline-source
        "!has(self.minExecutors) || !has(self.maxExecutors) || self.minExecutors <= self.maxExecutors",  # app-bounds-crossed
    }


@cache
def chart_schema() -> dict:
    return json.loads((CHART / "values.schema.json").read_text())


DURATION_KEYS = [("operator", "resyncInterval"), ("operator", "watchTimeout"), ("operator", "daemonTimeout"),
                 ("operator", "eventsRepeatInterval"), ("appDefaults", "requestTimeout"), ("appDefaults", "resourceWaitTimeout")]
MORE_THAN_ZERO = {("operator", "resyncInterval"), ("operator", "daemonTimeout"), ("appDefaults", "requestTimeout")}
# what the chart takes is a part of what parse_duration reads: no "90", no spaces, but every unit it knows
DURATION_TEXTS = st.one_of(st.text(alphabet="0123456789.dhms", max_size=9), st.from_regex(DURATION, fullmatch=True))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(DURATION_KEYS), text=DURATION_TEXTS)
def test_a_duration_the_schema_accepts_is_one_the_operator_and_the_daemon_read(key, text):
    section, name = key
    if list(jsonschema.Draft7Validator(chart_schema()).iter_errors({section: {name: text}})):
        return
    try:
        seconds = parse_duration(text).total_seconds()
    except ValueError as exc:
        assert "at most 3650d" in str(exc)  # the render refuses those (test_what_a_schema_cannot_say...)
        return
    if (key in (("operator", "watchTimeout"), ("operator", "resyncInterval")) and seconds < 1) or (key == ("operator", "daemonTimeout") and seconds < 0.1):
        return  # the render refuses those, as the operator does (test_what_a_schema_cannot_say...)
    assert seconds > 0 or key not in MORE_THAN_ZERO


def test_the_charts_durations_are_written_as_the_crds():
    assert chart_schema()["definitions"]["duration"]["pattern"] == DURATION


@pytest.mark.parametrize("text", ["3650d", "87600h", "1.5h", "2d12h", "1h30m", "250ms"])
def test_the_operator_reads_every_duration_form_the_chart_renders(tmp_path, text):
    resync = text if parse_duration(text).total_seconds() >= 1 else "1s"  # a shorter one spins: refused
    objs = render({"operator": {"resyncInterval": resync, "daemonTimeout": text}, "appDefaults": {"requestTimeout": text}})
    [cm] = [c for c in objs if c["kind"] == "ConfigMap" and "operator.yaml" in c.get("data", {})]
    path = tmp_path / "operator.yaml"
    path.write_text(cm["data"]["operator.yaml"])
    s = load_operator_settings(path)
    assert s.daemon.timeout == s.app_defaults.request_timeout == parse_duration(text) and s.resync_interval == parse_duration(resync)


def value_paths(node: dict, prefix: tuple[str, ...] = ()):
    for key, value in node.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from value_paths(value, prefix + (key,))


def nulled(path: tuple[str, ...]) -> dict:
    values: dict = {path[-1]: None}  # Helm drops a key set to null: its default goes with it
    for key in reversed(path[:-1]):
        values = {key: values}
    return values


@pytest.mark.parametrize("path", list(value_paths(values_of(CHART / "values.yaml"))), ids=".".join)
def test_a_key_set_to_null_is_refused_by_name_or_renders_what_the_operator_reads(tmp_path, path):
    values = nulled(path)
    try:
        objs = render(values)  # no nil pointer in a template
    except helm_python.HelmValuesError as exc:
        assert f"missing property '{path[-1]}'" in str(exc)
        return
    [cm] = [c for c in objs if c["kind"] == "ConfigMap" and "operator.yaml" in c.get("data", {})]
    (tmp_path / "operator.yaml").write_text(cm["data"]["operator.yaml"])
    load_operator_settings(tmp_path / "operator.yaml")
