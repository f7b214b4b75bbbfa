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
LAST_SECOND = 253402300800.0  # 10000-01-01: the end of what a recording's times may be
MAX_SPAN_SECONDS = 400 * 86400.0  # a year of one run's ticks; beyond it, promtool's blocks take hours

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
        """The recording in ``path``; ValueError naming the file, and the line, of what is wrong
        (OSError when it cannot be read)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        # JSON lines end in "\n" (splitlines also breaks at "\r", "\x1c", ...: the line numbers would not be an editor's)
        lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
        if not lines:
            raise ValueError(f"{path}: empty recording")
        if not _is_header(lines[0][1]):
            raise ValueError(f'{path}, line {lines[0][0]}: not a {FORMAT} v{VERSION} recording (expected the header {{"format": "{FORMAT}", "version": {VERSION}}})')
        if len(lines) == 1:
            raise ValueError(f"{path}: a header and no scrapes (the run ended before its first tick?)")
        return cls._of(str(path), (_scrape_line(path, n, line) for n, line in lines[1:]))

    @classmethod
    def from_lines(cls, rows: Iterable[dict[str, Any]]) -> Recording:
        """The recording of scrapes given as the file's rows; checked as :meth:`load` checks them."""
        return cls._of("the recording", (_scrape(row) for row in rows))

    @classmethod
    def _of(cls, where: str, scrapes: Iterable[tuple[float, dict[SeriesKey, float]]]) -> Recording:
        rec = cls()
        for t, scrape in sorted(scrapes, key=lambda s: s[0]):
            rec.times.append(t)
            rec.scrapes.append(scrape)
        if rec.times and (span := rec.times[-1] - rec.times[0]) > MAX_SPAN_SECONDS:
            raise ValueError(f"{where}: its scrapes span {span / 86400:.0f} days, more than {MAX_SPAN_SECONDS / 86400:.0f}: "
                             "the recordings of two runs, or a time typed wrong? (promtool builds a block for every 2 hours)")
        return rec


def _is_header(line: str) -> bool:
    try:
        header = json.loads(line)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT and header.get("version") == VERSION


def _scrape(row: Any) -> tuple[float, dict[SeriesKey, float]]:
    """A tick's time and samples; KeyError, TypeError, ValueError or AttributeError when ``row`` is none."""
    t = float(row["t"])
    if not 0 <= t < LAST_SECOND:  # 1e300 hung promtool, which builds a block for every 2 hours up to it
        raise ValueError(f"t must be unix seconds from 1970 to 9999, got {row['t']!r}")
    return t, {(name, frozenset(labels.items())): float(value) for name, labels, value in row["samples"]}


def _scrape_line(path: Path | str, n: int, line: str) -> tuple[float, dict[SeriesKey, float]]:
    try:
        return _scrape(json.loads(line))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        shape = '{"t": <unix seconds>, "samples": [[name, {labels}, value], ...]}'
        raise ValueError(f"{path}, line {n}: expected a scrape {shape} ({type(exc).__name__}: {exc})") from None
