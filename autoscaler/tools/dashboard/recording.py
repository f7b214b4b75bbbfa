"""Record what Prometheus would scrape, one JSON line per tick, for offline dashboards.

``MetricsRecorder(registry, path)`` is an ``on_tick`` callback: after each tick it writes
every sample of the registry (the same values ``/metrics`` serves at that moment) with the
tick's time. ``spark-autoscaler demo --record FILE`` uses it; ``spark-autoscaler dashboard
render`` turns a recording into the dashboard's panels (:mod:`autoscaler.tools.dashboard.render`).

Format (JSON lines): a header ``{"format": "spark-autoscaler-metrics", "version": 1}``, then
``{"t": <unix seconds>, "samples": [[name, {labels}, value], ...]}`` per tick.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable

from prometheus_client import CollectorRegistry

from autoscaler.core.model import TickRecord

FORMAT = "spark-autoscaler-metrics"
VERSION = 1

SeriesKey = tuple[str, frozenset[tuple[str, str]]]


def registry_samples(registry: CollectorRegistry) -> list[list[Any]]:
    out: list[list[Any]] = []
    for family in registry.collect():
        for s in family.samples:
            if math.isfinite(s.value):
                out.append([s.name, dict(s.labels), s.value])
    return out


class MetricsRecorder:
    def __init__(self, registry: CollectorRegistry, path: Path | str) -> None:
        self.registry = registry
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        self._file.write(json.dumps({"format": FORMAT, "version": VERSION}) + "\n")
        self._file.flush()

    def __call__(self, record: TickRecord) -> None:
        self.write(record.at.timestamp())

    def write(self, t: float) -> None:
        line = json.dumps({"t": round(t, 3), "samples": registry_samples(self.registry)}, separators=(",", ":"))
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass
class Recording:
    """Scrapes in time order: ``times[i]`` and ``scrapes[i]`` (series -> value)."""

    times: list[float] = field(default_factory=list)
    scrapes: list[dict[SeriesKey, float]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path | str) -> Recording:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        if not lines:
            raise ValueError(f"{path}: empty recording")
        header = json.loads(lines[0])
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ValueError(f"{path}: not a {FORMAT} v{VERSION} recording")
        return cls.from_lines(json.loads(line) for line in lines[1:] if line.strip())

    @classmethod
    def from_lines(cls, rows: Iterable[dict[str, Any]]) -> Recording:
        rec = cls()
        for row in sorted(rows, key=lambda r: r["t"]):
            rec.times.append(float(row["t"]))
            rec.scrapes.append({(name, frozenset(labels.items())): float(value) for name, labels, value in row["samples"]})
        return rec
