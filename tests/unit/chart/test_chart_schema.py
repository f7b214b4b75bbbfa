"""Bad values are refused by the chart's schema (and its template checks), each message naming
the value."""

from __future__ import annotations

import helm_python
import pytest

from tests.unit.chart.render import CHART, render


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
    ],
)
def test_bad_values_are_refused_naming_them(values, message):
    with helm_python.Chart.load(str(CHART)) as chart:
        with pytest.raises(helm_python.HelmValuesError) as info:
            chart.validate_schema(chart.merge_values(values))
    assert message in str(info.value)
    report = helm_python.lint(str(CHART), values, strict=True, kube_version="v1.29.0")
    assert any(message in m["error"] for m in report["messages"] if m["severity"] == 3), report


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
        pytest.param({"apps": [{"name": "a", "namespace": "other", "spec": {}}]},
                     'apps[0].namespace "other" is not in namespaces (default): the operator would not see it', id="app-outside"),
    ],
)
def test_what_a_schema_cannot_say_fails_the_render_naming_it(values, message):
    with pytest.raises(helm_python.HelmRenderError) as info:
        render(values)
    assert message in str(info.value)
