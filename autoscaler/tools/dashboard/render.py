"""The Grafana dashboard, drawn without Grafana: each panel's own queries, answered by Prometheus.

``render_recording(recording, out_png)`` backfills a metrics recording (``demo --record``) into
a throwaway Prometheus server (:mod:`~autoscaler.tools.dashboard.prometheus`);
``render_dashboard(queries, out_png)`` takes any Prometheus (one that scrapes a running daemon,
say). The panels are laid out as Grafana does (24 columns, ``gridPos`` in grid units); every
target's ``expr`` is a range query (Grafana variables: ``$application`` and ``$query`` match
everything, ``$__rate_interval`` is four scrape intervals); stat panels show their last value,
time series are drawn as lines or bars with the panel's legend format.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from autoscaler.ops import assets
from autoscaler.tools.dashboard.prometheus import PrometheusQueries, fitting_step, served_recording
from autoscaler.tools.dashboard.recording import Recording

DASHBOARD = assets.DASHBOARD
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def promql_duration(seconds: float) -> str:
    """A PromQL duration: whole milliseconds (Prometheus refuses ``8.156s``; a recording's tick,
    and so its step, is rarely a whole second)."""
    return f"{max(1, round(seconds * 1000))}ms"


def substitute_variables(expr: str, rate_interval: str = "1m", interval: str = "30s", range_: str = "1h") -> str:
    """Replace Grafana's variables so the expression is plain PromQL."""
    out = expr.replace("$__rate_interval", rate_interval).replace("${__rate_interval}", rate_interval)
    out = out.replace("$__interval", interval).replace("${__interval}", interval)
    out = out.replace("$__range", range_).replace("${__range}", range_)
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", ".*", out)


