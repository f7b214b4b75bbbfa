"""Read Structured Streaming progress events into :class:`BatchSample` values.

Backlog is taken from the source offsets where they are numeric and comparable
(``latestOffset - endOffset``, summed over partitions for Kafka-like offsets), from Kafka's
``avgOffsetsBehindLatest`` metric otherwise, and is ``None`` (unknown) for sources that
report neither (file, ``rate-micro-batch``).
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from collections import deque
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from autoscaler.core.model import BatchSample

_RATE_SOURCE = re.compile(r"RateStreamV2\[rowsPerSecond=(\d+)")


def parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def as_offset(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def offset_gap(latest: Any, end: Any) -> int | None:
    """Rows between two offsets of the same shape, or None if they are not comparable."""
    if isinstance(latest, bool) or isinstance(end, bool):
        return None
    if isinstance(latest, (int, float)) and isinstance(end, (int, float)):
        return int(latest - end)
    if isinstance(latest, dict) and isinstance(end, dict):
        total = 0
        for key, value in latest.items():
            if key not in end:
                return None
            gap = offset_gap(value, end[key])
            if gap is None:
                return None
            total += gap
        return total
    return None


def offsets_count_rows(sources: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether a finished batch's sources advanced their offsets by exactly the rows each read
    (``endOffset - startOffset == numInputRows``, offsets summed over partitions as for the
    backlog): True when each did and one read rows, False when one did not (a file source's
    offsets count files, the rate source's seconds, a transactional Kafka topic's include its
    commit markers), None when the batch cannot tell (no rows read, or a start or end offset
    missing or of another shape: a query's first batch, a Kafka partition added)."""
    counted: list[bool] = []  # per source that read rows or moved: whether its offsets moved by its rows
    unknown = False
    for source in sources:
        gap = offset_gap(as_offset(source.get("endOffset")), as_offset(source.get("startOffset")))
        rows = int(source.get("numInputRows") or 0)
        if gap is None:
            unknown = unknown or rows > 0
        elif gap or rows:
            counted.append(gap == rows)
    if not all(counted):
        return False
    return True if counted and not unknown else None


def source_backlog(source: Mapping[str, Any]) -> int | None:
    latest = as_offset(source.get("latestOffset"))
    end = as_offset(source.get("endOffset"))
    metrics = source.get("metrics") or {}
    if latest is not None and end is not None:
        if isinstance(latest, dict) and "logOffset" in latest:
            return None  # file source: offsets count file batches, not rows
        gap = offset_gap(latest, end)
        if gap is not None:
            rate = _RATE_SOURCE.match(str(source.get("description", "")))
            if rate:  # the rate source's offsets are seconds
                gap *= int(rate.group(1))
            return max(0, gap)
    behind = metrics.get("avgOffsetsBehindLatest")
    if behind is not None and isinstance(end, dict):
        try:
            partitions = sum(len(v) if isinstance(v, dict) else 1 for v in end.values())
            return max(0, int(round(float(behind) * partitions)))
        except (TypeError, ValueError):
            return None
    return None


def state_partitions(progress: Mapping[str, Any]) -> int | None:
    ops = progress.get("stateOperators") or []
    values = [op.get("numShufflePartitions") for op in ops if op.get("numShufflePartitions")]
    return int(max(values)) if values else None


def parse_progress(progress: Mapping[str, Any] | str, *, cores: int | None, parallelism: int | None, cold: bool) -> BatchSample:
    data: Mapping[str, Any] = json.loads(progress) if isinstance(progress, str) else progress
    durations = data.get("durationMs") or {}
    duration_ms = data.get("batchDuration")
    if duration_ms is None:
        duration_ms = durations.get("triggerExecution", 0)
    fixed = None
    if "triggerExecution" in durations and "addBatch" in durations:
        fixed = timedelta(milliseconds=max(0.0, float(durations["triggerExecution"]) - float(durations["addBatch"])))
    backlogs = [source_backlog(s) for s in data.get("sources") or []]
    known = [b for b in backlogs if b is not None]
    return BatchSample(
        batch_id=int(data["batchId"]),
        started_at=parse_timestamp(data["timestamp"]),
        duration=timedelta(milliseconds=float(duration_ms or 0)),
        input_rows=int(data.get("numInputRows") or 0),
        input_rate=_float(data.get("inputRowsPerSecond")),
        processing_rate=_float(data.get("processedRowsPerSecond")),
        backlog_rows=sum(known) if backlogs and len(known) == len(backlogs) else None,
        cores=cores,
        parallelism=parallelism,
        fixed_overhead=fixed,
        cold=cold,
    )


def _float(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if f != f else f  # NaN is unknown


class SampleWindow:
    """Thread-safe bounded buffer of batch samples (listener thread writes, reconciler reads)."""

    def __init__(self, max_samples: int = 240) -> None:
        self._samples: deque[BatchSample] = deque(maxlen=max_samples)
        self._lock = threading.Lock()

    def add(self, sample: BatchSample) -> None:
        """Keep the buffer in time order (what :class:`QueryView` promises): an event that arrives
        late goes where its batch started."""
        with self._lock:
            buf = self._samples
            if not buf or buf[-1].started_at <= sample.started_at:
                buf.append(sample)
                return
            index = bisect.bisect_right(buf, sample.started_at, key=_started)
            if len(buf) == buf.maxlen:
                if index == 0:
                    return  # older than everything a full buffer keeps
                buf.popleft()
                index -= 1
            buf.insert(index, sample)

    def snapshot(self) -> tuple[BatchSample, ...]:
        with self._lock:
            return tuple(self._samples)


def _started(sample: BatchSample) -> datetime:
    return sample.started_at
