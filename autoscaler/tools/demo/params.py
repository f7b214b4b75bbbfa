"""The default policy's time constants for loads compressed from a day into minutes (the demo and
the real-Spark benchmarks), and the warm-up both run first, in a module of their own: both import
it, neither imports the other, and the command line reads its defaults here without importing Spark."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

# Seconds at a low rate before a demo's trace or a benchmark's measured phases: the JVMs' first
# batches are slow, and the policy needs a few batches to estimate the cost of a row.
WARMUP_SECONDS = 30.0

# The demo compresses a day into minutes, so the default policy's time constants (minutes to
# hours, made for loads that move over a day) shrink with it, down to what this cluster can
# physically do: an executor starts in ~10 s, a restart from the checkpoint pauses a few seconds.
# The seasonal forecast needs 5-minute steps of history, which a compressed day does not have.
COMPRESSED_TIME_PARAMS: dict[str, Any] = {
    "catch_up_duration": "60s",
    "min_dwell": "15s",
    "rescale_price": "3s",
    "horizon": "30s",
    "lead_time": "10s",
    "startup_time": "15s",
    "budget_window": "5m",
    "hindsight": "5m",
    "rescale_budget": 5000,  # per (real) day: about 17 executor changes per 5 minutes
    "forecast": False,
}
# In active mode the demo keeps the query's partitions (see PipelineSpec below): a restart from
# the checkpoint pauses this box's Python source 5-30 s, far more than the extra task waves cost.
ACTIVE_PARAMS: dict[str, Any] = {**COMPRESSED_TIME_PARAMS, "align_partitions": False}

# The demo's peak load, sized to the machine it runs on: every JVM of the demo (master, workers,
# executors, driver) and the Python source and sink share its cores, and the rows' overhead (not
# their 1 ms of sleeping work) is what saturates them. On the project's 2-core machine (quiet,
# 2026-12-02) a peak of 1800 rows/s took all 6 executors and still fell behind (a batch at 123 %
# of its trigger on 6 cores at 1641 rows/s: more executor JVMs than cores slow each other), 2800
# held the lag at 40-65 s with no scale-down in 180 s, while at 1200 (600 a core) two runs used
# 1 to 3 executors and 1 to 6 and released them at night (docs/benchmarks.md, "The demo's peak
# on this machine"). 2800 is the most: the day's peak then needs 3 of the 6 one-core executors
# allowed by default, at 1 ms a row before any overhead.
PEAK_RATE_PER_CORE = 600.0
PEAK_RATE_MAX = 2800.0
DEMO_MAX_EXECUTORS = 6  # the demo's default --max-executors


# cgroup v2's CPU quota of this process's group: "max 100000" (none) or "<quota> <period>" in µs
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cores(cpu_max: Path | None = None) -> int:
    """The cores this process may run on: its CPU affinity (which a cpuset, docker's --cpuset-cpus,
    narrows), else the machine's; fewer under a CPU quota (docker's --cpus, a pod's CPU limit):
    quota / period, rounded up (1.5 CPUs run two executors at three quarters each)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if (quota := cpu_quota(CPU_MAX if cpu_max is None else cpu_max)) is not None:
        cores = min(cores, math.ceil(quota))
    return max(1, cores)


def cpu_quota(cpu_max: Path) -> float | None:
    """CPUs the cgroup v2 quota allows (``cpu.max``), or None without one (no such file, cgroup
    v1, ``max``, or a line this does not read)."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return int(quota) / int(period) if int(period) > 0 else None
    except (OSError, ValueError):  # "max 100000" fails int(): no quota
        return None


def default_peak_rate(max_executors: int, cores: int | None = None) -> float:
    """The demo's default peak in rows/s: ``PEAK_RATE_PER_CORE`` for each core it can use (the
    machine's, or its one-core executors' where they are fewer), at most ``PEAK_RATE_MAX``."""
    usable = min(usable_cores() if cores is None else cores, max_executors)
    return min(PEAK_RATE_MAX, PEAK_RATE_PER_CORE * usable)