def panel_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every query target, nested rows included."""
    out = []
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", ()):
            if target.get("expr"):
                out.append((panel.get("title", ""), target["expr"]))
    return out


def iter_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard.get("panels", ()):
        panels.append(panel)
        panels.extend(panel.get("panels", ()))  # collapsed rows keep their panels inside
    return panels


def legend(fmt: str, labels: frozenset[tuple[str, str]]) -> str:
    values = dict(labels)
    if not fmt:
        return ", ".join(f"{k}={v}" for k, v in sorted(values.items()) if k != "__name__") or "value"
    return _LEGEND.sub(lambda m: values.get(m.group(1), ""), fmt).strip()


class DashboardError(ValueError):
    """A dashboard file the renderer cannot draw; the message names the file and what is wrong."""


def read_dashboard(path: Path | str) -> dict[str, Any]:
    """The dashboard JSON at ``path``, checked for what drawing it reads (:class:`DashboardError`
    otherwise): an object whose ``panels`` are objects, each with a ``type``, a ``gridPos`` of
    whole ``x``, ``y``, ``w`` and ``h`` within Grafana's 24 columns, and ``targets`` of ``expr``
    text (a stat panel at least one)."""
    try:
        board = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DashboardError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except UnicodeDecodeError:
        raise DashboardError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise DashboardError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if not isinstance(board, dict) or not isinstance(board.get("panels"), list) or not board["panels"]:
        raise DashboardError(f"{path}: a Grafana dashboard is a JSON object with a non-empty 'panels' list")
    for i, panel in enumerate(iter_panels(board)):
        if problem := _panel_problem(panel):
            title = panel.get("title") if isinstance(panel, dict) else None
            raise DashboardError(f"{path}: panel {i}{f' ({title!r})' if title else ''}: {problem}")
    return board


def _panel_problem(panel: Any) -> str | None:
    if not isinstance(panel, dict):
        return f"must be an object, got {panel!r}"
    if not isinstance(panel.get("type"), str):
        return "has no 'type'"
    grid = panel.get("gridPos")
    if not isinstance(grid, dict) or not all(type(grid.get(k)) is int for k in "xywh"):
        return "needs a 'gridPos' of whole numbers x, y, w and h"
    if grid["x"] < 0 or grid["y"] < 0 or grid["w"] < 1 or grid["h"] < 1 or grid["x"] + grid["w"] > 24:
        return f"gridPos {grid} is outside Grafana's 24-column grid (x >= 0, y >= 0, w and h >= 1, x + w <= 24)"
    targets = panel.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, dict) and isinstance(t.get("expr", ""), str) for t in targets):
        return "'targets' must be a list of objects whose 'expr' is PromQL text"
    if panel["type"] == "stat" and not targets:
        return "a stat panel needs a target"
    if not isinstance(panel.get("panels", []), list):
        return "'panels' of a row must be a list"
    return None


@dataclass
class RenderReport:
    """What was drawn: series per panel title (empty panels are worth a look)."""

    series: dict[str, int] = field(default_factory=dict)


def render_recording(
    recording: Recording,
    output: Path | str,
    *,
    dashboard: Path | str | dict[str, Any] = DASHBOARD,
    title: str | None = None,
) -> RenderReport:
    """Draw the dashboard over a recording, queried from a Prometheus holding just that recording."""
    if not recording.times:
        raise ValueError("the recording has no scrapes")
    steps = [b - a for a, b in pairwise(recording.times)]
    scrape = statistics.median(steps) if steps else 15.0
    start, end = recording.times[0], recording.times[-1]
    with served_recording(recording) as url:
        queries = PrometheusQueries(url, start, end, fitting_step(end - start, scrape))
        return render_dashboard(queries, output, dashboard=dashboard, title=title, scrapes=len(recording.times))


def render_dashboard(
    queries: PrometheusQueries,
    output: Path | str,
    *,
    dashboard: Path | str | dict[str, Any] = DASHBOARD,
    title: str | None = None,
    scrapes: int | None = None,
) -> RenderReport:
    """Draw every panel of ``dashboard`` from ``queries`` (their range and step) into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    board = dashboard if isinstance(dashboard, dict) else read_dashboard(dashboard)
    rate_interval = promql_duration(4 * queries.step)  # Grafana: max(interval + scrape, 4 x scrape)
    evaluator = queries
    t0, t1 = queries.start, queries.end
    panels = [p for p in board.get("panels", ()) if p.get("type") != "row"]
    rows = [p for p in board.get("panels", ()) if p.get("type") == "row"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in board["panels"])
    fig = plt.figure(figsize=(24, height * 0.5), dpi=80)
    grid = GridSpec(height, 24, figure=fig, hspace=3.0, wspace=2.0, left=0.04, right=0.97, top=0.96, bottom=0.02)
    heading = title or board.get("title", "dashboard")
    span = f"{scrapes} scrapes over {t1 - t0:.0f} s" if scrapes is not None else f"{t1 - t0:.0f} s"
    fig.suptitle(f"{heading}\n{span}; x axis: seconds since the first", fontsize=15, fontweight="bold")
    for row in rows:
        y = row["gridPos"]["y"]
        ax = fig.add_subplot(grid[y, :])
        ax.axis("off")
        ax.text(0, 0.5, row.get("title", ""), fontsize=13, fontweight="bold", va="center", color="#333")
    report = RenderReport()
    for panel in panels:
        g = panel["gridPos"]
        ax = fig.add_subplot(grid[g["y"]:g["y"] + g["h"], g["x"]:g["x"] + g["w"]])
        drawn = 0
        if panel["type"] == "stat":
            drawn = _stat(ax, panel, evaluator, rate_interval)
        else:
            drawn = _timeseries(ax, panel, evaluator, rate_interval, t0, t1)
        report.series[panel.get("title", "")] = drawn
        ax.set_title(panel.get("title", ""), fontsize=11, loc="left")
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    plt.close(fig)
    return report


