"""The Grafana dashboard and the Prometheus rules: structure, PromQL syntax (promtool), metric
names that exist, alert unit tests (promtool), and the offline rendering of the panels."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from autoscaler.ops import assets
from autoscaler.ops.metrics import Metrics
from autoscaler.tools.dashboard.promql import Evaluator, PromQLError, parse
from autoscaler.tools.dashboard.recording import Recording
from autoscaler.tools.dashboard.render import (
    DASHBOARD,
    iter_panels,
    panel_exprs,
    render_dashboard,
    substitute_variables,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = assets.RULES
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian package `prometheus`; .ci/run installs it)"
)
METRIC = re.compile(r"\b(spark_autoscaler_[a-z0-9_]+|up)\b(?=\s*[{\[)]|\s*$|\s*[-+*/=<>!]|\s+(?:and|or|unless|by|without)\b)")


@pytest.fixture(scope="module")
def board() -> dict:
    return json.loads(DASHBOARD.read_text())


def rule_exprs() -> list[tuple[str, str]]:
    out = []
    for name in ("alerts.yaml", "recording.yaml"):
        for group in yaml.safe_load((RULES / name).read_text())["groups"]:
            for rule in group["rules"]:
                out.append((rule.get("alert") or rule["record"], rule["expr"]))
    return out


def recorded_names() -> set[str]:
    return {rule["record"] for group in yaml.safe_load((RULES / "recording.yaml").read_text())["groups"] for rule in group["rules"]}


# --- dashboard structure -------------------------------------------------------------------------


def test_panel_ids_are_unique_and_every_panel_fits_the_24_column_grid(board):
    panels = iter_panels(board)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        assert g["y"] >= 0 and g["h"] > 0, p["title"]


def test_panels_do_not_overlap(board):
    cells: dict[tuple[int, int], str] = {}
    for p in iter_panels(board):
        g = p["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = p["title"]


def test_a_datasource_variable_drives_every_panel_and_target(board):
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"application", "query"} <= set(variables)
    for p in iter_panels(board):
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert 'application=~"$application"' in t["expr"], (p["title"], t["expr"])


def test_the_dashboard_covers_what_operators_need(board):
    titles = {p["title"] for p in iter_panels(board)}
    for needed in ("Load vs capacity", "Executors: current and target", "Lag per query", "Backlog per query",
                   "Decisions by reason", "Query rescales and their pause", "Errors by phase"):
        assert needed in titles


# --- PromQL --------------------------------------------------------------------------------------


def all_exprs(board) -> list[tuple[str, str]]:
    exprs = list(panel_exprs(board))
    exprs += [(a["name"], a["expr"]) for a in board["annotations"]["list"] if a.get("expr")]
    return exprs


@needs_promtool
def test_every_dashboard_expression_is_valid_promql(board, tmp_path):
    rules = [{"record": f"dashboard:expr_{i}", "expr": substitute_variables(expr)} for i, (_, expr) in enumerate(all_exprs(board))]
    path = tmp_path / "dashboard-exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


@needs_promtool
def test_promtool_rejects_a_broken_expression_the_same_way(tmp_path):
    """The check above would catch a typo: a bad expression fails the same check."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "x:y", "expr": "sum by (query (spark_autoscaler_executors)"}]}]}))
    assert subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, timeout=60).returncode != 0


def test_every_metric_referenced_by_the_dashboard_and_the_rules_exists(board):
    exposed = Metrics.names(Metrics(CollectorRegistry(), application="x").registry) | {"up"} | recorded_names()
    referenced = {}
    for where, expr in all_exprs(board) + rule_exprs():
        for name in re.findall(r"\b(spark_autoscaler_[a-z0-9_]+|[a-z_]+:spark_autoscaler_[a-z0-9_:]+)\b", expr):
            referenced.setdefault(name, where)
    missing = {name: where for name, where in referenced.items() if name not in exposed}
    assert not missing, f"not exposed by autoscaler/metrics.py: {missing}"
    assert len(referenced) > 20


def test_every_panel_expression_can_be_drawn_offline(board):
    for title, expr in panel_exprs(board):
        parse(substitute_variables(expr))  # raises PromQLError naming what is unsupported


# --- rules ---------------------------------------------------------------------------------------


