"""``autoscaler_trace``: a Python streaming data source replaying a rate profile.

Row ``k`` gets id ``k`` and is generated at ``start + profile.time_of(k)``: offsets are row
counts, so the query's progress reports an exact backlog (``latestOffset - endOffset``), a
restart from the checkpoint replays exact ranges, and the sink can prove every row came out
exactly once. Options: ``profile`` (``RateProfile.encode()``), ``start`` (epoch seconds, the
same across restarts), ``numPartitions``, ``maxRowsPerBatch`` (rate limit) and
``costPerRowMs``: the per-row work, slept in each partition's task on the executors, so
throughput grows with executors even on a 2-core machine.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from autoscaler.tools.traces import RateProfile

NAME = "autoscaler_trace"
SCHEMA = "id long, ts double"


class RowRange(InputPartition):
    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi


def split(lo: int, hi: int, parts: int) -> list[RowRange]:
    """Contiguous, nearly equal ranges (sizes differ by at most one row)."""
    n = hi - lo
    if n <= 0:
        return []
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out, a = [], lo
    for i in range(parts):
        b = a + base + (1 if i < extra else 0)
        out.append(RowRange(a, b))
        a = b
    return out


class TraceStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        # Spark hands options over case-insensitively (keys lower-cased in a plain dict copy)
        options = {k.lower(): v for k, v in options.items()}
        self.profile = RateProfile.decode(options["profile"])
        self.start = float(options["start"])
        self.partitions_count = int(options.get("numpartitions", "1"))
        limit = options.get("maxrowsperbatch")
        self.max_rows = int(limit) if limit else None
        self.cost_seconds = float(options.get("costperrowms", "0")) / 1000.0

    def _available(self) -> int:
        return self.profile.cumulative(time.time() - self.start)

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        available = self._available()
        if isinstance(limit, ReadMaxRows):
            available = min(available, start["row"] + limit.max_rows)
        return {"row": max(available, start["row"])}

    def reportLatestOffset(self) -> dict[str, int]:
        return {"row": self._available()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[RowRange]:
        return split(start["row"], end["row"], self.partitions_count)

    def read(self, partition: InputPartition) -> Iterator[tuple[int, float]]:
        assert isinstance(partition, RowRange)
        chunk = 500  # spread the work over the task instead of one long sleep
        for lo in range(partition.lo, partition.hi, chunk):
            hi = min(lo + chunk, partition.hi)
            if self.cost_seconds > 0:
                time.sleep((hi - lo) * self.cost_seconds)
            for row in range(lo, hi):
                yield (row, self.start + self.profile.time_of(row))

    def commit(self, end: dict[str, int]) -> None:
        pass


class TraceSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TraceStreamReader(self.options)


def register(spark: Any) -> None:
    spark.dataSource.register(TraceSource)