def _unit(panel: dict[str, Any]) -> str:
    return str(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", ""))


def _stat(ax: Any, panel: dict[str, Any], ev: PrometheusQueries, rate_interval: str) -> int:
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_color("#ccc")
    target = panel["targets"][0]
    series = ev.series(substitute_variables(target["expr"], rate_interval))
    if not series:
        ax.text(0.5, 0.45, "no data", ha="center", va="center", fontsize=14, color="#999", transform=ax.transAxes)
        return 0
    labels, points = max(series.items(), key=lambda kv: kv[1][-1][0])
    value = points[-1][1]
    mode = panel.get("options", {}).get("textMode", "value")
    mappings = panel.get("fieldConfig", {}).get("defaults", {}).get("mappings", [])
    text, color = _format(value, _unit(panel)), "#2a7"
    for mapping in mappings:
        hit = mapping.get("options", {}).get(f"{value:g}")
        if hit:
            text, color = hit.get("text", text), {"orange": "#e80", "blue": "#36c", "green": "#2a7"}.get(hit.get("color"), color)
    if mode == "name":
        text = legend(target.get("legendFormat", ""), labels)
    ax.text(0.5, 0.45, text, ha="center", va="center", fontsize=22, fontweight="bold", color=color, transform=ax.transAxes)
    return len(series)


def _format(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"
    if unit == "percentunit":
        return f"{value:.0%}"
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.3g}"


def _overrides(panel: dict[str, Any], name: str) -> dict[str, Any]:
    """Field overrides (byName, byRegexp) that apply to a series named ``name``."""
    props: dict[str, Any] = {}
    for o in panel.get("fieldConfig", {}).get("overrides", ()):
        m = o.get("matcher", {})
        hit = (m.get("id") == "byName" and m.get("options") == name) or (
            m.get("id") == "byRegexp" and re.fullmatch(str(m.get("options")), name) is not None
        )
        if hit:
            props.update({p["id"]: p.get("value") for p in o.get("properties", ())})
    return props


def _timeseries(ax: Any, panel: dict[str, Any], ev: PrometheusQueries, rate_interval: str, t0: float, t1: float) -> int:
    style = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
    stacked = style.get("stacking", {}).get("mode") == "normal"
    drawn = 0
    right: Any = None
    bottoms: dict[float, float] = {}
    width = max(1.0, (t1 - t0) / 120)
    for target in panel.get("targets", ()):
        series = ev.series(substitute_variables(target["expr"], rate_interval))
        for labels, points in sorted(series.items(), key=lambda kv: legend(target.get("legendFormat", ""), kv[0])):
            xs = [t - t0 for t, _ in points]
            ys = [v for _, v in points]
            name = legend(target.get("legendFormat", ""), labels)
            props = _overrides(panel, name)
            axis = ax
            if props.get("custom.axisPlacement") == "right":
                right = right if right is not None else ax.twinx()
                axis = right
            color = (props.get("color") or {}).get("fixedColor")
            if props.get("custom.drawStyle", style.get("drawStyle")) == "bars":
                if not any(ys):
                    continue
                base = [bottoms.get(x, 0.0) for x in xs] if stacked else None
                axis.bar(xs, ys, width=width, bottom=base, label=name, alpha=0.75, color=color)
                if stacked:
                    for x, y in zip(xs, ys, strict=True):
                        bottoms[x] = bottoms.get(x, 0.0) + y
            else:
                dashed = (props.get("custom.lineStyle") or {}).get("fill") == "dash"
                axis.plot(xs, ys, label=name, linewidth=1.8, linestyle="--" if dashed else "-", drawstyle="steps-post", color=color)
            drawn += 1
    unit = _unit(panel)
    if unit == "percentunit":
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    elif unit and unit not in ("short", "none"):
        ax.set_ylabel(unit, fontsize=9)
    ax.set_xlim(0, max(t1 - t0, 1.0))  # one scrape spans 0 s: matplotlib warned, naming its own source line
    for axis in (ax, right):
        if axis is not None and axis.has_data() and axis.get_ylim()[0] >= 0:
            axis.set_ylim(bottom=0, top=axis.get_ylim()[1] * 1.1 or 1)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    if right is not None:
        right.tick_params(labelsize=8)
    handles, names = ax.get_legend_handles_labels()
    if right is not None:
        more = right.get_legend_handles_labels()
        handles, names = handles + more[0], names + more[1]
    if drawn:
        ax.legend(handles, names, fontsize=8, loc="upper left", ncol=2 if drawn > 4 else 1, framealpha=0.7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=12, color="#999", transform=ax.transAxes)
    return drawn
