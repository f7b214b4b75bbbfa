"""The default policy's time constants for loads compressed from a day into minutes (the demo and
the real-Spark benchmarks), and the warm-up both run first, in a module of their own: both import
it, neither imports the other, and the command line reads its defaults here without importing Spark."""

from __future__ import annotations

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