@needs_promtool
def test_alerting_and_recording_rules_pass_promtool_check():
    result = subprocess.run([PROMTOOL, "check", "rules", "alerts.yaml", "recording.yaml"], cwd=RULES, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_alert_unit_tests_pass():
    result = subprocess.run([PROMTOOL, "test", "rules", "rules_test.yaml"], cwd=RULES, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test_and_a_severity_and_a_summary():
    tests = yaml.safe_load((RULES / "rules_test.yaml").read_text())["tests"]
    tested = {t["alertname"] for case in tests for t in case.get("alert_rule_test", ())}
    fired = {t["alertname"] for case in tests for t in case.get("alert_rule_test", ()) if t["exp_alerts"]}
    for group in yaml.safe_load((RULES / "alerts.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            assert rule["alert"] in fired, f"{rule['alert']} is never shown to fire in rules_test.yaml"
            assert rule["labels"]["severity"] in ("critical", "warning", "info")
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]
    assert tested == fired


# --- the offline evaluator -------------------------------------------------------------------------


def recording(rows):
    return Recording.from_lines({"t": t, "samples": samples} for t, samples in rows)


def counter(value, **labels):
    return ["c_total", labels, value]


@pytest.mark.parametrize(
    "expr, expected",
    [
        pytest.param("c_total", {(("__name__", "c_total"), ("k", "a")): 10.0, (("__name__", "c_total"), ("k", "b")): 3.0}, id="selector"),
        pytest.param('c_total{k="a"}', {(("__name__", "c_total"), ("k", "a")): 10.0}, id="matcher"),
        pytest.param('c_total{k=~"a|b"} > 5', {(("__name__", "c_total"), ("k", "a")): 10.0}, id="regex-and-filter"),
        pytest.param("sum(c_total)", {(): 13.0}, id="sum-all"),
        pytest.param("max by (k) (c_total)", {(("k", "a"),): 10.0, (("k", "b"),): 3.0}, id="max-by"),
        pytest.param("increase(c_total[20s])", {(("k", "a"),): 10.0, (("k", "b"),): 3.0}, id="increase-with-reset"),
        # ranges are left-open, (t - 20s, t]: the samples at 10, 15 and 20 s; 10 rows over 10 s
        pytest.param("rate(c_total[20s])", {(("k", "a"),): 1.0, (("k", "b"),): 0.3}, id="rate"),
        pytest.param("increase(c_total[10s])", {(("k", "a"),): 6.0, (("k", "b"),): 3.0}, id="window"),
        pytest.param("time() - 5", 15.0, id="scalar"),
        pytest.param('sum(c_total{k="a"}) / sum(c_total)', {(): 10 / 13}, id="vector-division"),
    ],
)
def test_the_evaluator_computes_promql(expr, expected):
    # k=a: 0, 6, 4 (a reset), 10 ; k=b: 0, 0, 0, 3
    rec = recording([(0, [counter(0, k="a"), counter(0, k="b")]), (10, [counter(6, k="a"), counter(0, k="b")]),
                     (15, [counter(4, k="a"), counter(0, k="b")]), (20, [counter(10, k="a"), counter(3, k="b")])])
    ev = Evaluator(rec)
    value = ev.eval(parse(expr), 3, 20.0)
    if isinstance(expected, dict):
        assert {tuple(sorted(k)): round(v, 6) for k, v in value.items()} == {k: round(v, 6) for k, v in expected.items()}
    else:
        assert value == expected


def test_histogram_quantile_interpolates_within_the_bucket():
    def bucket(le, v):
        return ["h_bucket", {"le": le}, v]

    rec = recording([(0, [bucket("1.0", 0), bucket("2.0", 0), bucket("5.0", 0), bucket("+Inf", 0)]),
                     (10, [bucket("1.0", 2), bucket("2.0", 6), bucket("5.0", 10), bucket("+Inf", 10)])])
    value = Evaluator(rec).eval(parse("histogram_quantile(0.5, sum by (le) (increase(h_bucket[1m])))"), 1, 10.0)
    assert value == {frozenset(): pytest.approx(1.75)}  # rank 5 of 10: 3 of the 4 in (1, 2]


@pytest.mark.parametrize("expr", ["a / on (x) b", "a offset 5m", "sum by (x (a)", "foo(a)", "a[5m]"])
def test_unsupported_or_broken_expressions_are_reported(expr):
    with pytest.raises(PromQLError):
        Evaluator(recording([(0, [["a", {}, 1]])])).series(expr)


def test_grafana_variables_are_substituted():
    assert substitute_variables('rate(x{a=~"$application", q=~"${query}"}[$__rate_interval])', "8s") == 'rate(x{a=~".*", q=~".*"}[8s])'


# --- rendering -------------------------------------------------------------------------------------


def test_the_dashboard_renders_from_a_recorded_run_with_data_in_every_panel(board, tmp_path):
    from tests.harness import record_scenario

    record_scenario(tmp_path / "run.jsonl")
    rec = Recording.load(tmp_path / "run.jsonl")
    assert len(rec.times) > 50
    report = render_dashboard(rec, tmp_path / "dashboard.png", dashboard=board)
    assert (tmp_path / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = [title for title, n in report.series.items() if n == 0]
    assert empty == [], f"panels without data: {empty}"


def test_the_docs_show_the_dashboard():
    png = ROOT / "docs" / "img" / "dashboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "img/dashboard.png" in (ROOT / "docs" / "operations.md").read_text()
