"""Simulator parameters: declared once, with the default, its unit and where the number comes from.

Defaults are calibrated from measurements on the project's local Spark 4.3 cluster
(``../shared/notes/spark-4.3-on-this-machine.md``, ``spark-dra-on-streaming-baseline.md``,
``spark-autoscaler benchmark latencies``) and, for executor start-up on Kubernetes, from
published figures. ``docs/benchmarks.md`` renders the table from these declarations
(:func:`calibration_rows`). Every field can be overridden (``SimConfig(**changes)`` or
``simulate --set name=value``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

MAX_NOISE_SIGMA = 2.0  # lognormal sigma of batch durations: 95 % within a factor e^4 = 55 either way


def _p(default: Any, doc: str, source: str) -> Any:
    return field(default=default, metadata={"doc": doc, "source": source})


@dataclass(frozen=True)
class SimConfig:
    """A deterministic model of one Spark Structured Streaming application and its cluster."""

    # --- the workload's cost (batch cost model: o + ceil(P/C) x (w + k x min(P,C) + R/(P x mu))) ---
    rows_per_core_second: float = _p(
        900.0,
        "mu: rows/s one executor core processes (1 ms of work per row)",
        "measured 880-950 rows/s per core on the local cluster (notes: batch job 897/898, streaming 820-840)",
    )
    fixed_cost: float = _p(
        0.2,
        "o: seconds per batch for planning, offset log and commit",
        "measured triggerExecution - addBatch of about 0.2 s on the local cluster",
    )
    task_cost: float = _p(
        0.07,
        "w: seconds of overhead per task (scheduling, serialization), paid once per wave",
        "measured 0.07 s per task with a single executor (fit of the cost model on the local cluster)",
    )
    contention: float = _p(
        0.0,
        "k: extra seconds per task for each concurrent task (executors sharing CPUs)",
        "0 on a real cluster; the 2-core test box fits 0.07-0.37 s, an artefact of 6 JVMs on 2 cores",
    )
    cores_per_executor: int = _p(1, "task slots per executor", "the local-cluster calibration used 1-core executors")
    # --- the query ---
    trigger_interval: float = _p(10.0, "processing-time trigger, seconds", "a common production choice; the issue suggests 10 s")
    partitions: int | None = _p(
        None,
        "initial source partitions (tasks per batch); None: 2 x peak executors x cores",
        "two waves at the peak; a multiple of the peak core count keeps every wave full there",
    )
    min_partitions: int = _p(1, "fewest partitions a rescale may choose (e.g. the Kafka topic's)", "a splittable source")
    max_rows_per_batch: int | None = _p(
        None, "cap on rows per batch (maxOffsetsPerTrigger); None: take everything available", "Spark's default"
    )
    no_data_progress_interval: float = _p(
        1.0,
        "seconds between two reports of a query idle (a trigger that found no new rows)",
        "spark.sql.streaming.noDataProgressEventInterval as the daemon sets it (Spark's default: 10 s): a QueryIdleEvent at most this often, "
        "the first this long after the last batch ended",
    )
    # --- actions ---
    executor_startup: float = _p(
        30.0,
        "seconds from an executor request to its registration",
        "2.3-2.9 s on the idle local cluster (10-14 s under load); published Kubernetes pod start-up 10-60 s "
        "(image pull, scheduling, JVM); 30 s is the middle of that range for a node that already exists",
    )
    executor_startup_jitter: float = _p(0.2, "relative spread of the start-up latency (uniform +-)", "assumption")
    executor_warmup: float = _p(
        1.0,
        "extra seconds on the first tasks of new executors (Python workers, JIT)",
        "first timings right after adding executors are 20-40 % lower on the local cluster",
    )
    removal_delay: float = _p(
        5.0,
        "seconds from killExecutors to the executor being gone",
        "measured 5.07-5.18 s on the local cluster with Spark's 5 s standalone disconnection delay, 1.13-1.15 s with the "
        "daemon's 1 s; 5 s stands for a cluster manager that takes seconds to report the executor gone (a pod's deletion)",
    )
    restart_delay: float = _p(
        1.5,
        "seconds from stopping a query at a batch boundary to its new run's first trigger",
        "measured stop -> first batch done 0.5-2.5 s for fast batches (restart from the same checkpoint)",
    )
    restart_cold_cost: float = _p(
        0.5, "extra seconds on the first batch of a new run (planning, codegen)", "first batch 1.25-1.98 s after start()"
    )
    # --- noise and faults ---
    duration_noise: float = _p(0.05, "relative noise (lognormal sigma) on batch durations", "measured batch spread ~5 %")
    slow_batch_probability: float = _p(0.01, "share of batches slowed by a GC pause or a straggler", "assumption")
    slow_batch_factor: float = _p(2.0, "how much slower such a batch is", "assumption")
    executor_loss_per_hour: float = _p(0.0, "probability per executor-hour of losing an executor", "off by default")
    max_grantable_executors: int | None = _p(
        None, "executors the cluster manager can grant at most (None: unlimited)", "off by default"
    )

    def __post_init__(self) -> None:
        problems, bad = [], set()
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                problems.append(f"{f.name} must be a finite number >= 0, got {value!r}")
                bad.add(f.name)
        for name in ("rows_per_core_second", "trigger_interval", "cores_per_executor", "min_partitions"):
            if name not in bad and not getattr(self, name) > 0:  # each parameter's problem told once
                problems.append(f"{name} must be > 0")
        # none of them may be 0: no row would ever be processed (no partition, no row a batch,
        # no executor granted) and the run would report one endless backlog
        for name in ("partitions", "max_rows_per_batch", "max_grantable_executors"):
            if name not in bad and getattr(self, name) is not None and getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1 (or none), got {getattr(self, name)!r}")
        # beyond these a start-up could end before its request, a batch take e^(sigma x 6) times
        # its cost (overflowing at large sigma), or a probability exceed 1
        for name, most in (("executor_startup_jitter", 1.0), ("duration_noise", MAX_NOISE_SIGMA), ("slow_batch_probability", 1.0)):
            if getattr(self, name) > most:
                problems.append(f"{name} must be <= {most:g}, got {getattr(self, name)!r}")
        if self.fixed_cost + self.task_cost >= self.trigger_interval:
            problems.append("fixed_cost + task_cost must be below the trigger interval")
        if problems:
            raise ValueError("; ".join(problems))

    def executor_capacity(self) -> float:
        """Rows/s one executor sustains at full utilization with one wave per batch.

        What an executor gets done with batches exactly one trigger long (partitions aligned with
        the cores): ``cores x mu x (I - o - w - k) / I``. The oracle uses it: a lower bound for
        any deployment that never falls behind (longer batches, behind, spread the fixed costs
        over more rows and get a little more out of an executor).
        """
        slack = self.trigger_interval - self.fixed_cost - self.task_cost - self.contention
        return self.cores_per_executor * self.rows_per_core_second * max(0.0, slack) / self.trigger_interval

    def with_changes(self, changes: dict[str, Any]) -> SimConfig:
        known = {f.name: f for f in fields(self)}
        typed: dict[str, Any] = {}
        for key, value in changes.items():
            if key not in known:
                raise ValueError(f"unknown simulator parameter {key!r}; known: {', '.join(sorted(known))}")
            if isinstance(value, str):
                text = value.strip().lower()
                if text in ("none", "null", ""):
                    typed[key] = None
                    continue
                try:
                    number = float(text)
                except ValueError:
                    raise ValueError(f"simulator parameter {key}: {value!r} is not a number") from None
                default = known[key].default
                whole = isinstance(default, int) or key in ("partitions", "max_rows_per_batch", "max_grantable_executors")
                if whole and not number.is_integer():  # int() ran 1.9 partitions as 1, and the record said 1.9
                    raise ValueError(f"simulator parameter {key}: expected a whole number, got {value!r}")
                typed[key] = int(number) if whole else number
            else:
                typed[key] = value
        return replace(self, **typed)


def calibration_rows() -> list[tuple[str, str, str, str]]:
    """(parameter, default, meaning, source) for the documentation."""
    default = SimConfig()
    return [(f.name, repr(getattr(default, f.name)), f.metadata["doc"], f.metadata["source"]) for f in fields(SimConfig)]


def render_calibration_table() -> str:
    """The Markdown table of :func:`calibration_rows` that ``docs/benchmarks.md`` carries."""
    lines = ["| parameter | default | meaning | source |", "| --- | --- | --- | --- |"]
    lines += [f"| `{name}` | {default} | {doc} | {source} |" for name, default, doc, source in calibration_rows()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_calibration_table(), end="")
