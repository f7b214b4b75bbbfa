"""The chart lints and installs (client dry run) through the real Helm engine."""

from __future__ import annotations

import shutil

import helm_python
import pytest

from tests.unit.chart.render import CHART, CI_FILES, KUBE_VERSIONS, NAMESPACE, values_of


def test_there_are_ci_values_for_every_combination_we_test():
    assert [p.name for p in CI_FILES] == ["all-on-values.yaml", "byo-rbac-token-values.yaml", "default-values.yaml",
                                          "minimal-values.yaml", "multi-namespace-values.yaml"]


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values_file", CI_FILES, ids=lambda p: p.name)
def test_every_ci_values_file_lints_without_errors(values_file, kube_version):
    report = helm_python.lint(str(CHART), values_of(values_file), strict=True, kube_version=kube_version)
    assert report["errors"] == [], report["errors"]


def test_lint_reports_a_broken_template(tmp_path):
    """The tool's self-check: a template that is not YAML is an error."""
    copy = tmp_path / "spark-autoscaler"
    shutil.copytree(CHART, copy, symlinks=False)
    (copy / "templates" / "broken.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   bad: indentation\n")
    report = helm_python.lint(str(copy), {}, strict=True, kube_version="v1.29.0")
    assert report["errors"] and any(m["severity"] == 3 and m["path"] == "templates/broken.yaml" and "unable to parse YAML" in m["error"]
                                    for m in report["messages"]), report


def test_a_client_dry_run_install_renders_and_leaves_the_crd_to_helm(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")
    result = helm_python.Config(namespace=NAMESPACE, storage_driver="memory").install(str(CHART), "sa", {}, dry_run="client")
    assert result["status"] == "pending-install"
    assert "kind: Deployment" in result["manifest"] and "CustomResourceDefinition" not in result["manifest"]  # crds/ are installed apart


def test_the_chart_ships_exactly_one_crd():
    with helm_python.Chart.load(str(CHART)) as chart:
        assert [c["name"] for c in chart.crds] == ["crds/sparkstreamingapps.yaml"]
        assert chart.metadata["kubeVersion"] == ">=1.29.0-0"
