"""Monitoring from the chart: the PrometheusRule and the Grafana dashboard are built from the one
copy of the files the package ships, the rules pass promtool, and the ServiceMonitor gives the
daemons the ``job`` the shipped alerts select."""

from __future__ import annotations

import json
import subprocess
import tarfile

import helm_python
import pytest
import yaml

from autoscaler.ops import assets
from autoscaler.tools.dashboard.prometheus import tool
from tests.unit.chart.render import CHART, ROOT, of_kind, prometheus_groups, render, values_of

ALL_ON = render(values_of(CHART / "ci" / "all-on-values.yaml"))


def test_the_chart_reads_the_packages_own_monitoring_files():
    """One copy: the chart's rules/ and dashboards/ are links to the package data, and the Helm
    engine follows them when it loads the chart directory (it logs each link it follows)."""
    for name in ("rules", "dashboards"):
        link = CHART / name
        assert link.is_symlink() and link.resolve() == (assets.MONITORING / name).resolve()


def test_the_packaged_chart_holds_the_files_themselves(tmp_path):
    """`helm package` (the chart users download) stores the linked files' contents."""
    archive = helm_python.package(str(CHART), destination=str(tmp_path))
    path = archive if isinstance(archive, str) else next(tmp_path.glob("*.tgz"))
    with tarfile.open(path) as tgz:
        names = set(tgz.getnames())
        rules = tgz.extractfile("spark-autoscaler/rules/alerts.yaml").read()
        dashboard = tgz.extractfile("spark-autoscaler/dashboards/spark-autoscaler.json").read()
    assert rules == (assets.RULES / "alerts.yaml").read_bytes()
    assert dashboard == (assets.MONITORING / "dashboards" / "spark-autoscaler.json").read_bytes()
    assert "spark-autoscaler/rules/rules_test.yaml" not in names and not any("/ci/" in n for n in names)  # .helmignore


def test_the_prometheus_rule_holds_exactly_the_shipped_rule_groups():
    expected = [g for name in ("alerts.yaml", "recording.yaml") for g in yaml.safe_load((assets.RULES / name).read_text())["groups"]]
    assert prometheus_groups(ALL_ON)["groups"] == expected
    [rule] = of_kind(ALL_ON, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    annotations = json.dumps(expected)
    assert "{{ $labels.query }}" in annotations or "$labels" in annotations  # Prometheus templates stay literal through Helm


def test_the_rendered_rules_pass_promtool(tmp_path):
    promtool = tool("promtool")  # fails naming Debian's prometheus package when missing
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(prometheus_groups(ALL_ON), sort_keys=False))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 13 rules found" in done.stdout


def test_the_dashboard_config_map_is_the_shipped_dashboard_for_the_grafana_sidecar():
    [cm] = [c for c in of_kind(ALL_ON, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert json.loads(cm["data"]["spark-autoscaler.json"]) == json.loads((assets.MONITORING / "dashboards" / "spark-autoscaler.json").read_text())
    assert cm["metadata"]["namespace"] == "monitoring" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Spark"}


def test_the_daemons_service_monitor_sets_the_job_the_alerts_select():
    alerts = (assets.RULES / "alerts.yaml").read_text()
    assert 'up{job="spark-autoscaler"}' in alerts
    monitors = {m["metadata"]["name"]: m for m in of_kind(ALL_ON, "ServiceMonitor")}
    daemons = monitors["sa-spark-autoscaler-daemons"]["spec"]
    assert daemons["namespaceSelector"] == {"matchNames": ["analytics", "ingest"]}
    [endpoint] = daemons["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    assert endpoint["relabelings"] == [{"targetLabel": "job", "replacement": "spark-autoscaler"}]
    assert monitors["sa-spark-autoscaler-operator"]["spec"]["endpoints"][0]["relabelings"][0]["replacement"] == "spark-autoscaler-operator"
    assert all(m["metadata"]["labels"]["release"] == "kube-prometheus-stack" for m in monitors.values())


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_monitoring_objects_are_off_by_default_and_need_no_capabilities(kind):
    assert of_kind(render({}), kind) == []  # gated on values only: an offline render cannot see API versions


def test_the_monitoring_files_are_in_the_repository_once():
    copies = [p for p in ROOT.rglob("alerts.yaml") if ".git" not in p.parts and not p.is_symlink() and "site-packages" not in p.parts]
    assert [p.relative_to(ROOT) for p in copies if p.resolve() == p] == [assets.RULES.relative_to(ROOT) / "alerts.yaml"]


def monitor_values(interval: str, timeout: str, enabled: bool = True) -> dict:
    return {"metrics": {"serviceMonitor": {"enabled": enabled, "interval": interval, "scrapeTimeout": timeout}}}


@pytest.mark.parametrize(
    "interval, timeout",
    [
        pytest.param("30s", "31s", id="a-second-longer"),
        pytest.param("5s", "10s", id="short-interval-with-the-default-timeout"),
        pytest.param("1m", "61s", id="other-units"),
        pytest.param("1m", "1m0s1ms", id="a-millisecond-longer"),
    ],
)
def test_a_scrape_timeout_longer_than_the_interval_fails_the_render_naming_both(interval, timeout):
    # Prometheus refuses a scrape_timeout greater than the scrape_interval: the ServiceMonitors rendered, and no target was scraped
    with pytest.raises(helm_python.HelmRenderError) as info:
        render(monitor_values(interval, timeout))
    assert (f'metrics.serviceMonitor.scrapeTimeout ("{timeout}") must not exceed metrics.serviceMonitor.interval ("{interval}")'
            in str(info.value))


@pytest.mark.parametrize(
    "interval, timeout",
    [
        pytest.param("30s", "10s", id="defaults"),
        pytest.param("1m", "60s", id="equal-in-other-units"),  # Prometheus takes equal; a text comparison would not
        pytest.param("1h", "59m59s999ms", id="just-under"),
        pytest.param("2m", "90s", id="seconds-past-a-minute"),
    ],
)
def test_a_scrape_timeout_within_the_interval_renders_on_every_service_monitor(interval, timeout):
    monitors = of_kind(render(monitor_values(interval, timeout)), "ServiceMonitor")
    assert len(monitors) == 2
    assert all((e["interval"], e["scrapeTimeout"]) == (interval, timeout) for m in monitors for e in m["spec"]["endpoints"])


def test_scrape_timings_are_checked_only_when_the_service_monitors_are_rendered():
    assert of_kind(render(monitor_values("5s", "10s", enabled=False)), "ServiceMonitor") == []
