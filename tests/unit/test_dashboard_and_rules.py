"""The Grafana dashboard and the Prometheus rules: structure, PromQL syntax (promtool), metric
names that exist, alert unit tests (promtool), and every panel's query answered by a real
Prometheus server holding a recorded run (the rules loaded beside it).

promtool and prometheus come with Debian's ``prometheus`` package, which ``.ci/run`` installs:
without them these tests fail, naming the package, rather than skip."""

from __future__ import annotations

import json
import re
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from autoscaler.ops import assets
from autoscaler.ops.metrics import Metrics
from autoscaler.runtime.waiting import poll
from autoscaler.tools.dashboard.prometheus import (
    PrometheusError,
    PrometheusQueries,
    fitting_step,
    get_json,
    openmetrics,
    served_recording,
    tool,
)
from autoscaler.tools.dashboard.recording import Recording
from autoscaler.tools.dashboard.render import (
    DASHBOARD,
    iter_panels,
    panel_exprs,
    promql_duration,
    render_recording,
    substitute_variables,
)
from tests.processes import below, named

ROOT = Path(__file__).resolve().parents[2]
RULES = assets.RULES


@pytest.fixture(scope="module")
def promtool() -> str:
    return tool("promtool")  # PrometheusError naming the package when it is missing

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


def test_every_dashboard_expression_is_valid_promql(board, tmp_path, promtool):
    rules = [{"record": f"dashboard:expr_{i}", "expr": substitute_variables(expr)} for i, (_, expr) in enumerate(all_exprs(board))]
    path = tmp_path / "dashboard-exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_promtool_rejects_a_broken_expression_the_same_way(tmp_path, promtool):
    """The check above would catch a typo: a bad expression fails the same check."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "x:y", "expr": "sum by (query (spark_autoscaler_executors)"}]}]}))
    assert subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, timeout=60).returncode != 0


def test_every_metric_referenced_by_the_dashboard_and_the_rules_exists(board):
    exposed = Metrics.names(Metrics(CollectorRegistry(), application="x").registry) | {"up"} | recorded_names()
    referenced = {}
    for where, expr in all_exprs(board) + rule_exprs():
        for name in re.findall(r"\b(spark_autoscaler_[a-z0-9_]+|[a-z_]+:spark_autoscaler_[a-z0-9_:]+)\b", expr):
            referenced.setdefault(name, where)
    missing = {name: where for name, where in referenced.items() if name not in exposed}
    assert not missing, f"not exposed by autoscaler/metrics.py: {missing}"
    assert len(referenced) > 20


# --- rules ---------------------------------------------------------------------------------------


def test_alerting_and_recording_rules_pass_promtool_check(promtool):
    result = subprocess.run([promtool, "check", "rules", "alerts.yaml", "recording.yaml"], cwd=RULES, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_unit_tests_pass(promtool):
    result = subprocess.run([promtool, "test", "rules", "rules_test.yaml"], cwd=RULES, capture_output=True, text=True, timeout=120)
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


# --- a real Prometheus answers every panel -------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Recording:
    from tests.harness import record_scenario

    path = tmp_path_factory.mktemp("recording") / "run.jsonl"
    record_scenario(path)
    rec = Recording.load(path)
    assert len(rec.times) > 50
    return rec


@pytest.fixture(scope="module")
def prometheus(recorded):
    """A real Prometheus server on loopback holding the recorded run, with the shipped rules loaded."""
    with served_recording(recorded, rule_files=[RULES / "alerts.yaml", RULES / "recording.yaml"], evaluation_interval="1s") as url:
        yield url


def test_every_panel_query_returns_data_from_a_real_prometheus_for_a_recorded_run(board, recorded, prometheus):
    step = recorded.times[1] - recorded.times[0]
    queries = PrometheusQueries(prometheus, recorded.times[0], recorded.times[-1], step)
    rate_interval = f"{4 * step:g}s"
    empty = [(title, expr) for title, expr in panel_exprs(board) if not queries.series(substitute_variables(expr, rate_interval))]
    assert empty == [], f"queries without data: {empty}"
    executors = queries.series('sum(spark_autoscaler_executors{application=~".*"})')
    assert len(next(iter(executors.values()))) > 50  # a point a scrape, not one value


def test_the_shipped_rules_load_into_the_real_server(prometheus):
    shipped = {
        rule.get("alert") or rule["record"]
        for name in ("alerts.yaml", "recording.yaml")
        for group in yaml.safe_load((RULES / name).read_text())["groups"]
        for rule in group["rules"]
    }
    alerts = {rule["alert"] for group in yaml.safe_load((RULES / "alerts.yaml").read_text())["groups"] for rule in group["rules"]}
    rules: dict[str, dict] = {}
    for _ in range(100):  # the alerts are evaluated every second here: wait for their first round
        groups = get_json(f"{prometheus}/api/v1/rules")["data"]["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        if alerts <= rules.keys() and all(rules[a]["health"] != "unknown" for a in alerts):
            break
        time.sleep(0.2)
    assert set(rules) == shipped  # every rule of both files loaded
    assert {rules[a]["health"] for a in alerts} == {"ok"}, {a: rules[a].get("lastError") for a in alerts}
    # the recording group keeps its own 30 s interval: whatever has been evaluated so far went well
    assert all(rule["health"] in ("ok", "unknown") and not rule.get("lastError") for rule in rules.values())


def test_a_query_prometheus_refuses_is_an_error_naming_its_reason(recorded, prometheus):
    with pytest.raises(PrometheusError, match="bad_data"):
        PrometheusQueries(prometheus, recorded.times[0], recorded.times[-1], 5).series("sum by (query (spark_autoscaler_executors)")


def test_a_rate_interval_of_a_fraction_of_a_second_is_a_duration_prometheus_accepts(recorded, prometheus):
    # the demo's tick is 2 s plus the tick's own time: a recording's step is 2.039 s, its rate
    # interval four of them; `dashboard render` failed on "[8.156s]" (bad_data, not a valid duration)
    queries = PrometheusQueries(prometheus, recorded.times[0], recorded.times[-1], 2.039)
    expr = "sum(rate(spark_autoscaler_reconcile_duration_seconds_count[{}]))"
    assert promql_duration(4 * 2.039) == "8156ms"
    assert queries.series(expr.format(promql_duration(4 * 2.039)))
    with pytest.raises(PrometheusError, match="not a valid duration"):
        queries.series(expr.format("8.156s"))


def test_a_recording_becomes_openmetrics_with_a_timestamp_per_sample_and_escaped_labels():
    rec = Recording.from_lines([{"t": 1700000000.5, "samples": [["x_total", {"q": 'a"b\\c'}, 2.0], ["y", {}, float("nan")]]}])
    assert openmetrics(rec) == 'x_total{q="a\\"b\\\\c"} 2.0 1700000000.500\n# EOF\n'


def test_scrapes_given_as_rows_are_held_to_the_files_span():
    # a file was refused beyond 400 days (promtool builds a block for every 2 hours); rows were not
    with pytest.raises(ValueError, match="the recording: its scrapes span 1157 days, more than 400"):
        Recording.from_lines([{"t": 1.7e9, "samples": []}, {"t": 1.8e9, "samples": []}])


def test_the_dashboard_renders_from_a_recorded_run_with_data_in_every_panel(board, recorded, tmp_path):
    report = render_recording(recorded, tmp_path / "dashboard.png", dashboard=board)
    assert (tmp_path / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = [title for title, n in report.series.items() if n == 0]
    assert empty == [], f"panels without data: {empty}"


def test_a_recording_of_one_scrape_renders_without_a_warning(board, recorded, tmp_path):
    # a demo stopped at its first tick: matplotlib warned of identical x limits, naming its source line
    one = Recording(times=recorded.times[:1], scrapes=recorded.scrapes[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        render_recording(one, tmp_path / "one.png", dashboard=board)
    assert (tmp_path / "one.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_recording_of_more_scrapes_than_a_range_query_answers_renders_every_few_scrapes(board, tmp_path):
    # 11,500 scrapes 2 s apart (a demo of 6.4 hours): Prometheus answers at most 11,000 points a
    # series, and the render asked for a point a scrape ("exceeded maximum resolution")
    lines = [{"t": 1.7e9 + 2 * i, "samples": [["spark_autoscaler_executors", {"application": "a"}, 3 + i // 5000]]} for i in range(11_500)]
    report = render_recording(Recording.from_lines(lines), tmp_path / "long.png", dashboard=board)
    assert report.series["Executors: current and target"] == 1
    assert fitting_step(22_998, 2.0) == 2.091 and fitting_step(600, 2.0) == 2.0
    with pytest.raises(ValueError, match="give at least 2.091 s"):
        PrometheusQueries("http://127.0.0.1:1", 0, 22_998, 2.0)


def test_sigterm_stops_a_render_with_its_throwaway_prometheus_and_leaves_nothing(tmp_path, tmp_path_factory):
    """kill or timeout during `dashboard render`: before, the command died (143), its Prometheus
    outlived it and its temporary directory was left behind."""
    import os
    import signal
    import sys

    from tests.harness import record_scenario

    path = tmp_path_factory.mktemp("recording") / "run.jsonl"
    record_scenario(path)
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its throwaway directories go here, to be counted
    proc = subprocess.Popen([sys.executable, "-m", "autoscaler", "dashboard", "render", "--recording", str(path), "--output", str(tmp_path / "d.png")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        # its children are promtool (short-lived: it builds the blocks), then Prometheus; wait
        # for Prometheus itself, and judge what the wait found rather than look again (a CI run
        # with a busy neighbour saw promtool, and by the next look promtool had ended and
        # Prometheus had not yet started)
        servers = poll(lambda: named(below(proc.pid, recursive=False), "prometheus"), 60, 0.05)
        assert servers, f"the render started no Prometheus (exit {proc.poll()})"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert "interrupted" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("spark-autoscaler-prometheus-")] == []


def test_the_docs_show_the_dashboard():
    png = ROOT / "docs" / "img" / "dashboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "img/dashboard.png" in (ROOT / "docs" / "operations.md").read_text()
