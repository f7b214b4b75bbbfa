"""The monitoring files the daemon ships: the Grafana dashboard and the Prometheus rules.

One copy each, as package data (``autoscaler/ops/monitoring/``): the dashboard renderer reads
them from an installed wheel, and the Helm chart's ``dashboards/`` and ``rules/`` are links to
the same folders.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

MONITORING = Path(str(files("autoscaler.ops") / "monitoring"))
DASHBOARD = MONITORING / "dashboards" / "spark-autoscaler.json"
RULES = MONITORING / "rules"
ALERT_RULES = RULES / "alerts.yaml"
RECORDING_RULES = RULES / "recording.yaml"
RULES_TESTS = RULES / "rules_test.yaml"
