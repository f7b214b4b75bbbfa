"""The chart through the real Helm engine (``helm-python-sdk``: Helm v4's Go library, no binary).

``python -m tests.unit.chart.render helm/spark-autoscaler/ci/all-on-values.yaml`` prints every
rendered object as one YAML stream (for ``kubernetes-validate``); ``--prometheus-groups`` prints
the PrometheusRule's groups as a rules file (for ``promtool check rules``). ``helm_python`` is
imported at the top: without it the chart tests fail, they do not skip.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import helm_python
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "spark-autoscaler"
CI_FILES = sorted((CHART / "ci").glob("*-values.yaml"))
RELEASE, NAMESPACE = "sa", "spark-system"
KUBE_VERSIONS = ("v1.29.0", "v1.33.0", "v1.37.0")

helm_python.disable_logging()


def values_of(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def render_files(values: dict[str, Any], namespace: str = NAMESPACE) -> dict[str, str]:
    with helm_python.Chart.load(str(CHART)) as chart:
        return chart.render(values, name=RELEASE, namespace=namespace)


def render(values: dict[str, Any], namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object the chart renders. ``render()`` does not parse what it produces: each
    document is parsed here (a broken indentation fails now, not on a cluster)."""
    out = []
    for name, text in sorted(render_files(values, namespace).items()):
        if not name.endswith(".yaml"):
            continue  # NOTES.txt
        out += [doc for doc in yaml.safe_load_all(text) if doc]
    return out


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def prometheus_groups(objs: list[dict[str, Any]]) -> dict[str, Any]:
    [rule] = of_kind(objs, "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def main(argv: list[str]) -> int:
    objs = render(values_of(Path(argv[0])))
    if "--prometheus-groups" in argv:
        print(yaml.safe_dump(prometheus_groups(objs), sort_keys=False), end="")
    else:
        print(yaml.safe_dump_all(objs, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
