"""PNG plots of simulated runs: input rate and capacity, executors against the oracle, lag."""

from __future__ import annotations

import bisect
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from autoscaler.tools.sim.runner import Series, SimResult

MAX_POINTS = 6000


def _thin(values: Sequence[float], stride: int, peak: bool = False) -> list[float]:
    """Every ``stride``-th value, or the largest of each run of ``stride`` (so lag spikes stay visible)."""
    if stride <= 1:
        return list(values)
    if peak:
        return [max(values[i : i + stride]) for i in range(0, len(values), stride)]
    return list(values[::stride])


def windowed(series: Series, start: float, end: float) -> Series:
    """The part of ``series`` from ``start`` to ``end`` seconds (the times stay those of the run).

    The budget bound's schedule keeps the count in force at ``start`` (moved to ``start``) and
    its changes up to ``end``; the plot holds the last one to the window's end.
    """
    if not start < end:
        raise ValueError(f"a plot window must end after it starts, got {start:g}-{end:g} s")
    lo, hi = bisect.bisect_left(series.t, start), bisect.bisect_right(series.t, end)
    cut = slice(lo, hi)
    budget: list[tuple[float, int]] = []
    if series.budget:
        starts = [at for at, _ in series.budget]
        first = max(0, bisect.bisect_right(starts, start) - 1)
        budget = [(max(at, start), n) for at, n in series.budget[first:] if at <= end]
    return replace(
        series,
        t=series.t[cut],
        input_rate=series.input_rate[cut],
        capacity=series.capacity[cut],
        executors=series.executors[cut],
        oracle=series.oracle[cut],
        lag=series.lag[cut],
        partitions=series.partitions[cut],
        budget=budget,
    )


def plot_run(result: SimResult, path: Path, window: tuple[float, float] | None = None) -> None:
    """One policy: input rate vs capacity, executors vs oracle, lag vs the SLO; ``window``:
    only the seconds from its start to its end (the title's figures stay the whole run's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result.series
    if s is None:
        raise ValueError("the run kept no series; simulate with series=True")
    end = result.simulated_seconds
    if window is not None:
        s = windowed(s, *window)
        end = min(end, window[1])
    days = (end - (window[0] if window else 0.0)) / 86400
    unit, scale = ("days", 86400.0) if days > 2 else ("hours", 3600.0)
    k = max(1, len(s.t) // MAX_POINTS)
    t = [v / scale for v in _thin(s.t, k)]
    fig, axes = plt.subplots(3, 1, figsize=(12, 8), sharex=True, constrained_layout=True)
    ax = axes[0]
    ax.plot(t, _thin(s.input_rate, k), lw=0.8, color="tab:blue", label="input rate")
    ax.plot(t, _thin(s.capacity, k), lw=0.8, color="tab:orange", alpha=0.8, label="capacity (rows/s in one trigger)")
    ax.set_ylabel("rows/s")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(
        f"{result.trace}: policy {result.policy} - cost {result.cost_ratio:.2f}x oracle, "
        f"SLO violations {result.slo_violation_fraction:.2%}, {result.rescales_per_day:.1f} rescales/day"
    )
    ax = axes[1]
    ax.step(t, _thin(s.oracle, k, peak=True), where="post", lw=0.8, color="tab:gray", label="oracle (needed at full utilization)")
    ax.step(t, _thin(s.executors, k, peak=True), where="post", lw=0.9, color="tab:green", label="executors (allocated)")
    if s.budget:
        # the schedule's last count holds to the end of the run (or of the window)
        starts = [at / scale for at, _ in s.budget] + [end / scale]
        counts = [n for _, n in s.budget] + [s.budget[-1][1]]
        label = f"perfect foresight within {result.budget_rescales_per_day:g} changes a day ({result.budget_oracle_cost_ratio:.2f}x oracle)"
        ax.step(starts, counts, where="post", lw=0.8, ls="--", color="tab:purple", label=label)
    ax.set_ylabel("executors")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[2]
    ax.plot(t, _thin(s.lag, k, peak=True), lw=0.8, color="tab:red", label="lag (age of the oldest waiting row)")
    ax.axhline(result.slo_lag_seconds, ls="--", lw=0.8, color="black", label=f"SLO {result.slo_lag_seconds:g} s")
    ax.set_ylabel("seconds")
    ax.set_yscale("symlog", linthresh=60)
    ax.set_ylim(bottom=0)  # lag is never negative (symlog would label negative decades)
    ax.set_xlabel(unit + (" since the start of the run" if window else ""))
    ax.legend(loc="upper left", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_compare(results: Sequence[SimResult], path: Path) -> None:
    """Several policies on one trace: executors and lag over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results if r.series is not None]
    if not runs:
        raise ValueError("no run kept a series")
    days = runs[0].simulated_seconds / 86400
    unit, scale = ("days", 86400.0) if days > 2 else ("hours", 3600.0)
    fig, axes = plt.subplots(3, 1, figsize=(12, 9), sharex=True, constrained_layout=True)
    first = runs[0].series
    assert first is not None
    k = max(1, len(first.t) // MAX_POINTS)
    t0 = [v / scale for v in _thin(first.t, k)]
    axes[0].plot(t0, _thin(first.input_rate, k), lw=0.8, color="tab:blue")
    axes[0].set_ylabel("input rows/s")
    axes[0].set_title(f"{runs[0].trace}: policies compared")
    axes[1].step(t0, _thin(first.oracle, k, peak=True), where="post", lw=1.0, color="black", label="oracle")
    for r in runs:
        s = r.series
        assert s is not None
        t = [v / scale for v in _thin(s.t, k)]
        label = f"{r.policy} ({r.cost_ratio:.2f}x, {r.slo_violation_fraction:.2%})"
        axes[1].step(t, _thin(s.executors, k, peak=True), where="post", lw=0.7, label=label)
        axes[2].plot(t, _thin(s.lag, k, peak=True), lw=0.6, label=r.policy)
    axes[1].set_ylabel("executors")
    axes[1].legend(loc="upper left", fontsize=7, ncol=2)
    axes[2].axhline(runs[0].slo_lag_seconds, ls="--", lw=0.8, color="black")
    axes[2].set_yscale("symlog", linthresh=60)
    axes[2].set_ylim(bottom=0)
    axes[2].set_ylabel("lag (s)")
    axes[2].set_xlabel(unit)
    fig.savefig(path, dpi=110)
    plt.close(fig)
